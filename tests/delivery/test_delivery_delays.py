"""Delays, schedules and revoke: invisible until due, then fetchable; kill -9 safe."""

import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from delivery_support import (add, added, assert_json_error, fetch, fetch_when_ready, fresh_queue,
                              names_of, restart, set_props, shared_mq, start_killed, wait_until)  # noqa: F401
from support import files_in


def assert_hidden(mq, queue: str, message_id: str) -> None:
    """The message waits in delay/ and a fetch does not see it."""
    assert fetch(mq, queue).status == 204
    assert names_of(mq, message_id) == [f"delay/{queue}:{message_id}"]


def assert_comes_when_due(mq, queue: str, message_id: str, due: float) -> float:
    """Fetch until the message comes; it must not come before its due time. Return the lag."""
    resp, came = fetch_when_ready(mq, queue, timeout=due - time.time() + 15, due=due)
    assert resp.header("X-Message-Id") == message_id
    assert came >= due, f"fetched {due - came:.3f} s before it was due"
    return came - due


def assert_invisible_until_due(mq, queue: str, message_id: str, due: float) -> float:
    """Hidden now, fetchable from its due time on; return how late it became visible."""
    assert_hidden(mq, queue, message_id)
    return assert_comes_when_due(mq, queue, message_id, due)


@pytest.mark.parametrize("how", ["query", "header"])
def test_delayed_add_is_invisible_until_due_then_fetchable(shared_mq, how):
    queue = fresh_queue("delay")
    before = time.time()
    if how == "query":
        resp = add(shared_mq, queue, b"later", delay="1.5")
    else:
        resp = add(shared_mq, queue, b"later", headers={"X-Delay": "1.5"})
    assert resp.status == 201, resp.body
    message_id = resp.header("X-Message-Id")
    due = resp.json()["due"]
    assert before + 1.5 <= due <= time.time() + 1.5
    # The due time travels with the file: its mtime in delay/.
    stat = os.stat(shared_mq.root / "delay" / f"{queue}:{message_id}")
    assert abs(stat.st_mtime - due) < 0.001
    lag = assert_invisible_until_due(shared_mq, queue, message_id, due)
    assert lag < 1.0, f"visible {lag:.3f} s after it was due"


def test_add_at_rfc3339_with_z_or_an_offset_or_unix_seconds_waits_until_then(shared_mq):
    moment = int(time.time()) + 2
    utc = datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    offset = datetime.fromtimestamp(moment, tz=timezone(timedelta(hours=2, minutes=30))).isoformat()
    assert offset.endswith("+02:30")
    ways = {
        "z-query": {"at": utc},
        "offset-header": {"headers": {"X-At": offset}},
        "unix-query": {"at": str(moment)},
        "unix-fraction-header": {"headers": {"X-At": f"{moment - 0.25:.2f}"}},
    }
    messages = []
    for name, how in ways.items():
        queue = fresh_queue(name)
        resp = add(shared_mq, queue, name.encode(), **how)
        assert resp.status == 201, (name, resp.body)
        due = moment - 0.25 if "fraction" in name else moment
        assert resp.json()["due"] == due, name
        messages.append((queue, resp.header("X-Message-Id"), due))
    for queue, message_id, _ in messages:
        assert_hidden(shared_mq, queue, message_id)
    for queue, message_id, due in messages:
        assert_comes_when_due(shared_mq, queue, message_id, due)


def test_add_at_a_past_time_is_ready_at_once(shared_mq):
    queue = fresh_queue("at")
    resp = add(shared_mq, queue, b"past", at="2001-09-09T01:46:40Z")
    assert resp.status == 201 and "due" not in resp.json()
    assert fetch(shared_mq, queue).header("X-Message-Id") == resp.header("X-Message-Id")


@pytest.mark.parametrize("query, mentions", [
    ({"delay": "-1"}, "delay"),
    ({"delay": "soon"}, "delay"),
    ({"delay": str(400 * 86400)}, "delay"),
    ({"at": "tomorrow"}, "at"),
    ({"at": "2030-01-01T00:00:00"}, "zone"),
    ({"delay": "1", "at": "2030-01-01T00:00:00Z"}, "either"),
])
def test_bad_delay_or_at_is_400_and_stores_nothing(shared_mq, query, mentions):
    queue = fresh_queue("bad")
    assert_json_error(add(shared_mq, queue, b"no", **query), 400, "invalid", mentions)
    assert files_in(shared_mq.root / "queues" / queue) == []
    assert not [n for n in files_in(shared_mq.root / "delay") if n.startswith(queue + ":")]


def test_queue_property_delay_delays_every_add_without_its_own(shared_mq):
    queue = fresh_queue("pdelay")
    set_props(shared_mq, queue, {"delay": 1.0})
    resp = add(shared_mq, queue, b"default delay")
    assert resp.status == 201
    due = resp.json()["due"]
    assert_invisible_until_due(shared_mq, queue, resp.header("X-Message-Id"), due)


def test_revoked_delayed_message_never_appears(shared_mq):
    queue = fresh_queue("revoke")
    revoked = added(shared_mq, queue, b"revoked", delay="1")
    # A witness due just after it: once the witness is out, the revoked one was due too.
    witness = added(shared_mq, queue, b"witness", delay="1.3")
    assert shared_mq.delete(queue, revoked).status == 204
    assert names_of(shared_mq, revoked) == []
    resp, _ = fetch_when_ready(shared_mq, queue)
    assert resp.header("X-Message-Id") == witness
    assert fetch(shared_mq, queue).status == 204
    assert shared_mq.delete(queue, revoked).status == 404


# -- across kill -9 of the whole tree ------------------------------------------------------


@pytest.mark.slow
def test_delays_across_kill_9_due_ones_come_at_start_revoked_never_later_ones_at_their_time(
        start_killed):
    """One kill -9 for three queues: messages that fell due while the daemon was down are
    delivered right after start, oldest first; a revoke survives and its message never
    appears; a delay not yet due keeps its due time."""
    mq = start_killed(workers=2, timeout=30)
    keep = fresh_queue("keep")
    # A 10 s delay: the restart (2 s on a quiet machine, and the 1.5 s down) must end
    # before it, also on a loaded one.
    resp = add(mq, keep, b"after restart", delay="10")
    kept, kept_due = resp.header("X-Message-Id"), resp.json()["due"]
    queue = fresh_queue("down")
    ids = [added(mq, queue, b"due %d" % i, delay="1") for i in range(5)]
    due = max(float(os.stat(mq.root / "delay" / f"{queue}:{i}").st_mtime) for i in ids)
    revoke = fresh_queue("revoke")
    revoked = added(mq, revoke, b"revoked", delay="1")
    witness = added(mq, revoke, b"witness", delay="1.2")
    assert mq.delete(revoke, revoked).status == 204
    mq.kill_tree()
    wait_until(max(due + 0.5, time.time() + 1.5), "the messages to fall due while the daemon is down")
    assert len([n for n in files_in(mq.root / "delay") if n.startswith(queue)]) == 5
    mq.start().wait_ready()
    ready_at = time.monotonic()
    resp, _ = fetch_when_ready(mq, queue, timeout=3)
    first_after = time.monotonic() - ready_at
    got = [resp.header("X-Message-Id")] + [fetch(mq, queue).header("X-Message-Id") for _ in ids[1:]]
    assert got == ids, "all of them, oldest first"
    assert first_after < 1.5, f"first due message came {first_after:.2f} s after start"

    resp, _ = fetch_when_ready(mq, revoke, timeout=30)
    assert resp.header("X-Message-Id") == witness
    assert fetch(mq, revoke).status == 204
    assert names_of(mq, revoked) == []

    assert time.time() < kept_due, "the restart took longer than the delay; the test proves nothing"
    assert_invisible_until_due(mq, keep, kept, kept_due)
