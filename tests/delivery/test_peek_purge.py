"""Peek and purge on a real daemon: reading the oldest ready messages without claiming them,
and emptying a queue in every state while it keeps its settings."""

import base64

import pytest

from support import files_in, poll_for, ready_daemon

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("peek_purge")


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    """One daemon for the module, each test on queues of its own; a claimed message stays
    claimed for a minute (no redelivery while a test counts what is ready)."""
    yield from ready_daemon(tmp_path_factory.mktemp("peek-purge"), workers=2, timeout=60)


def test_peek_shows_the_oldest_ready_messages_and_claims_nothing(mq):
    ids = [mq.add("peeked", b"body %d" % n) for n in range(5)]
    page = mq.request("GET", "/peeked/peek?max=3").json()
    assert [m["id"] for m in page["messages"]] == ids[:3]
    assert base64.b64decode(page["messages"][0]["body"]) == b"body 0"
    assert page["messages"][0]["attempts"] == 0 and page["messages"][0]["created_ms"] > 0
    after = mq.request("GET", f"/peeked/peek?max=10&after={ids[2]}").json()["messages"]
    assert [m["id"] for m in after] == ids[3:]
    # Nothing was hidden: a fetch still gets the oldest.
    assert mq.fetch("peeked").header("X-Message-Id") == ids[0]
    assert [m["id"] for m in mq.request("GET", "/peeked/peek").json()["messages"]] == ids[1:]
    assert mq.request("GET", "/peeked").json()["ready"] == 4


def test_peek_refuses_bad_parameters_and_missing_queues(mq):
    mq.add("peek-args", b"x")
    for query in ("max=0", "max=1001", "max=two", "after=not-an-id", "max=" + "9" * 30):
        resp = mq.request("GET", f"/peek-args/peek?{query}")
        assert resp.status == 400 and resp.json()["error"] == "invalid", query
    assert mq.request("GET", "/no-such-queue/peek").status == 404


def test_purge_removes_ready_delayed_and_in_flight_and_keeps_the_queues_settings(mq):
    assert mq.request("PATCH", "/purged/properties", b'{"retry": 7}').status == 200
    for n in range(3):
        mq.add("purged", b"ready %d" % n)
    assert mq.request("POST", "/purged/messages?delay=60", b"later").status == 201
    assert mq.fetch("purged").status == 200  # One in flight.
    assert mq.request("POST", "/purged/purge").json() == {"queue": "purged", "purged": 4}
    assert mq.fetch("purged").status == 204
    assert files_in(mq.root / "queues" / "purged") == []
    assert not [n for n in files_in(mq.root / "delay") if n.startswith("purged:")]
    assert mq.request("GET", "/purged/properties").json()["own"] == {"retry": 7}
    # The queue goes on working: a new message is served.
    new = mq.add("purged", b"after")
    assert mq.fetch("purged").header("X-Message-Id") == new
    poll_for(lambda: files_in(mq.root / "remove") == [], 30, what="the reaper to unlink the purged")
    assert mq.request("POST", "/no-such-queue/purge").status == 404


MIB = 1024 * 1024


def local_pages(client, queue: str) -> list[list[int]]:
    """The body sizes of each page of a queue as mq.local's peek pages it."""
    pages, after = [], None
    while page := client.peek(queue, max=10, after=after):
        pages.append([len(m.body) for m in page])
        after = page[-1].id
    return pages


def test_peek_and_batch_fetch_stop_at_the_answer_byte_cap_but_always_hold_one(mq):
    from mq.client import Client
    from mq.ctl.scan import ready_after
    from mq.delivery import MAX_ANSWER_BYTES
    from mq.local import LocalClient

    assert MAX_ANSWER_BYTES == 8 * MIB  # The documented cap.
    sizes = [3 * MIB, 3 * MIB, 3 * MIB, 10 * MIB, 1000]  # 10 MiB: over the cap on its own.
    ids = {queue: [mq.add(queue, bytes([n]) * size) for n, size in enumerate(sizes)]
           for queue in ("capped", "capped-fetch")}
    pages, after = [], None
    while page := mq.request("GET", f"/capped/peek?max=10{f'&after={after}' if after else ''}",
                             timeout=60).json()["messages"]:
        pages.append([len(base64.b64decode(m["body"])) for m in page])
        after = page[-1]["id"]
    assert pages == [[3 * MIB, 3 * MIB], [3 * MIB], [10 * MIB], [1000]]
    with Client(f"http://127.0.0.1:{mq.port}", timeout=60) as client:
        # mqctl's pages go on past a page cut short by the cap.
        assert [m.id for m in ready_after(client, "capped")] == ids["capped"]
        batches = []
        while got := client.fetch_many("capped-fetch", max=10):
            batches.append([len(m.body) for m in got])
            # What was not handed out is still ready, unclaimed.
            assert client.stat("capped-fetch")["ready"] == len(sizes) - sum(map(len, batches))
        assert batches == [[3 * MIB, 3 * MIB], [3 * MIB], [10 * MIB], [1000]]
    # mq.local on the same root cuts its pages where the daemon does, and mqctl's scan of it
    # goes on past them too.
    with LocalClient(mq.root) as local:
        assert local_pages(local, "capped") == pages
        assert [m.id for m in ready_after(local, "capped")] == ids["capped"]
