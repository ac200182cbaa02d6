"""Batch commands of the fetch actor: fetch up to N messages of a queue, ack many receipts.

Each is one request, applied in the actor's batch like any other and covered by its one
flush: a batch fetch claims each message exactly as a fetch does (actors/fetch.py), a batch
ack removes each delivery exactly as an ack does (actors/replies.py).
"""

import os

from mq.actors.batch import DEFERRED
from mq.actors.commands import FetchCommandActor
from mq.actors.replies import ack_delivery
from mq.delivery import answer_room, parse_receipt
from mq.errors import MqError, NotFound, from_os_error
from mq.operations import AckBatch, FetchBatch, Fetched


def fetch_batch(actor: FetchCommandActor, batch, request: FetchBatch, sender):
    """Hide up to `max` of the oldest ready messages and return them; or wait for the first."""
    queue, wait, limit = request.queue, request.wait, request.max
    if actor.serves_only_owner(batch, queue):
        return {"owner_only": True}
    messages = take_many(actor, batch, queue, limit)
    if messages:
        return {"messages": messages}
    if not actor.store.queues.queue_exists(queue):
        actor.forget_queue(queue)
        raise NotFound(f"queue {queue!r} does not exist")
    if wait <= 0:
        return {"messages": []}
    actor.waiters.park(queue, sender.peer, sender.rid, wait, limit)
    return DEFERRED


def take_many(actor: FetchCommandActor, batch, queue: str, limit: int) -> list[Fetched]:
    """Claim up to limit messages, their bodies within the answer's byte cap
    (mq.delivery.answer_room: the first whatever its size); a claim that fails ends the batch
    with what was claimed before it (those are hidden and flushed with the batch), or raises
    when it was the first."""
    messages: list[Fetched] = []
    size = 0
    while len(messages) < limit:
        try:
            message = actor.take(batch, queue, max_bytes=answer_room(size, len(messages)))
        except OSError:
            if messages:
                break
            raise
        if message is None:
            break
        messages.append(message)
        size += len(message["body"])
    return messages


def larger_than(path: str, max_bytes: int) -> bool:
    """Whether the message file at path holds more than max_bytes (its body and a short
    header): False when it is gone, so that the claim finds that out as usual."""
    try:
        return os.stat(path).st_size > max_bytes
    except FileNotFoundError:
        return False


def ack_batch(actor: FetchCommandActor, batch, request: AckBatch, sender) -> dict:
    """Remove the in-flight deliveries the receipts name; one outcome per receipt, in order."""
    queue, results = request.queue, []
    for receipt in request.receipts:
        try:
            message_id, delivery = parse_receipt(receipt)
            ack_delivery(actor, batch, queue, message_id, delivery)
            results.append({"receipt": receipt, "id": message_id, "status": "acked"})
        except MqError as err:
            results.append({"receipt": receipt, "status": err.kind, "message": err.message})
        except OSError as err:
            error = from_os_error(err, "cannot ack")
            actor.log.error("actor.disk_error", op="ack_batch", queue=queue, receipt=receipt,
                            error=error.message, kind=error.kind)
            results.append({"receipt": receipt, "status": error.kind, "message": error.message})
    return {"queue": queue, "results": results}
