"""Queue administration, served by a queue's fetch actor: create, inspect, delete, redrive,
properties, and the default property rules.

Each is a command of FetchActor: function(actor, batch, request) -> result.
"""

from mq import properties
from mq import store as fmt
from mq.actors.fetch_batch import MAX_ANSWER_BYTES
from mq.errors import Invalid, NotFound
from mq.store.listing import read_unclaimed

#: Most messages one peek returns.
MAX_PEEK = 1000


def queue_get(actor, batch, request) -> dict:
    """The queue's effective properties; 404 when it does not exist.

    With `hidden`, also how many of its messages are in flight and delayed (a listing of
    delay/, so only when asked).
    """
    queue = fmt.validate_queue(request.payload.get("queue"))
    if not actor.store.queue_exists(queue):
        raise NotFound(f"queue {queue!r} does not exist")
    index = actor.indexes.of(queue)
    actor.drop_expired(batch, queue)
    result = {"queue": queue, "properties": actor.props.effective(queue), "ready": len(index)}
    if request.payload.get("hidden"):
        result["in_flight"], result["delayed"] = actor.store.count_hidden(queue)
    return result


def peek(actor, batch, request) -> dict:
    """Up to `max` of the oldest ready messages (ids after `after`, if given), their bodies at
    most MAX_ANSWER_BYTES together (the first whatever its size); none is claimed."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    count = request.payload.get("max") or 10
    after = request.payload.get("after")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PEEK:
        raise Invalid(f"max must be a whole number from 1 to {MAX_PEEK}")
    if after is not None:
        fmt.validate_id(after)
    if not actor.store.queue_exists(queue):
        actor.forget_queue(queue)
        raise NotFound(f"queue {queue!r} does not exist")
    index = actor.indexes.of(queue)
    messages, size = [], 0
    for message_id, attempts in index.oldest_ready(count, after):
        try:
            found = read_unclaimed(actor.store.ready_path(queue, message_id, attempts), queue,
                                   message_id)
        except fmt.CorruptMessage:
            continue  # Not a message: a fetch deals with it.
        if found is None:
            continue  # Taken meanwhile by a peer.
        message = found[0]
        size += len(message.body)
        if messages and size > MAX_ANSWER_BYTES:
            break
        messages.append({"id": message_id, "content_type": message.content_type,
                         "attempts": attempts, "created_ms": message.created_ms,
                         "body": message.body, "attributes": message.attributes})
    return {"queue": queue, "messages": messages}


def purge(actor, batch, request) -> dict:
    """Remove every message of the queue, in every state (with `keys`, its de-duplication keys
    too); the queue and its settings stay."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    purged = actor.store.purge_queue(queue, keys=request.payload.get("keys") is True)
    actor.forget_queue(queue)
    batch.settled.append((queue, None, None))
    actor.indexes.watched(queue)  # When statistics are watched, the queue stays in them, empty.
    return {"queue": queue, "purged": purged}


def queue_put(actor, batch, request) -> dict:
    """Create the queue (durably); created is False when it existed."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    created = actor.store.create_queue(queue)
    actor.indexes.watched(queue)  # When statistics are watched, they show the new queue at once.
    return {"queue": queue, "created": created}


def queue_delete(actor, batch, request) -> dict:
    """Delete the queue with its messages in every state, its keys and properties."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    actor.forget_queue(queue)
    in_flight = actor.store.delete_queue(queue)
    actor.counters.forget(queue)
    batch.settled.append((queue, None, None))
    return {"queue": queue, "in_flight": in_flight}


def redrive(actor, batch, request) -> dict:
    """Move every message of the queue's dead-letter queue (or of `source`) into the queue."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    source = request.payload.get("source")
    dead = fmt.validate_queue(source) if source else actor.props.effective(queue)["dead_letter_queue"]
    if not actor.store.queue_exists(dead):
        return {"queue": queue, "dead_letter_queue": dead, "moved": 0}
    ids = actor.store.redrive(dead, queue)
    index = actor.indexes.of(queue)
    for message_id in ids:
        index.add(message_id, 0)
    batch.dirs.update({actor.store.queue_dir(dead), actor.store.queue_dir(queue)})
    return {"queue": queue, "dead_letter_queue": dead, "moved": len(ids)}


def props(actor, batch, request) -> dict:
    """Read, replace, patch or reset a queue's own properties."""
    queue = fmt.validate_queue(request.payload.get("queue"))
    op, value = request.op, request.payload.get("properties")
    path = actor.store.props_path(queue)
    if op == "props_put":
        actor.store.write_json(path, properties.validate(value))
    elif op == "props_patch":
        actor.store.write_json(path, {**actor.props.own(queue), **properties.validate(value)})
    elif op == "props_delete":
        actor.store.delete_file(path)
    batch.props.clear()  # Fetches later in this batch read the new properties.
    return {"queue": queue, "own": actor.props.own(queue), "effective": actor.props.effective(queue)}


def rules(actor, batch, request) -> dict:
    """Read, replace or reset the default property rules."""
    path = actor.store.default_props_path()
    if request.op == "rules_put":
        actor.store.write_json(path, properties.validate_rules(request.payload.get("rules")))
    elif request.op == "rules_delete":
        actor.store.delete_file(path)
    batch.props.clear()
    return {"rules": actor.props.rules()}
