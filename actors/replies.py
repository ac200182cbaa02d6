"""Replies to a delivery, served by a queue's fetch actor: ack, nack, extend and delete.

Each is a command of FetchActor: function(actor, batch, request, sender) -> result, where
request is the op's request (mq.operations), its queue and id already checked.
"""

import time

from mq import properties
from mq.delivery import MAX_DELIVERIES as MAX_ATTEMPTS
from mq.delivery import current_delivery, gone, parse_receipt, stale
from mq.errors import NotFound
from mq.operations import Ack, Acked, Delete, Extend, Nack, Relay


def delete(actor, batch, request: Delete | Ack, sender=None) -> Acked:
    """Remove a message from whatever state it is in (an ack without a receipt does the same)."""
    queue, message_id = request.queue, request.id
    index = actor.indexes.known(queue)
    known = index.attempts(message_id) if index else None
    handed = actor.deliveries.settled(queue, message_id)
    # A guess tried first (the ready name the index has, or the delivery this actor handed
    # out); the probe of every name the message may have follows if it is wrong.
    guess = ("ready", known) if known is not None else \
        ("in_flight", handed) if handed is not None else None
    found = actor.store.states.remove_entry(queue, message_id, MAX_ATTEMPTS, guess, batch.changes)
    if found is None and (near := far_count(actor, queue, message_id, handed)) is not None:
        found = actor.store.states.remove_entry(queue, message_id, MAX_ATTEMPTS, None, batch.changes, near)
        actor.deliveries.settled(queue, message_id)  # What the listing found of it is over.
    if found is None:
        raise gone(actor.store, queue, message_id)
    if index:
        index.discard(message_id)
    actor.indexes.sizes.removed(queue, message_id)
    state, attempts = found
    if state in ("delayed", "in_flight"):
        # The delivery it left delay/ as: the mover drops that one timer (with None it would
        # look up every delivery a message may have, 102 of them, per delete).
        batch.settled.append((queue, message_id, attempts))
    actor.counters.count(queue, "acks")
    return {"id": message_id}


def far_count(actor, queue: str, message_id: str, handed: int | None = None) -> int | None:
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


def delivery_of(actor, request: Ack | Nack | Extend) -> int:
    """The delivery a reply is about: its receipt's, or the message's current one."""
    if request.receipt:
        return parse_receipt(request.receipt, request.id)[1]
    try:
        return current_delivery(actor.store, request.queue, request.id)
    except NotFound:
        near = far_count(actor, request.queue, request.id)
        if near is None:
            raise
        return current_delivery(actor.store, request.queue, request.id, near)


def ack(actor, batch, request: Ack, sender) -> Acked:
    """Remove an in-flight delivery; without a receipt, a delete."""
    if not request.receipt:
        return delete(actor, batch, request)
    queue, message_id = request.queue, request.id
    ack_delivery(actor, batch, queue, message_id, delivery_of(actor, request))
    return {"id": message_id}


def ack_delivery(actor, batch, queue: str, message_id: str, delivery: int) -> None:
    """Remove one in-flight delivery (NotFound or Conflict when it is over); flushed with batch."""
    if not actor.store.states.ack(queue, message_id, delivery, batch.changes):
        refuse_stale(actor, queue, message_id, delivery)
    actor.indexes.sizes.removed(queue, message_id)
    batch.settled.append((queue, message_id, delivery))
    actor.counters.count(queue, "acks")
    actor.deliveries.settled(queue, message_id)


def extend(actor, batch, request: Extend, sender) -> dict:
    """Move an in-flight delivery's due time to `seconds` (default: the queue's timeout) from now."""
    queue, message_id = request.queue, request.id
    delivery = delivery_of(actor, request)
    # 0 or nil is the queue's timeout (the request's own limit is checked on decoding).
    seconds = request.seconds or actor.props.effective(queue)["timeout"]
    due = time.time() + seconds
    if not actor.store.states.extend(queue, message_id, delivery, due, batch.changes):
        refuse_stale(actor, queue, message_id, delivery)
    batch.hidden.append((queue, message_id, delivery, due))
    return {"id": message_id, "due": due, "receipt": f"{message_id}.{delivery}"}


def nack(actor, batch, request: Nack, sender) -> dict:
    """Make an in-flight delivery ready now (or a dead letter, past the queue's retries)."""
    queue, message_id = request.queue, request.id
    delivery = delivery_of(actor, request)
    props = actor.props.effective(queue)
    dead, dead_count = properties.dead_letter(props, delivery, actor.props.effective)
    outcome, _ = actor.store.states.release(queue, message_id, time.time(), delivery, dead, force=True,
                                     dead_count=dead_count, changes=batch.changes)
    if outcome not in ("ready", "dead"):
        refuse_stale(actor, queue, message_id, delivery)
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


def refuse_stale(actor, queue: str, message_id: str, delivery: int) -> None:
    """Raise 404 when the message is gone, 409 when this delivery is over but it lives on."""
    err = stale(actor.store, queue, message_id, delivery)
    if isinstance(err, NotFound) and (near := far_count(actor, queue, message_id)) is not None:
        err = stale(actor.store, queue, message_id, delivery, near)
    raise err
