"""The replies to a delivery on the store: ack, nack, extend and delete by id.

Each takes its op (mq.operations, checked) and walks the same steps, whoever serves it: the
receipt names a delivery (or the message's current one), the store changes that delivery
(recorded on the caller's Changes, flushed by the caller), and a change that finds the
delivery over is refused as stale (mq.delivery.stale). The fetch actor's handlers
(actors/replies.py) and the broker-less mq.local (core/local/receipts.py) both call these;
what each keeps around them (the actor's index, counters and notes to the mover, mq.local's
notice files) stays theirs.

`far` is the caller's knowledge of a delivery count past MAX_DELIVERIES (the names every
lookup by id probes): (queue, id) -> a count the message had, or None. The fetch actor
knows its own claims and lists delay/ now and then; mq.local lists on a miss.
"""

import time
from collections.abc import Callable

from mq import properties
from mq.delivery import MAX_DELIVERIES, current_delivery, gone, parse_receipt, stale
from mq.errors import MqError, NotFound
from mq.operations import Ack, Extend, Nack
from mq.store import Changes, Store

#: (queue, id) -> a delivery count past MAX_DELIVERIES the message had, or None.
FarCount = Callable[[str, str], int | None]
#: A queue's effective properties by its name (mq.properties.PropertyFiles.effective).
Effective = Callable[[str], dict]


def delivery_of(store: Store, request: Ack | Nack | Extend, far: FarCount) -> int:
    """The delivery a reply is about: its receipt's, or the message's current one (NotFound
    when it is gone, Conflict when it is not in flight)."""
    if request.receipt:
        return parse_receipt(request.receipt, request.id)[1]
    try:
        return current_delivery(store, request.queue, request.id)
    except NotFound:
        near = far(request.queue, request.id)
        if near is None:
            raise
        return current_delivery(store, request.queue, request.id, near)


def refusal(store: Store, queue: str, message_id: str, delivery: int, far: FarCount) -> MqError:
    """Why delivery `delivery` cannot be answered: NotFound when the message is gone, Conflict
    when it lives on as another delivery or state (mq.delivery.stale)."""
    err = stale(store, queue, message_id, delivery)
    if isinstance(err, NotFound) and (near := far(queue, message_id)) is not None:
        err = stale(store, queue, message_id, delivery, near)
    return err


def ack(store: Store, request: Ack, far: FarCount, changes: Changes) -> int:
    """Remove the in-flight delivery the request names (it has a receipt: without one an ack
    is a delete); return its number."""
    delivery = delivery_of(store, request, far)
    ack_delivery(store, request.queue, request.id, delivery, far, changes)
    return delivery


def ack_delivery(store: Store, queue: str, message_id: str, delivery: int, far: FarCount,
                 changes: Changes) -> None:
    """Remove one in-flight delivery (an ack's, or one receipt of a batch ack)."""
    if not store.states.ack(queue, message_id, delivery, changes):
        raise refusal(store, queue, message_id, delivery, far)


def extend(store: Store, request: Extend, effective: Effective, far: FarCount,
           changes: Changes) -> tuple[int, float]:
    """Move the delivery's due time to `seconds` from now (0 or nil: the queue's timeout);
    return (its number, the due time)."""
    delivery = delivery_of(store, request, far)
    # The request's own limit was checked on decoding; 0 is the queue's timeout, as nil is.
    due = time.time() + (request.seconds or effective(request.queue)["timeout"])
    if not store.states.extend(request.queue, request.id, delivery, due, changes):
        raise refusal(store, request.queue, request.id, delivery, far)
    return delivery, due


def nack(store: Store, request: Nack, effective: Effective, far: FarCount,
         changes: Changes) -> tuple[int, str | None, int]:
    """Make the delivery ready now, or a dead letter once it used up the queue's retries;
    return (its number, the dead-letter queue or None, the count it has there)."""
    queue, message_id = request.queue, request.id
    delivery = delivery_of(store, request, far)
    dead, dead_count = properties.dead_letter(effective(queue), delivery, effective)
    outcome, _ = store.states.release(queue, message_id, time.time(), delivery, dead, force=True,
                               dead_count=dead_count, changes=changes)
    if outcome not in ("ready", "dead"):
        raise refusal(store, queue, message_id, delivery, far)
    return delivery, dead, dead_count


def delete(store: Store, queue: str, message_id: str, guess: tuple[str, int] | None,
           far: FarCount, changes: Changes) -> tuple[str, int]:
    """Remove a message (of a Delete, or an Ack without a receipt: their queue and id) from
    whatever state it is in, trying `guess` (state, deliveries) first; return the (state,
    deliveries) it left (mq.delivery.gone when there was none)."""
    found = store.states.remove_entry(queue, message_id, MAX_DELIVERIES, guess, changes)
    if found is None and (near := far(queue, message_id)) is not None:
        found = store.states.remove_entry(queue, message_id, MAX_DELIVERIES, None, changes, near)
    if found is None:
        raise gone(store, queue, message_id)
    return found
