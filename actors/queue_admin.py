"""Queue administration, served by a queue's fetch actor: create, inspect, delete, redrive,
properties, and the default property rules.

Each is a command of FetchActor: function(actor, batch, request, sender) -> result, where
request is the op's request (mq.operations), checked; those marked `@serves(op)` are in its
COMMANDS through that mark (actors/commands.py).
"""

from mq import operations as ops
from mq.actors.commands import FetchCommandActor, serves
from mq.actors.queue_bytes import file_size
from mq.delivery import peeked
from mq.errors import NotFound
from mq.protocol import fetch_actor_for


def queue_get(actor: FetchCommandActor, batch, request: ops.QueueGet, sender) -> dict:
    """The queue's effective properties; 404 when it does not exist.

    With `hidden`, also how many of its messages are in flight and delayed (a listing of
    delay/, so only when asked).
    """
    queue = request.queue
    if not actor.store.queues.queue_exists(queue):
        raise NotFound(f"queue {queue!r} does not exist")
    index = actor.indexes.of(queue)
    actor.drop_expired(batch, queue)
    result = {"queue": queue, "properties": actor.props.effective(queue), "ready": len(index)}
    if request.hidden:
        result["in_flight"], result["delayed"] = actor.store.queues.count_hidden(queue)
    return result


def peek(actor: FetchCommandActor, batch, request: ops.Peek, sender) -> dict:
    """Up to `max` of the oldest ready messages (ids after `after`, if given), their bodies
    within the answer's byte cap (mq.delivery.joins_answer); none is claimed."""
    queue, count, after = request.queue, request.max, request.after
    if not actor.store.queues.queue_exists(queue):
        actor.forget_queue(queue)
        raise NotFound(f"queue {queue!r} does not exist")
    index = actor.indexes.of(queue)
    messages = [{"id": message_id, "content_type": message.content_type, "attempts": attempts,
                 "created_ms": message.created_ms, "body": message.body,
                 "attributes": message.attributes}
                for message_id, attempts, message in
                peeked(actor.store, queue, index.oldest_ready(count, after), count)]
    return {"queue": queue, "messages": messages}


@serves(ops.Purge)
def purge(actor: FetchCommandActor, batch, request: ops.Purge, sender) -> dict:
    """Remove every message of the queue, in every state (with `keys`, its de-duplication keys
    too); the queue and its settings stay."""
    queue = request.queue
    purged = actor.store.queues.purge_queue(queue, keys=request.keys)
    actor.forget_queue(queue)
    batch.settled.append((queue, None, None))
    actor.indexes.watched(queue)  # When statistics are watched, the queue stays in them, empty.
    return {"queue": queue, "purged": purged}


def queue_put(actor: FetchCommandActor, batch, request: ops.QueuePut, sender) -> dict:
    """Create the queue (durably); created is False when it existed."""
    queue = request.queue
    created = actor.store.queues.create_queue(queue)
    actor.indexes.watched(queue)  # When statistics are watched, they show the new queue at once.
    return {"queue": queue, "created": created}


def queue_delete(actor: FetchCommandActor, batch, request: ops.QueueDelete, sender) -> dict:
    """Delete the queue with its messages in every state, its keys and properties."""
    queue = request.queue
    actor.forget_queue(queue)
    in_flight = actor.store.queues.delete_queue(queue)
    actor.counters.forget(queue)
    actor.props.forget(queue)
    batch.settled.append((queue, None, None))
    return {"queue": queue, "in_flight": in_flight}


def redrive(actor: FetchCommandActor, batch, request: ops.Redrive, sender) -> dict:
    """Move every message of the queue's dead-letter queue (or of `source`) into the queue."""
    queue = request.queue
    dead = request.source or actor.props.effective(queue)["dead_letter_queue"]
    if not actor.store.queues.queue_exists(dead):
        return {"queue": queue, "dead_letter_queue": dead, "moved": 0}
    ids = actor.store.states.redrive(dead, queue, batch.changes)
    index = actor.indexes.of(queue)
    for message_id in ids:
        if index.attempts(message_id) is None:  # Not found by a listing of the index above.
            index.add(message_id, 0)
            actor.indexes.sizes.became_ready(queue, message_id, 0)
    if ids and dead != queue:  # A queue redriven from itself keeps them.
        # The dead-letter queue's owner drops them from its index and bytes: at once when it
        # is this actor, else through the mover (fetch actors talk only to the mover).
        moved = [[message_id, file_size(actor.store.ready_path(queue, message_id))]
                 for message_id in ids]
        if fetch_actor_for(dead, actor.options.workers) == actor.index:
            taken(actor, batch, ops.Taken(queue=dead, ids=moved), sender)
        else:
            actor.send(actor.mover, ops.Relay(queue=dead, ids=moved, taken=True))
    return {"queue": queue, "dead_letter_queue": dead, "moved": len(ids)}


@serves(ops.Move)
def move(actor: FetchCommandActor, batch, request: ops.Move, sender) -> ops.Moved:
    """Move a ready message of the queue into the target, ready there as new: its size leaves
    this queue's bytes, and the target's fetch actor hears of it through the mover."""
    queue, message_id, target = request.queue, request.id, request.target
    index = actor.indexes.of(queue)
    attempts = index.attempts(message_id)
    if attempts is None:
        raise NotFound(f"no ready message {message_id} in queue {queue!r}")
    moved = actor.store.queues.move_ready(queue, message_id, attempts, target, batch.changes)
    index.discard(message_id)
    actor.indexes.sizes.moved_out(queue, moved)
    actor.send(actor.mover, ops.Relay(queue=target, ids=[[message_id, 0]]))
    return {"id": message_id, "queue": target}


def taken(actor: FetchCommandActor, batch, request: ops.Taken, sender) -> dict:
    """Notification: [id, bytes] of ready messages a redrive moved out of the queue, or
    [id, 0, deliveries] of those another fetch actor claimed from it; its index and bytes drop
    those it holds (a claimed one only under those deliveries: it may be ready again since)."""
    queue = request.queue
    index = actor.indexes.known(queue)
    if index is not None:
        for message_id, size, *claimed in request.ids:
            known = index.attempts(message_id)
            if known is not None and (not claimed or known == claimed[0]):
                index.discard(message_id)
                actor.indexes.sizes.taken(queue, size)
    return {}


def props(actor: FetchCommandActor, batch,
          request: ops.PropsGet | ops.PropsPut | ops.PropsPatch | ops.PropsDelete, sender) -> dict:
    """Read, replace, patch or reset a queue's own properties (checked on decoding)."""
    queue = request.queue
    path = actor.store.props_path(queue)
    if isinstance(request, ops.PropsPut):
        actor.store.write_json(path, request.properties)
    elif isinstance(request, ops.PropsPatch):
        actor.store.write_json(path, {**actor.props.own(queue), **request.properties})
    elif isinstance(request, ops.PropsDelete):
        actor.store.delete_file(path)
    batch.props.clear()  # Fetches later in this batch read the new properties.
    return {"queue": queue, "own": actor.props.own(queue), "effective": actor.props.effective(queue)}


def rules(actor: FetchCommandActor, batch, request: ops.RulesGet | ops.RulesPut | ops.RulesDelete,
          sender) -> dict:
    """Read, replace or reset the default property rules (checked on decoding)."""
    path = actor.store.default_props_path()
    if isinstance(request, ops.RulesPut):
        actor.store.write_json(path, request.rules)
    elif isinstance(request, ops.RulesDelete):
        actor.store.delete_file(path)
    batch.props.clear()
    return {"rules": actor.props.rules()}
