"""The save actor's operations: add, add_batch and add_fanout (docs/PROTOCOL.md, "Save actor").

The add's content (body size, content type, due time, key and group lengths) is checked by
mq.adds.check_add, which the front and the Spark stager share; these declare the wire fields.
"""

from dataclasses import dataclass
from typing import Annotated, TypedDict

from mq.adds import MAX_BATCH_MESSAGES
from mq.errors import Invalid
from mq.operations.fields import OnQueue, Operation, Queue, count, each, operation
from mq.store import validate_queue

#: Most queues one fan-out may add to (each copy is a file written and flushed).
MAX_FANOUT_QUEUES = 1000

__all__ = ["Add", "AddBatch", "AddFanout", "Added", "MAX_BATCH_MESSAGES", "MAX_FANOUT_QUEUES"]


def distinct(queues: list) -> list:
    """A fan-out's queues must not repeat (each copy would be the same message twice)."""
    if len(set(queues)) != len(queues):
        raise Invalid("queues of a fan-out must not repeat")
    return queues


@operation("add")
@dataclass(slots=True, frozen=True, kw_only=True)
class Add(OnQueue):
    """Store one message in a queue (due: Unix seconds, None for the queue's delay)."""

    queue: Queue
    body: bytes
    content_type: str = ""
    due: float | None = None
    dedup_id: str | None = None
    #: not_found rather than creating a missing queue (each copy of a fan-out).
    must_exist: bool = False
    group: str | None = None
    attributes: dict | None = None


class Added(TypedDict, total=False):
    """The answer to an add."""

    id: str
    queue: str
    due: float | None
    accumulated: str
    duplicate: bool


@operation("add_batch")
@dataclass(slots=True, frozen=True, kw_only=True)
class AddBatch(OnQueue):
    """Store 1 to MAX_BATCH_MESSAGES messages in one queue, all or none; each message a map of
    body, content_type, due, dedup_id and attributes (as an add)."""

    queue: Queue
    messages: Annotated[list, count(MAX_BATCH_MESSAGES, "messages")]


@operation("add_fanout")
@dataclass(slots=True, frozen=True, kw_only=True)
class AddFanout(Operation):
    """Add one message to each of several queues, durably together (no de-duplication key)."""

    queues: Annotated[list, count(MAX_FANOUT_QUEUES, "queues"), each(validate_queue), distinct]
    body: bytes
    content_type: str = ""
    due: float | None = None
    attributes: dict | None = None

    def copy(self, queue: str) -> Add:
        """The add of one copy: to a queue that must still exist."""
        return Add(queue=queue, body=self.body, content_type=self.content_type, due=self.due,
                   must_exist=True, attributes=self.attributes)
