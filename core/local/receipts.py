"""Answering a delivery without a daemon: ack, nack, extend, and revoke by id.

A receipt '{id}.{n}' is the name of the in-flight file, delay/{q}:{id}.{n} (docs/DELIVERY.md,
"Receipts and stale receipts"), so each answer is one rename or futimens of that name. Each
builds the daemon's op (mq.operations: checked as the fetch actor decodes it) and calls the
fetch actor's own store side of it (mq.replies); what is left here is the flush and the
notice files that tell daemons on the root.
"""

from mq import properties, replies
from mq.operations import Ack, Delete, Extend, Nack
from mq.store import Changes


def far_count(store, props, queue: str, message_id: str) -> int | None:
    """For a lookup by id whose probes missed: the delivery count in the message's name, by
    a listing of delay/ and the queue's folder, when the queue redelivers forever (retry -1:
    only there does a message pass the MAX_DELIVERIES names probed); else None."""
    if props.effective(queue)["retry"] != properties.UNLIMITED_RETRY:
        return None
    return store.queues.listed_delivery(queue, message_id)


def reply(message, op):
    """The op answering a delivered message, checked as the daemon checks it."""
    return op.from_payload({"queue": message.queue, "id": message.id, "receipt": message.receipt})


def ack(store, props, message) -> None:
    """Remove the delivery durably; without a receipt, remove the message from any state."""
    request = reply(message, Ack)
    if not request.receipt:
        return revoke(store, props, request.queue, request.id)
    changes = Changes()
    replies.ack(store, request, lambda q, i: far_count(store, props, q, i), changes)
    store.flush(changes)


def nack(store, props, message) -> None:
    """Make the delivery ready again now, or a dead letter once it used up the queue's retries."""
    request, changes = reply(message, Nack), Changes()
    _, dead, _ = replies.nack(store, request, props.effective,
                              lambda q, i: far_count(store, props, q, i), changes)
    store.flush(changes)
    store.notices.post(dead or request.queue)  # Daemons' fetch actors list it again.


def extend(store, props, message, seconds=None) -> float:
    """Hide the delivery `seconds` (default: the queue's timeout) from now; return the due time."""
    request = Extend.from_payload({"queue": message.queue, "id": message.id,
                                   "receipt": message.receipt, "seconds": seconds})
    changes = Changes()
    delivery, due = replies.extend(store, request, props.effective,
                                   lambda q, i: far_count(store, props, q, i), changes)
    store.flush(changes)
    # A daemon's mover that missed the claim times it from here on; one that timed it reads its
    # due time again, which may now be earlier.
    store.notices.post(retime=True)
    message.receipt = f"{request.id}.{delivery}"
    return due


def revoke(store, props, queue: str, message_id: str) -> None:
    """Remove a message from whatever state it is in; NotFound when there is none
    (mq.delivery.gone)."""
    request, changes = Delete.from_payload({"queue": queue, "id": message_id}), Changes()
    replies.delete(store, request.queue, request.id, None,
                   lambda q, i: far_count(store, props, q, i), changes)
    store.flush(changes)
