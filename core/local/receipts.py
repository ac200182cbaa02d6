"""Answering a delivery without a daemon: ack, nack, extend, and revoke by id.

A receipt '{id}.{n}' is the name of the in-flight file, delay/{q}:{id}.{n} (docs/DELIVERY.md,
"Receipts and stale receipts"), so each answer is one rename or futimens of that name. What
a receipt names, and why one is stale, are the daemon's own rules (mq.delivery).
"""

import time

from mq import properties
from mq.delivery import MAX_DELIVERIES, current_delivery, gone, parse_receipt, stale
from mq.errors import Invalid
from mq.store import Changes, validate_id, validate_queue


def delivery(store, message) -> int:
    """The delivery a message's receipt names; without a receipt, its current one (409 when
    it is not in flight)."""
    validate_queue(message.queue)
    validate_id(message.id)
    if message.receipt is None:
        return current_delivery(store, message.queue, message.id)
    return parse_receipt(message.receipt, message.id)[1]


def ack(store, message) -> None:
    """Remove the delivery durably; without a receipt, remove the message from any state."""
    if message.receipt is None:
        return revoke(store, message.queue, message.id)
    number, changes = delivery(store, message), Changes()
    if not store.ack(message.queue, message.id, number, changes):
        raise stale(store, message.queue, message.id, number)
    store.flush(changes)


def nack(store, props, message) -> None:
    """Make the delivery ready again now, or a dead letter once it used up the queue's retries."""
    number = delivery(store, message)
    dead, dead_count = properties.dead_letter(props.effective(message.queue), number,
                                              props.effective)
    changes = Changes()
    outcome, _ = store.release(message.queue, message.id, time.time(), number, dead, force=True,
                               dead_count=dead_count, changes=changes)
    if outcome not in ("ready", "dead"):
        raise stale(store, message.queue, message.id, number)
    store.flush(changes)
    store.notices.post(dead or message.queue)  # Daemons' fetch actors list it again.


def extend(store, props, message, seconds=None) -> float:
    """Hide the delivery `seconds` (default: the queue's timeout) from now; return the due time."""
    number = delivery(store, message)
    if seconds is None:
        seconds = props.effective(message.queue)["timeout"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
            not 0 < seconds <= properties.MAX_TIMEOUT:
        raise Invalid(f"seconds must be more than 0 and at most {properties.MAX_TIMEOUT:g}")
    due, changes = time.time() + seconds, Changes()
    if not store.extend(message.queue, message.id, number, due, changes):
        raise stale(store, message.queue, message.id, number)
    store.flush(changes)
    # A daemon's mover that missed the claim times it from here on; one that timed it reads its
    # due time again, which may now be earlier.
    store.notices.post(retime=True)
    message.receipt = f"{message.id}.{number}"
    return due


def revoke(store, queue: str, message_id: str) -> None:
    """Remove a message from whatever state it is in; NotFound when there is none
    (mq.delivery.gone)."""
    validate_queue(queue)
    validate_id(message_id)
    changes = Changes()
    if store.remove(queue, message_id, MAX_DELIVERIES, changes=changes) is None:
        raise gone(store, queue, message_id)
    store.flush(changes)
