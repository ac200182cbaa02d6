"""Answering a delivery without a daemon: ack, nack, extend, and revoke by id.

A receipt '{id}.{n}' is the name of the in-flight file, delay/{q}:{id}.{n} (docs/DELIVERY.md,
"Receipts and stale receipts"), so each answer is one rename or futimens of that name. What
a receipt names, and why one is stale, are the daemon's own rules (mq.delivery).
"""

import time

from mq import properties
from mq.delivery import MAX_DELIVERIES, current_delivery, gone, parse_receipt, stale
from mq.errors import MqError, NotFound
from mq.operations import Extend
from mq.store import Changes, validate_id, validate_queue

#: The one field of Extend an extend without a daemon checks.
EXTEND_SECONDS = [field for field in Extend.spec if field[0] == "seconds"]


def far_count(store, props, queue: str, message_id: str) -> int | None:
    """For a lookup by id whose probes missed: the delivery count in the message's name, by
    a listing of delay/ and the queue's folder, when the queue redelivers forever (retry -1:
    only there does a message pass the MAX_DELIVERIES names probed); else None."""
    if props.effective(queue)["retry"] != properties.UNLIMITED_RETRY:
        return None
    return store.queues.listed_delivery(queue, message_id)


def delivery(store, props, message) -> int:
    """The delivery a message's receipt names; without a receipt, its current one (409 when
    it is not in flight)."""
    validate_queue(message.queue)
    validate_id(message.id)
    if message.receipt is None:
        try:
            return current_delivery(store, message.queue, message.id)
        except NotFound:
            near = far_count(store, props, message.queue, message.id)
            if near is None:
                raise
            return current_delivery(store, message.queue, message.id, near)
    return parse_receipt(message.receipt, message.id)[1]


def refused(store, props, message, number: int) -> MqError:
    """Why delivery `number` of the message cannot be answered (mq.delivery.stale)."""
    err = stale(store, message.queue, message.id, number)
    if isinstance(err, NotFound) and \
            (near := far_count(store, props, message.queue, message.id)) is not None:
        err = stale(store, message.queue, message.id, number, near)
    return err


def ack(store, props, message) -> None:
    """Remove the delivery durably; without a receipt, remove the message from any state."""
    if message.receipt is None:
        return revoke(store, props, message.queue, message.id)
    number, changes = delivery(store, props, message), Changes()
    if not store.states.ack(message.queue, message.id, number, changes):
        raise refused(store, props, message, number)
    store.flush(changes)


def nack(store, props, message) -> None:
    """Make the delivery ready again now, or a dead letter once it used up the queue's retries."""
    number = delivery(store, props, message)
    dead, dead_count = properties.dead_letter(props.effective(message.queue), number,
                                              props.effective)
    changes = Changes()
    outcome, _ = store.states.release(message.queue, message.id, time.time(), number, dead, force=True,
                               dead_count=dead_count, changes=changes)
    if outcome not in ("ready", "dead"):
        raise refused(store, props, message, number)
    store.flush(changes)
    store.notices.post(dead or message.queue)  # Daemons' fetch actors list it again.


def extend(store, props, message, seconds=None) -> float:
    """Hide the delivery `seconds` (default: the queue's timeout) from now; return the due time."""
    # Checked as the daemon's extend is (0 or None: the queue's timeout).
    seconds = Extend.checked({"seconds": seconds}, EXTEND_SECONDS)["seconds"]
    number = delivery(store, props, message)
    if not seconds:
        seconds = props.effective(message.queue)["timeout"]
    due, changes = time.time() + seconds, Changes()
    if not store.states.extend(message.queue, message.id, number, due, changes):
        raise refused(store, props, message, number)
    store.flush(changes)
    # A daemon's mover that missed the claim times it from here on; one that timed it reads its
    # due time again, which may now be earlier.
    store.notices.post(retime=True)
    message.receipt = f"{message.id}.{number}"
    return due


def revoke(store, props, queue: str, message_id: str) -> None:
    """Remove a message from whatever state it is in; NotFound when there is none
    (mq.delivery.gone)."""
    validate_queue(queue)
    validate_id(message_id)
    changes = Changes()
    found = store.states.remove(queue, message_id, MAX_DELIVERIES, changes=changes)
    if found is None and (near := far_count(store, props, queue, message_id)) is not None:
        found = store.states.remove(queue, message_id, MAX_DELIVERIES, changes=changes, near=near)
    if found is None:
        raise gone(store, queue, message_id)
    store.flush(changes)
