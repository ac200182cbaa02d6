"""add_batch: many messages for one queue in one request, stored all or none.

The save actor checks every message of the request and writes them into new/ through the
batch's Settlement (actors/settlement.py), which delivers them with the batch's two flushes
and fails the whole request when any of them fails.
"""

import time

from mq.actors import accumulation
from mq.actors.batch import Request
from mq.actors.commands import SaveCommandActor
from mq.actors.settlement import SaveActorBatch
from mq.adds import CheckedAdd, checked_add, with_properties
from mq.errors import MqError, NotFound
from mq.operations import AddBatch


def add_batch(actor: SaveCommandActor, batch: SaveActorBatch, request: AddBatch, sender: Request):
    """Check every message of the request, then write each into new/ (delivered by settle)."""
    now, queue, messages = time.time(), request.queue, request.messages
    props = batch.properties(queue, actor.props)
    adds = [checked(n, queue, message, props, actor.options.max_body_bytes, now)
            for n, message in enumerate(messages)]
    if not actor.store.queues.auto_create and not actor.store.queues.queue_exists(queue):
        raise NotFound(f"queue {queue!r} does not exist (auto-create is off)")
    batch.settlement.write_batch(len(batch.results), queue, adds, actor.writer(),
                                 props["dedup_window"], props["accum"], now)
    return None  # Answered by settle().


def checked(number: int, queue: str, message, props: dict, max_body_bytes: int,
            now: float) -> CheckedAdd:
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
