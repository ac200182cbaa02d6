"""Receipts: each delivery has its own receipt; ack, nack, extend; stale ones refused."""

import os
import time

import pytest

from delivery_support import (added, assert_json_error, fetch, fetch_when_ready, fetched,
                              fresh_queue, names_of, reply, restart, set_props, shared_mq,
                              start_killed)  # noqa: F401
from support import files_in, poll_for

from mq.delivery import parse_receipt
from mq.errors import Invalid


def test_each_delivery_has_its_own_receipt_and_attempt_count(shared_mq):
    queue = fresh_queue("rcpt")
    message_id = added(shared_mq, queue, b"again and again")
    seen = []
    for attempt in (1, 2, 3):
        resp, _ = fetch_when_ready(shared_mq, queue)
        assert resp.header("X-Message-Id") == message_id
        seen.append((resp.header("X-Receipt"), resp.header("X-Attempts")))
        assert names_of(shared_mq, message_id) == [f"delay/{queue}:{message_id}.{attempt}"]
    assert seen == [(f"{message_id}.{n}", str(n)) for n in (1, 2, 3)]


def test_ack_with_the_receipt_deletes_the_message(shared_mq):
    queue = fresh_queue("ack")
    message_id = added(shared_mq, queue, b"done")
    witness = added(shared_mq, queue, b"witness")
    receipt = fetched(shared_mq, queue).header("X-Receipt")
    assert fetched(shared_mq, queue).header("X-Message-Id") == witness
    resp = reply(shared_mq, queue, message_id, "ack", receipt)
    assert resp.status == 204, resp.body
    assert names_of(shared_mq, message_id) == []
    # The witness was fetched later with the same timer: once it is back, the acked one
    # would have been back too.
    back, _ = fetch_when_ready(shared_mq, queue)
    assert back.header("X-Message-Id") == witness
    assert fetch(shared_mq, queue).status == 204
    assert_json_error(reply(shared_mq, queue, message_id, "ack", receipt), 404, "not_found")


def test_ack_by_x_receipt_header_and_by_delete_with_a_receipt(shared_mq):
    queue = fresh_queue("ack")
    first, second = added(shared_mq, queue, b"1"), added(shared_mq, queue, b"2")
    r1 = fetched(shared_mq, queue).header("X-Receipt")
    r2 = fetched(shared_mq, queue).header("X-Receipt")
    assert reply(shared_mq, queue, first, "ack", headers={"X-Receipt": r1}).status == 204
    assert shared_mq.request("DELETE", f"/{queue}/messages/{second}?receipt={r2}").status == 204
    assert names_of(shared_mq, first) == names_of(shared_mq, second) == []


def test_nack_makes_the_message_ready_now(shared_mq):
    queue = fresh_queue("nack")
    set_props(shared_mq, queue, {"timeout": 60})
    message_id = added(shared_mq, queue, b"try again")
    receipt = fetched(shared_mq, queue).header("X-Receipt")
    assert fetch(shared_mq, queue).status == 204
    assert reply(shared_mq, queue, message_id, "nack", receipt).status == 204
    # Ready at once, not after the 60-second timer.
    assert names_of(shared_mq, message_id) == [f"queues/{queue}/{message_id}.1"]
    again = fetched(shared_mq, queue)
    assert again.header("X-Message-Id") == message_id
    assert (again.header("X-Receipt"), again.header("X-Attempts")) == (f"{message_id}.2", "2")


def test_extend_resets_the_timer_so_the_message_is_not_redelivered_at_the_old_time(shared_mq):
    queue = fresh_queue("ext")
    message_id = added(shared_mq, queue, b"slow work")
    resp = fetched(shared_mq, queue)
    receipt = resp.header("X-Receipt")
    old_due = time.time() + 1  # the shared daemon's --timeout
    ext = reply(shared_mq, queue, message_id, "ext", receipt, seconds=2.5)
    assert ext.status == 200, ext.body
    new_due = ext.json()["due"]
    assert new_due >= old_due + 1.4
    assert ext.header("X-Receipt") == receipt, "extend keeps the delivery's receipt"
    stat = os.stat(shared_mq.root / "delay" / f"{queue}:{message_id}.1")
    assert abs(stat.st_mtime - new_due) < 0.001
    back, came = fetch_when_ready(shared_mq, queue, due=new_due)
    assert came >= new_due, f"redelivered {new_due - came:.2f} s before the extended time"
    assert came < new_due + 1.0
    assert back.header("X-Attempts") == "2"


def test_extend_without_seconds_uses_the_queue_timeout(shared_mq):
    queue = fresh_queue("ext")
    set_props(shared_mq, queue, {"timeout": 40})
    message_id = added(shared_mq, queue, b"x")
    receipt = fetched(shared_mq, queue).header("X-Receipt")
    before = time.time()
    ext = reply(shared_mq, queue, message_id, "ext", receipt)
    assert before + 40 <= ext.json()["due"] <= time.time() + 40


def test_stale_receipt_after_timeout_and_redelivery_is_refused_with_409(shared_mq):
    queue = fresh_queue("stale")
    message_id = added(shared_mq, queue, b"slow consumer")
    old = fetched(shared_mq, queue).header("X-Receipt")
    # The first consumer is too slow: the timer runs out and someone else gets it.
    redelivered, _ = fetch_when_ready(shared_mq, queue)
    new = redelivered.header("X-Receipt")
    assert new == f"{message_id}.2"
    for what in ("ack", "nack", "ext"):
        message = assert_json_error(reply(shared_mq, queue, message_id, what, old), 409, "conflict")
        assert old in message and "stale" in message
    assert_json_error(shared_mq.request("DELETE", f"/{queue}/messages/{message_id}?receipt={old}"),
                      409, "conflict")
    # None of them touched the current delivery.
    assert names_of(shared_mq, message_id) == [f"delay/{queue}:{message_id}.2"]
    assert reply(shared_mq, queue, message_id, "ack", new).status == 204
    assert_json_error(reply(shared_mq, queue, message_id, "ack", new), 404, "not_found")


def test_a_receipt_whose_delivery_timed_out_is_stale_even_before_the_redelivery(shared_mq):
    queue = fresh_queue("stale")
    message_id = added(shared_mq, queue, b"x")
    receipt = fetched(shared_mq, queue).header("X-Receipt")
    ready = f"queues/{queue}/{message_id}.1"
    poll_for(lambda: names_of(shared_mq, message_id) == [ready], 30, what="the timer to run out")
    assert_json_error(reply(shared_mq, queue, message_id, "ack", receipt), 409, "conflict", "stale")
    assert names_of(shared_mq, message_id) == [ready]


def test_reply_without_a_receipt_applies_to_the_current_delivery(shared_mq):
    queue = fresh_queue("norcpt")
    message_id = added(shared_mq, queue, b"x")
    # Not in flight yet: extend and nack have no delivery to apply to.
    assert_json_error(reply(shared_mq, queue, message_id, "ext"), 409, "conflict", "not in flight")
    resp = fetched(shared_mq, queue)
    ext = reply(shared_mq, queue, message_id, "ext", seconds=30)
    assert (ext.status, ext.header("X-Receipt")) == (200, resp.header("X-Receipt"))
    assert reply(shared_mq, queue, message_id, "nack").status == 204
    assert fetched(shared_mq, queue).header("X-Attempts") == "2"
    assert reply(shared_mq, queue, message_id, "ack").status == 204
    assert names_of(shared_mq, message_id) == []


def test_bad_replies_are_400_and_unknown_messages_404(shared_mq):
    queue = fresh_queue("bad")
    message_id = added(shared_mq, queue, b"x")
    other = added(shared_mq, queue, b"y")
    fetched(shared_mq, queue)
    assert_json_error(reply(shared_mq, queue, message_id, "maybe"), 400, "invalid", "reply")
    assert_json_error(reply(shared_mq, queue, message_id, "ack", f"{other}.1"), 400, "invalid",
                      "receipt")
    assert_json_error(reply(shared_mq, queue, message_id, "ack", f"{message_id}.x"), 400, "invalid")
    # A digit of another script is no delivery number (int() refuses "²": not a 500).
    for number in ("\u00b2", "\u0661", "1" * 10):
        assert_json_error(reply(shared_mq, queue, message_id, "ack", f"{message_id}.{number}"),
                          400, "invalid", "receipt")
    assert_json_error(reply(shared_mq, queue, message_id, "ext", seconds=-1), 400, "invalid")
    gone = "01a20000-0000-7000-8000-000000000000"
    assert_json_error(reply(shared_mq, queue, gone, "ack", f"{gone}.1"), 404, "not_found")
    assert names_of(shared_mq, message_id) == [f"delay/{queue}:{message_id}.1"]


def test_a_delete_without_a_receipt_still_removes_a_message_in_any_state(shared_mq):
    queue = fresh_queue("del")
    set_props(shared_mq, queue, {"timeout": 60})
    in_flight = added(shared_mq, queue, b"in flight")
    assert fetched(shared_mq, queue).header("X-Message-Id") == in_flight
    requeued = added(shared_mq, queue, b"nacked once")
    assert fetched(shared_mq, queue).header("X-Message-Id") == requeued
    assert reply(shared_mq, queue, requeued, "nack").status == 204
    ready = added(shared_mq, queue, b"ready")
    delayed = added(shared_mq, queue, b"delayed", delay="60")
    assert [names_of(shared_mq, i) for i in (in_flight, requeued, ready, delayed)] == [
        [f"delay/{queue}:{in_flight}.1"], [f"queues/{queue}/{requeued}.1"],
        [f"queues/{queue}/{ready}"], [f"delay/{queue}:{delayed}"]]
    for message_id in (in_flight, requeued, ready, delayed):
        assert shared_mq.delete(queue, message_id).status == 204
        assert names_of(shared_mq, message_id) == []
        assert_json_error(shared_mq.delete(queue, message_id), 404, "not_found")
    assert fetch(shared_mq, queue).status == 204


# -- across kill -9 of the whole tree ------------------------------------------------------


@pytest.mark.slow
def test_an_in_flight_timer_and_acks_extends_and_nacks_survive_kill_9(start_killed):
    """One kill -9 for both, their 10 s timers running side by side: a message in flight comes
    back after its timer with a new receipt; a message acked, one extended and one nacked
    before the crash keep those replies."""
    # A 10 s timer: the restart (2 s on a quiet machine) must end before it, also on a
    # loaded one.
    mq = start_killed(workers=2, timeout=10)
    inflight = fresh_queue("inflight")
    message_id = added(mq, inflight, b"was being worked on")
    first = fetched(mq, inflight)
    due = time.time() + 10

    queue = fresh_queue("replies")
    set_props(mq, queue, {"timeout": 1})  # A timer the restart outlasts, unless extended.
    acked, extended, nacked = (added(mq, queue, b) for b in (b"acked", b"extended", b"nacked"))
    receipts = {fetched(mq, queue).header("X-Message-Id"): None for _ in range(3)}
    assert list(receipts) == [acked, extended, nacked]
    assert reply(mq, queue, acked, "ack", f"{acked}.1").status == 204
    # 10 s: the restart (2 s on a quiet machine) must end before the extended timer, also
    # on a loaded one.
    ext = reply(mq, queue, extended, "ext", f"{extended}.1", seconds=10)
    assert reply(mq, queue, nacked, "nack", f"{nacked}.1").status == 204

    restart(mq)
    assert time.time() < due, "the restart outlasted the timer; the test proves nothing"
    assert time.time() < ext.json()["due"], "the restart outlasted the extension; proves nothing"
    assert fetch(mq, inflight).status == 204, "still in flight after the restart"
    assert names_of(mq, message_id) == [f"delay/{inflight}:{message_id}.1"]
    assert names_of(mq, acked) == []
    assert names_of(mq, nacked) == [f"queues/{queue}/{nacked}.1"]
    assert names_of(mq, extended) == [f"delay/{queue}:{extended}.1"]
    resp = fetched(mq, queue)
    assert (resp.header("X-Message-Id"), resp.header("X-Attempts")) == (nacked, "2")
    assert reply(mq, queue, nacked, "ack", resp.header("X-Receipt")).status == 204

    back, came = fetch_when_ready(mq, inflight, timeout=30, due=due)
    assert came >= due - 0.05
    assert (back.header("X-Message-Id"), back.body) == (message_id, b"was being worked on")
    assert (back.header("X-Receipt"), back.header("X-Attempts")) == (f"{message_id}.2", "2")
    # The receipt from before the crash is stale now; the new one works.
    assert_json_error(reply(mq, inflight, message_id, "ack", first.header("X-Receipt")), 409,
                      "conflict")
    assert reply(mq, inflight, message_id, "ack", back.header("X-Receipt")).status == 204

    back, came = fetch_when_ready(mq, queue, timeout=30, due=ext.json()["due"])
    assert back.header("X-Message-Id") == extended
    assert came >= ext.json()["due"], "the extension was lost in the restart"
    assert fetch(mq, queue).status == 204
    assert files_in(mq.root / "new") == []


def test_delete_and_ack_find_a_message_after_its_retry_was_lowered(shared_mq):
    queue = fresh_queue("lowered")
    set_props(shared_mq, queue, {"retry": 5, "timeout": 60})
    message_id = added(shared_mq, queue, b"x")
    for _ in range(3):
        resp = fetched(shared_mq, queue)
        assert reply(shared_mq, queue, message_id, "nack", resp.header("X-Receipt")).status == 204
    receipt = fetched(shared_mq, queue).header("X-Receipt")
    assert receipt == f"{message_id}.4"
    set_props(shared_mq, queue, {"retry": 1})
    # Delivery 4 is in flight; the lower retry must not hide it from a delete or a stale check.
    assert_json_error(reply(shared_mq, queue, message_id, "ack", f"{message_id}.3"), 409, "conflict")
    assert shared_mq.delete(queue, message_id).status == 204
    assert names_of(shared_mq, message_id) == []


MESSAGE = "01a20000-0000-7000-8000-000000000000"


def test_the_one_reading_of_a_receipt():
    assert parse_receipt(f"{MESSAGE}.3") == (MESSAGE, 3)
    assert parse_receipt(f"{MESSAGE}.3", MESSAGE) == (MESSAGE, 3)
    assert parse_receipt(f"{MESSAGE}.{'9' * 9}") == (MESSAGE, 999_999_999)


@pytest.mark.parametrize("receipt", [
    None, 3, b"x.1", "", ".1", f"{MESSAGE}", f"{MESSAGE}.", f"{MESSAGE}.0", f"{MESSAGE}.-1",
    f"{MESSAGE}.+1", f"{MESSAGE}. 1", f"{MESSAGE}.\u00b2", f"{MESSAGE}.\u0661",
    f"{MESSAGE}.{'1' * 10}", f"{MESSAGE.upper()}.1", "not-an-id.1", f"{MESSAGE}.1.1"])
def test_anything_else_is_not_a_receipt(receipt):
    with pytest.raises(Invalid, match="receipt"):
        parse_receipt(receipt)


def test_a_receipt_of_another_message_is_not_this_ones():
    other = MESSAGE.replace("8000", "9000")
    with pytest.raises(Invalid, match=f"not a receipt of message {other}"):
        parse_receipt(f"{MESSAGE}.1", other)
