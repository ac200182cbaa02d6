"""The save actor's operations: add, add_batch and add_fanout (docs/PROTOCOL.md, "Save actor").

Each field of an add names its check (mq.adds: content type, due time, key and group
lengths), so an add is checked once, where the save actor decodes it: an add's fields, a
fan-out's (and so each copy's) and each message of a batch add alike. The queue's own limits
(its body size, its default delay) are the save actor's (mq.adds.with_properties).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from mq import adds
from mq.adds import (
    MAX_BATCH_MESSAGES,
    MAX_DEDUP_ID,
    MAX_GROUP,
    check_attributes,
    check_content_type,
    check_dedup_id,
    check_due,
    check_group,
)
from mq.errors import Invalid
from mq.operations.fields import (
    EACH_QUEUE,
    SAVE,
    WRITE,
    Limit,
    OnQueue,
    Operation,
    Queue,
    count,
    operation,
)

#: Most queues one fan-out may add to (each copy is a file written and flushed).
MAX_FANOUT_QUEUES = 1000

__all__ = ["Add", "AddBatch", "AddFanout", "Added", "FannedOut", "MAX_BATCH_MESSAGES",
           "MAX_FANOUT_QUEUES"]

#: A content type of one line ("": application/octet-stream).
ContentType = Annotated[str, check_content_type]
#: A due time, finite Unix seconds at most a year and a day ahead (one not ahead: now).
Due = Annotated[float, check_due]
#: A protocol layer's metadata (the SQS API's message attributes, the trace context).
Attributes = Annotated[dict, check_attributes]


def distinct(queues: list) -> list:
    """A fan-out's queues must not repeat (each copy would be the same message twice)."""
    if len(set(queues)) != len(queues):
        raise Invalid("queues of a fan-out must not repeat")
    return queues


class Added(TypedDict, total=False):
    """The answer to an add."""

    id: str
    queue: str
    due: float | None
    accumulated: str
    duplicate: bool


@operation("add", scope=WRITE, actor=SAVE)
@dataclass(slots=True, frozen=True, kw_only=True)
class Add(OnQueue[Added]):
    """Store one message in a queue (due: Unix seconds, None for the queue's delay)."""

    queue: Queue
    body: bytes
    content_type: ContentType = ""
    due: Due | None = None
    dedup_id: Annotated[str, Limit(1, MAX_DEDUP_ID, "dedup_id", counts=True,
                                   check=check_dedup_id)] | None = None
    #: not_found rather than creating a missing queue (each copy of a fan-out).
    must_exist: bool = False
    group: Annotated[str, Limit(1, MAX_GROUP, "group", counts=True, check=check_group)] | None = None
    attributes: Attributes | None = None


def accumulated_of(added: Mapping[str, Any]) -> str:
    """What an add's answer says of accumulation: the save actor's "new" or "yes", else "no"
    (a duplicate stored nothing, so it joined no window); the same for a single add, each
    message of a batch and each copy of a fan-out (docs/DELIVERY.md, "Accumulation")."""
    return "no" if added.get("duplicate") else added.get("accumulated") or "no"


#: The fields of an add that a message of a batch add holds.
MESSAGE_FIELDS = ("body", "content_type", "due", "dedup_id", "attributes")


def batch_messages(messages: list) -> list:
    """Each message of a batch add checked as an add's fields are; Invalid naming the
    message's place in the batch."""
    spec = [field for field in Add.spec if field[0] in MESSAGE_FIELDS]
    for number, message in enumerate(messages):
        if not isinstance(message, dict):
            raise Invalid(f"message {number}: expected a map")
        try:
            Add.checked(message, spec)
        except Invalid as err:
            raise Invalid(f"message {number}: {err.message}") from None
    return messages


@operation("add_batch", scope=WRITE, actor=SAVE)
@dataclass(slots=True, frozen=True, kw_only=True)
class AddBatch(OnQueue):
    """Store 1 to MAX_BATCH_MESSAGES messages in one queue, all or none; each message a map of
    body, content_type, due, dedup_id and attributes, checked as an add's."""

    queue: Queue
    messages: Annotated[list, count(MAX_BATCH_MESSAGES, "messages"), batch_messages]

    def weight(self) -> int:
        """Its messages: the save actor's load counts each."""
        return len(self.messages)


class Copy(TypedDict):
    """One copy a fan-out made: its queue, its id, when it is due, its accumulation."""

    queue: str
    id: str
    due: float | None
    accumulated: str


class FannedOut(TypedDict):
    """The answer to a fan-out: one Copy per queue it added to."""

    messages: list[Copy]


@operation("add_fanout", scope=WRITE, actor=SAVE)
@dataclass(slots=True, frozen=True, kw_only=True)
class AddFanout(Operation[FannedOut]):
    """Add one message to each of several queues, durably together (no de-duplication key)."""

    queues: Annotated[list, count(MAX_FANOUT_QUEUES, "queues"), EACH_QUEUE, distinct]
    body: bytes
    content_type: ContentType = ""
    due: Due | None = None
    attributes: Attributes | None = None

    def copy(self, queue: str) -> Add:
        """The add of one copy: to a queue that must still exist."""
        return Add(queue=queue, body=self.body, content_type=self.content_type, due=self.due,
                   must_exist=True, attributes=self.attributes)


def add_of(payload: dict, now: float) -> adds.CheckedAdd:
    """The add of a writer that sends no op (mq.local, the Spark stager): its payload (an
    add's fields) decoded and checked as the save actor decodes an add, with its defaults."""
    op = Add.from_payload(payload)
    return adds.checked_add(op.queue, op.body, op.content_type, op.due, op.dedup_id, now,
                            op.group, op.attributes)
