"""Answering a delivery without a daemon: ack, nack, extend, and revoke by id.

A receipt '{id}.{n}' is the name of the in-flight file, delay/{q}:{id}.{n} (docs/DELIVERY.md,
"Receipts and stale receipts"), so each answer is one rename or futimens of that name.
"""

import time

from mq import properties
from mq.errors import Conflict, Invalid, NotFound
from mq.store import parse_entry, validate_id, validate_queue

#: Every delivery count a message can have: one delivered before its queue's retry was
#: lowered keeps its higher count.
MAX_DELIVERIES = properties.MAX_RETRY + 1


def delivery(store, message) -> int:
    """The delivery a message's receipt names; without a receipt, its current one (409 when
    it is not in flight)."""
    validate_queue(message.queue)
    validate_id(message.id)
    if message.receipt is None:
        state, attempts = located(store, message.queue, message.id)
        if state != "in_flight":
            raise Conflict(f"message {message.id} is not in flight (it is {state})")
        return attempts
    parsed = parse_entry(message.receipt) if isinstance(message.receipt, str) else None
    if not parsed or parsed[0] != message.id or parsed[1] < 1:
        raise Invalid(f"receipt {message.receipt!r} is not a receipt of message {message.id}")
    return parsed[1]


def located(store, queue: str, message_id: str) -> tuple[str, int]:
    """(state, deliveries) of a message; NotFound when it is gone."""
    found = store.locate(queue, message_id, MAX_DELIVERIES)
    if found is None:
        raise NotFound(f"message {message_id} not found in queue {queue!r}")
    return found


def stale(store, queue: str, message_id: str, number: int) -> Exception:
    """Why delivery `number` cannot be answered: the message is gone (404) or lives on (409)."""
    state, attempts = located(store, queue, message_id)
    return Conflict(f"stale receipt {message_id}.{number}: the message is now {state}"
                    + (f" (delivery {attempts})" if attempts else ""))


def ack(store, message) -> None:
    """Remove the delivery durably; without a receipt, remove the message from any state."""
    if message.receipt is None:
        return revoke(store, message.queue, message.id)
    number = delivery(store, message)
    if not store.ack(message.queue, message.id, number):
        raise stale(store, message.queue, message.id, number)
    store.flush({store.folder("delay"), store.folder("remove")})


def nack(store, props, message) -> None:
    """Make the delivery ready again now, or a dead letter once it used up the queue's retries."""
    number = delivery(store, message)
    effective = props.effective(message.queue)
    dead = effective["dead_letter_queue"] if properties.exhausted(effective, number) else None
    dead_count = properties.dead_letter_count(props.effective(dead), number) if dead else 0
    outcome, _ = store.release(message.queue, message.id, time.time(), number, dead, force=True,
                               dead_count=dead_count)
    if outcome not in ("ready", "dead"):
        raise stale(store, message.queue, message.id, number)
    target = dead or message.queue
    store.flush({store.folder("delay"), store.queue_dir(target)})
    store.post_notice(target)  # Daemons' fetch actors list it again.


def extend(store, props, message, seconds=None) -> float:
    """Hide the delivery `seconds` (default: the queue's timeout) from now; return the due time."""
    number = delivery(store, message)
    if seconds is None:
        seconds = props.effective(message.queue)["timeout"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
            not 0 < seconds <= properties.MAX_TIMEOUT:
        raise Invalid(f"seconds must be more than 0 and at most {properties.MAX_TIMEOUT:g}")
    due = time.time() + seconds
    if not store.extend(message.queue, message.id, number, due):
        raise stale(store, message.queue, message.id, number)
    store.flush({store.folder("delay")})
    store.post_notice()  # A daemon's mover that missed the claim times it from here on.
    message.receipt = f"{message.id}.{number}"
    return due


def revoke(store, queue: str, message_id: str) -> None:
    """Remove a message from whatever state it is in; NotFound when there is none."""
    validate_queue(queue)
    validate_id(message_id)
    left = store.remove(queue, message_id, MAX_DELIVERIES)
    if left is None:
        raise NotFound(f"message {message_id} not found in queue {queue!r}")
    store.flush({left, store.folder("remove")})
