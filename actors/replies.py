"""Replies to a delivery, served by a queue's fetch actor: ack, nack, extend and delete.

Each is a command of FetchActor: function(actor, batch, request, sender) -> result, where
request is the op's request (mq.operations), its queue and id already checked. The store's
side of each (receipt, delivery, rename, stale) is mq.replies, which mq.local calls too; what
is here is the actor's own: its index, counters, the deliveries it handed out, the mover's notes.
"""

from mq import replies
from mq.actors.commands import FetchCommandActor, by_fields
from mq.delivery import MAX_DELIVERIES as MAX_ATTEMPTS
from mq.delivery import parse_receipt
from mq.operations import Acked, Extend, Nack, Relay


@by_fields
def delete(actor: FetchCommandActor, batch, sender, queue: str, id: str) -> Acked:
    """Remove a message from whatever state it is in (the fields as Delete declares them)."""
    return remove(actor, batch, queue, id)


def remove(actor: FetchCommandActor, batch, queue: str, message_id: str) -> Acked:
    """Remove a message from whatever state it is in (a delete; an ack without a receipt)."""
    index = actor.indexes.known(queue)
    known = index.attempts(message_id) if index else None
    handed = actor.deliveries.settled(queue, message_id)
    # A guess tried first (the ready name the index has, or the delivery this actor handed
    # out); the probe of every name the message may have follows if it is wrong.
    guess = ("ready", known) if known is not None else \
        ("in_flight", handed) if handed is not None else None
    state, attempts = replies.delete(actor.store, queue, message_id, guess,
                                     lambda q, i: far_count(actor, q, i, handed), batch.changes)
    actor.deliveries.settled(queue, message_id)  # What a listing found of it is over.
    if index:
        index.discard(message_id)
    actor.indexes.sizes.removed(queue, message_id)
    if state in ("delayed", "in_flight"):
        # The delivery it left delay/ as: the mover drops that one timer (with None it would
        # look up every delivery a message may have, 102 of them, per delete).
        batch.settled.append((queue, message_id, attempts))
    actor.counters.count(queue, "acks")
    return {"id": message_id}


def far_count(actor: FetchCommandActor, queue: str, message_id: str, handed: int | None = None) -> int | None:
    """A delivery count past MAX_ATTEMPTS (the names every lookup by id probes) the message
    had, for a lookup that missed: the one handed out, its ready name in the queue's index,
    or one this actor recorded or listed in delay/ (actors/deliveries.py); None if none."""
    index = actor.indexes.known(queue)
    if index is None and actor.store.queues.queue_exists(queue):
        index = actor.indexes.of(queue)  # Listed once: a restarted actor has no index yet.
    ready = index.attempts(message_id) if index else None
    counts = [count for count in (handed, ready, actor.deliveries.far(actor.store, queue, message_id))
              if count is not None and count > MAX_ATTEMPTS]
    return max(counts, default=None)


@by_fields
def ack(actor: FetchCommandActor, batch, sender, queue: str, id: str, receipt: str | None) -> Acked:
    """Remove an in-flight delivery (the fields as Ack declares them); without a receipt, a
    delete."""
    if not receipt:
        return remove(actor, batch, queue, id)
    ack_delivery(actor, batch, queue, id, parse_receipt(receipt, id)[1])
    return {"id": id}


def ack_delivery(actor: FetchCommandActor, batch, queue: str, message_id: str, delivery: int) -> None:
    """Remove one in-flight delivery (NotFound or Conflict when it is over); flushed with batch."""
    replies.ack_delivery(actor.store, queue, message_id, delivery,
                         lambda q, i: far_count(actor, q, i), batch.changes)
    actor.indexes.sizes.removed(queue, message_id)
    batch.settled.append((queue, message_id, delivery))
    actor.counters.count(queue, "acks")
    actor.deliveries.settled(queue, message_id)


def extend(actor: FetchCommandActor, batch, request: Extend, sender) -> dict:
    """Move an in-flight delivery's due time to `seconds` (default: the queue's timeout) from now."""
    delivery, due = replies.extend(actor.store, request, actor.props.effective,
                                   lambda q, i: far_count(actor, q, i), batch.changes)
    batch.hidden.append((request.queue, request.id, delivery, due))
    return {"id": request.id, "due": due, "receipt": f"{request.id}.{delivery}"}


def nack(actor: FetchCommandActor, batch, request: Nack, sender) -> dict:
    """Make an in-flight delivery ready now (or a dead letter, past the queue's retries)."""
    queue, message_id = request.queue, request.id
    delivery, dead, dead_count = replies.nack(actor.store, request, actor.props.effective,
                                              lambda q, i: far_count(actor, q, i), batch.changes)
    batch.settled.append((queue, message_id, delivery))
    actor.counters.count(queue, "nacks")
    if dead is None:
        actor.indexes.of(queue).add(message_id, delivery)
    else:
        actor.indexes.sizes.moved_out(queue, actor.store.ready_path(dead, message_id, dead_count))
        actor.log.info("fetch.dead_letter", queue=queue, id=message_id, dead_letter_queue=dead)
        actor.counters.count(queue, "dead_letters")
        actor.send(actor.mover, Relay(queue=dead, ids=[[message_id, dead_count]]))
    return {"id": message_id, "dead_letter": dead}
