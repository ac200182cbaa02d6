"""Long polling: a fetch waits up to ?wait=N seconds and answers as soon as a message comes.

The daemon runs with --log-level=debug: its fetch actor logs "fetch.wait" when a long poll
starts waiting, so a test adds only once the poll is known to wait, never after a sleep.
"""

import socket
import threading
import time

import pytest

from delivery_support import add, added, assert_json_error, fetch, fresh_queue
from support import queue_owned_by, ready_daemon

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("delivery_long_poll")


@pytest.fixture(scope="module")
def shared_mq(tmp_path_factory):
    """delivery_support's shared daemon, with the debug lines that show a poll waiting."""
    yield from ready_daemon(tmp_path_factory.mktemp("long-poll"), workers=2, timeout=1,
                            args=("--log-level=debug",))


def waiting_polls(mq, queue: str, count: int) -> list[dict]:
    """Wait until `count` long polls of the queue have started waiting in its fetch actor."""
    return mq.wait_for_events("fetch.wait", count, queue=queue)


def answered_in_time(poll: dict, wait: float) -> dict:
    """Join a background poll (its wait plus a margin) and assert it answered; return it."""
    poll["thread"].join(wait + 5)
    assert not poll["thread"].is_alive() and "resp" in poll, "the long poll never answered"
    return poll


def long_poll_in_background(mq, queue: str, wait: float) -> dict:
    """Start a long poll in a thread; the dict gets its response and the time it came."""
    out: dict = {}

    def run():
        out["resp"] = fetch(mq, queue, wait=wait)
        out["at"], out["wall"] = time.monotonic(), time.time()

    out["thread"] = threading.Thread(target=run)
    out["thread"].start()
    return out


@pytest.mark.parametrize("owner", [0, 1])
def test_long_poll_answers_as_soon_as_a_message_is_added(shared_mq, owner):
    queue = queue_owned_by(owner, 2, prefix=fresh_queue("lp") + "-")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    poll = long_poll_in_background(shared_mq, queue, wait=10)
    assert [line["seconds"] for line in waiting_polls(shared_mq, queue, 1)] == [10]
    assert "resp" not in poll, "answered before any message was added"
    added_at = time.monotonic()
    message_id = added(shared_mq, queue, b"wake up", headers={"Content-Type": "text/plain"})
    resp = answered_in_time(poll, 10)["resp"]
    assert resp.status == 200, resp.body
    assert (resp.header("X-Message-Id"), resp.body) == (message_id, b"wake up")
    assert resp.header("X-Receipt") == f"{message_id}.1"
    # Woken by the add, not by its 10 s deadline (with room for a loaded machine).
    latency = poll["at"] - added_at
    assert latency < 5.0, f"the waiting fetch answered {latency:.3f} s after the add"


def test_long_poll_with_nothing_to_fetch_answers_204_after_the_wait(shared_mq):
    queue = fresh_queue("lp")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    started = time.monotonic()
    resp = fetch(shared_mq, queue, wait=1.5)
    took = time.monotonic() - started
    assert resp.status == 204 and resp.body == b""
    assert 1.4 <= took < 6.0, took  # Not before the wait; the rest is a loaded machine's room.
    assert [line["seconds"] for line in waiting_polls(shared_mq, queue, 1)] == [1.5]


def test_long_poll_is_woken_by_a_delayed_message_falling_due(shared_mq):
    queue = fresh_queue("lp")
    # 3 s: the poll must be seen waiting before then, also on a loaded machine.
    resp = add(shared_mq, queue, b"later", delay="3")
    due = resp.json()["due"]
    poll = long_poll_in_background(shared_mq, queue, wait=10)
    waiting_polls(shared_mq, queue, 1)
    # Seen waiting before the message fell due: the due message is what has to answer it.
    assert time.time() < due, "the poll started waiting after the message fell due; proves nothing"
    got = answered_in_time(poll, 10)["resp"]
    assert got.status == 200 and got.header("X-Message-Id") == resp.header("X-Message-Id")
    assert due <= poll["wall"] < due + 1.0


def test_many_long_polls_each_get_one_message(shared_mq):
    queue = fresh_queue("lp")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    polls = [long_poll_in_background(shared_mq, queue, wait=10) for _ in range(30)]
    assert len(waiting_polls(shared_mq, queue, 30)) == 30
    assert not [p for p in polls if "resp" in p], "answered before any message was added"
    ids = {added(shared_mq, queue, b"%d" % n) for n in range(30)}
    last_added_at = time.monotonic()
    for poll in polls:
        answered_in_time(poll, 10)
    got = [p["resp"].header("X-Message-Id") for p in polls if p["resp"].status == 200]
    assert sorted(got) == sorted(ids), "each waiting fetch got its own message, none twice"
    # Woken by the adds, not by their 10 s deadline (with room for a loaded machine).
    latest = max(p["at"] for p in polls) - last_added_at
    assert latest < 5.0, f"the last waiting fetch answered {latest:.3f} s after the last add"


@pytest.mark.parametrize("wait", ["21", "-1", "soon", "nan"])
def test_wait_outside_0_to_20_seconds_is_400(shared_mq, wait):
    queue = fresh_queue("lp")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    assert_json_error(shared_mq.request("GET", f"/{queue}/messages?wait={wait}"), 400, "invalid",
                      "wait")
    # 20 itself is allowed; with a message there it answers at once.
    message_id = added(shared_mq, queue, b"x")
    started = time.monotonic()
    assert fetch(shared_mq, queue, wait=20).header("X-Message-Id") == message_id
    assert time.monotonic() - started < 5  # At once, not after the wait.
    assert not [line for line in shared_mq.events("fetch.wait") if line["queue"] == queue]


def test_long_poll_on_a_missing_queue_is_404_at_once(shared_mq):
    queue = fresh_queue("missing")
    started = time.monotonic()
    assert_json_error(fetch(shared_mq, queue, wait=10), 404, "not_found")
    assert time.monotonic() - started < 5  # At once, not after the wait.
    assert not [line for line in shared_mq.events("fetch.wait") if line["queue"] == queue]


def test_a_long_poll_whose_client_went_away_claims_nothing(shared_mq):
    queue = fresh_queue("gone")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    with socket.create_connection(("127.0.0.1", shared_mq.port)) as sock:
        sock.sendall(f"GET /{queue}/messages?wait=15 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        waiting_polls(shared_mq, queue, 1)
    # The client hung up: its fetch actor drops the waiter before anything arrives.
    shared_mq.wait_for_events("fetch.cancelled", 1, queue=queue)
    message_id = added(shared_mq, queue, b"for a live consumer")
    got = fetch(shared_mq, queue)
    assert got.status == 200 and got.header("X-Message-Id") == message_id
    assert not shared_mq.events("front.error")
