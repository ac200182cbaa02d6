"""add_batch: many messages for one queue in one request, stored all or none.

The save actor writes every message of the request into new/ with the adds of its batch,
and settle() delivers them with the batch's two flushes. A storage error on any of them, or
a message whose de-duplication key loses to an add that fails, fails the whole request: the
files still in new/ are unlinked, the ones already renamed into view (or, as parts, into an
accumulation window) are unlinked from there before the flush, their keys are dropped, and
the request answers the error (503 for an unavailable disk). None of its messages is ever
acknowledged or handed to a fetch actor, nor combined into a compound.
"""

import time

from mq import store as fmt
from mq.actors import accumulation
from mq.actors.add_batch import Written
from mq.actors.commands import SaveCommandActor
from mq.adds import checked_add, with_properties
from mq.errors import MqError, NotFound, Unavailable
from mq.ids import new_id
from mq.operations import AddBatch, accumulated_of


def add_batch(actor: SaveCommandActor, batch, request: AddBatch, sender):
    """Check every message of the request, then write each into new/ (delivered by settle)."""
    now, queue, messages = time.time(), request.queue, request.messages
    props = batch.properties(queue, actor.props)
    adds = [checked(n, queue, message, props, actor.options.max_body_bytes, now)
            for n, message in enumerate(messages)]
    if not actor.store.auto_create and not actor.store.queue_exists(queue):
        raise NotFound(f"queue {queue!r} does not exist (auto-create is off)")
    pos, parts, items = len(batch.results), [None] * len(adds), []
    try:
        for slot, add in enumerate(adds):
            if add.dedup_id:
                earlier = actor.store.dedup.lookup(queue, add.dedup_id, props["dedup_window"], now)
                if earlier:
                    part = parts[slot] = duplicate_part(actor, batch, queue, earlier)
                    if isinstance(part, MqError):
                        raise part
                    continue
            message_id = new_id(int(now * 1000))
            data = fmt.encode_message(add.body, add.content_type, int(now * 1000), message_id,
                                      add.dedup_id, actor.writer(), attributes=add.attributes)
            actor.store.write_new(queue, message_id, data, add.due)
            items.append(Written(pos, add, message_id, props["dedup_window"], slot,
                                 accum=props["accum"]))
    except BaseException:
        for item in items:
            actor.store.discard_new(queue, item.id, batch.changes)
        raise
    batch.parts[pos] = parts
    batch.written.extend(items)
    return None  # Answered by settle().


def checked(number: int, queue: str, message, props: dict, max_body_bytes: int, now: float):
    """One message of a batch (checked as it was decoded) with the queue's properties applied,
    its error naming its place in the batch."""
    try:
        add = checked_add(queue, message["body"], message.get("content_type"),
                          message.get("due"), message.get("dedup_id"), now,
                          attributes=message.get("attributes"))
        accumulation.refuse_schedule(add, props)
        with_properties(add, props, max_body_bytes, now)
        if props["accum"] > 0:
            add.due = None  # A part waits for its window, not for the delay property.
        return add
    except MqError as err:
        raise type(err)(f"message {number}: {err.message}") from None


def duplicate_part(actor: SaveCommandActor, batch, queue: str, earlier: str):
    """A batch's message whose key names an earlier message: that id once it is durable.

    A single add waits for an earlier add still in new/; a batch does not hold the other
    messages of its request for it, and answers 503 (the client retries the whole batch).
    """
    if actor.store.dedup.pending(queue, earlier, batch.changes):
        return Unavailable("a message of this batch has a de-duplication key whose add is "
                           "still in progress; retry")
    return {"id": earlier, "queue": queue, "duplicate": True}


def drop_rest(actor: SaveCommandActor, batch, failed, written: list, delivered: list) -> None:
    """A message of a batch could not be delivered: discard the ones of its request still in
    new/ (the ones already delivered are rolled back by roll_back_failed)."""
    if failed.slot is None:
        return
    error, done = batch.outcome(failed), {id(item) for item in delivered}
    for item in written:
        if item.pos == failed.pos and batch.outcome(item) is None and id(item) not in done:
            actor.forget(item)
            actor.store.discard_new(item.add.queue, item.id, batch.changes)
            batch.set_outcome(item, error)


def roll_back_failed(actor: SaveCommandActor, batch, delivered: list) -> list:
    """Before the flush: take back every delivered message of a request that failed; return
    the delivered messages that stay.

    A request fails with its first failed message; a message that lost its key to a message
    of this batch that failed (a follower) fails with it, which can fail its own request.
    """
    failed: dict = {}
    while True:
        for follower, winner in batch.followers:
            if batch.outcome(follower) is None and isinstance(batch.outcome(winner), MqError):
                batch.set_outcome(follower, batch.outcome(winner))
        newly = {pos: error for pos, parts in batch.parts.items()
                 if pos not in failed and (error := first_error(parts)) is not None}
        if not newly:
            break
        failed.update(newly)
        for pos, error in newly.items():
            parts = batch.parts[pos]
            parts[:] = [error] * len(parts)
    kept = []
    for item in delivered:
        if item.slot is None or item.pos not in failed:
            kept.append(item)
            continue
        actor.forget(item)
        try:
            accumulation.take_back(actor.store, item)
        except OSError as err:
            actor.log.error("save.rollback_failed", queue=item.add.queue, id=item.id,
                            error=str(err))
    if failed:
        actor.log.error("save.batch_failed", count=len(failed))
    return kept


def first_error(parts: list):
    """The first failed part of a batch, or None."""
    return next((part for part in parts if isinstance(part, MqError)), None)


def assemble(batch) -> None:
    """Each add_batch request's result: the id of every message in order, or its error."""
    for pos, parts in batch.parts.items():
        error = first_error(parts)
        if error is not None:
            batch.results[pos] = error
        elif any(part is None for part in parts):
            batch.results[pos] = MqError("internal error in save actor: a message was not settled")
        else:
            batch.results[pos] = {
                "queue": parts[0]["queue"],
                "messages": [{"id": p["id"], "due": p.get("due"),
                              "accumulated": accumulated_of(p),
                              **({"duplicate": True} if p.get("duplicate") else {})}
                             for p in parts]}
