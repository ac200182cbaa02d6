"""Long polling (C1): a fetch waits up to ?wait=N seconds and answers as soon as a message comes."""

import threading
import time

import pytest

from delivery_support import (add, added, assert_json_error, fetch, fresh_queue, shared_mq)  # noqa: F401
from support import queue_owned_by


def long_poll_in_background(mq, queue: str, wait: float) -> dict:
    """Start a long poll in a thread; the dict gets its response and the time it came."""
    out: dict = {}

    def run():
        out["resp"] = fetch(mq, queue, wait=wait)
        out["at"] = time.monotonic()

    out["thread"] = threading.Thread(target=run)
    out["thread"].start()
    return out


@pytest.mark.parametrize("owner", [0, 1])
def test_long_poll_answers_as_soon_as_a_message_is_added(shared_mq, owner):
    queue = queue_owned_by(owner, 2, prefix=fresh_queue("lp") + "-")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    poll = long_poll_in_background(shared_mq, queue, wait=3)
    time.sleep(0.3)  # let the poll reach its fetch actor (not an assertion)
    assert "resp" not in poll, "answered before any message was added"
    added_at = time.monotonic()
    message_id = added(shared_mq, queue, b"wake up", headers={"Content-Type": "text/plain"})
    poll["thread"].join(5)
    resp = poll["resp"]
    assert resp.status == 200, resp.body
    assert (resp.header("X-Message-Id"), resp.body) == (message_id, b"wake up")
    assert resp.header("X-Receipt") == f"{message_id}.1"
    latency = poll["at"] - added_at
    assert latency < 1.0, f"the waiting fetch answered {latency:.3f} s after the add"


def test_long_poll_with_nothing_to_fetch_answers_204_after_the_wait(shared_mq):
    queue = fresh_queue("lp")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    started = time.monotonic()
    resp = fetch(shared_mq, queue, wait=1.5)
    took = time.monotonic() - started
    assert resp.status == 204 and resp.body == b""
    assert 1.4 <= took < 3.0, took


def test_long_poll_is_woken_by_a_delayed_message_falling_due(shared_mq):
    queue = fresh_queue("lp")
    resp = add(shared_mq, queue, b"later", delay="1")
    due = resp.json()["due"]
    got = fetch(shared_mq, queue, wait=5)
    came = time.time()
    assert got.status == 200 and got.header("X-Message-Id") == resp.header("X-Message-Id")
    assert due <= came < due + 1.0


def test_many_long_polls_each_get_one_message(shared_mq):
    queue = fresh_queue("lp")
    assert shared_mq.request("PUT", f"/{queue}").status == 201
    polls = [long_poll_in_background(shared_mq, queue, wait=10) for _ in range(30)]
    time.sleep(0.3)  # let them all reach the fetch actor (not an assertion)
    ids = {added(shared_mq, queue, b"%d" % n) for n in range(30)}
    for poll in polls:
        poll["thread"].join(12)
    got = [p["resp"].header("X-Message-Id") for p in polls if p["resp"].status == 200]
    assert sorted(got) == sorted(ids), "each waiting fetch got its own message, none twice"


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
    assert time.monotonic() - started < 1


def test_long_poll_on_a_missing_queue_is_404_at_once(shared_mq):
    started = time.monotonic()
    assert_json_error(fetch(shared_mq, fresh_queue("missing"), wait=5), 404, "not_found")
    assert time.monotonic() - started < 1
