"""The queue property `retention`: messages older than it are removed in every state."""

import json
import time

import pytest

from delivery_support import add, added, fetch, fresh_queue, reply, set_props, shared_mq  # noqa: F401
from mq.ids import id_time_ms
from mq.store import Store, encode_message
from support import files_in, poll_for

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("delivery_retention")


def entries(mq, queue: str) -> list[str]:
    """The queue's messages on disk: ready ones and its entries in delay/."""
    return files_in(mq.root / "queues" / queue) + [
        n for n in files_in(mq.root / "delay") if n.startswith(queue + ":")]


def wait_past(message_id: str, seconds: float) -> None:
    """Return once the message is more than `seconds` old (the clock is the condition)."""
    poll_for(lambda: time.time() * 1000 - id_time_ms(message_id) > seconds * 1000 + 50,
             timeout=seconds + 5, what="the message's age")


def test_an_expired_ready_message_is_never_handed_out(shared_mq):
    queue = fresh_queue("keep")
    set_props(shared_mq, queue, {"retention": 1})
    ids = [added(shared_mq, queue, b"old") for _ in range(3)]
    wait_past(ids[-1], 1)
    assert fetch(shared_mq, queue).status == 204
    young = added(shared_mq, queue, b"young")
    resp = fetch(shared_mq, queue)
    assert resp.status == 200 and resp.header("X-Message-Id") == young
    poll_for(lambda: not entries(shared_mq, queue) or None, timeout=10, what="files removed")


def test_expired_messages_leave_the_ready_count(shared_mq):
    queue = fresh_queue("keep")
    set_props(shared_mq, queue, {"retention": 1})
    ids = [added(shared_mq, queue, b"old") for _ in range(3)]
    ready = shared_mq.request("GET", f"/{queue}").json()["ready"]
    if time.time() * 1000 - id_time_ms(ids[0]) < 1000:  # On a slow machine the first expired.
        assert ready == 3
    wait_past(ids[-1], 1)
    young = added(shared_mq, queue, b"young")
    assert shared_mq.request("GET", f"/{queue}").json()["ready"] == 1
    assert fetch(shared_mq, queue).header("X-Message-Id") == young


def test_in_flight_and_delayed_messages_expire_on_disk(shared_mq):
    queue = fresh_queue("keep")
    set_props(shared_mq, queue, {"retention": 2, "timeout": 60})
    in_flight = added(shared_mq, queue, b"taken")
    resp = fetch(shared_mq, queue)
    assert resp.status == 200 and resp.header("X-Message-Id") == in_flight
    delayed = added(shared_mq, queue, b"later", delay=60)
    assert len(entries(shared_mq, queue)) == 2
    poll_for(lambda: not entries(shared_mq, queue) or None, timeout=15, what="files removed")
    assert time.time() * 1000 - id_time_ms(delayed) > 2000
    # The removed delivery cannot be acked any more.
    assert reply(shared_mq, queue, in_flight, "ack", receipt=resp.header("X-Receipt")).status != 200


def test_a_young_message_is_kept(shared_mq):
    queue = fresh_queue("keep")
    set_props(shared_mq, queue, {"retention": 3600})
    message_id = added(shared_mq, queue, b"fresh")
    wait_past(message_id, 1.5)  # longer than a reaper pass
    resp = fetch(shared_mq, queue)
    assert resp.status == 200 and resp.header("X-Message-Id") == message_id


@pytest.mark.parametrize("value", [-1, 0.5, 1209601, "60", None])
def test_retention_is_checked(shared_mq, value):
    queue = fresh_queue("keep")
    resp = shared_mq.request("PATCH", f"/{queue}/properties", json.dumps({"retention": value}).encode())
    assert resp.status == 400 and "retention" in resp.json()["message"]
    assert add(shared_mq, queue).status == 201


def test_without_a_retention_an_old_message_is_kept(shared_mq):
    queue = fresh_queue("keep")
    assert add(shared_mq, queue).status == 201  # Creates the queue.
    store = Store(str(shared_mq.root))
    old = "01800000-0000-7000-8000-000000000001"  # Added in 2022, by another writer on the root.
    store.write_new(queue, old, encode_message(b"old", "text/plain", 1, old), None)
    store.states.deliver_new(queue, old, delayed=False)
    store.flush({store.queue_dir(queue)})
    store.notices.post(queue)  # As every other writer does: the fetch actors list it again.
    wait_past(added(shared_mq, queue, b"young"), 1.5)  # A reaper pass and more.
    resp = fetch(shared_mq, queue)
    assert resp.status == 200 and resp.header("X-Message-Id") == old
