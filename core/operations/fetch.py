"""The fetch actor's delivery operations: fetch, batches, pull-any, and the replies to a
delivery (docs/PROTOCOL.md, "Fetch actor")."""

from dataclasses import dataclass
from typing import Annotated, TypedDict

from mq.adds import MAX_BATCH_MESSAGES
from mq.errors import Invalid
from mq.operations.fields import (
    EACH_QUEUE,
    WRITE,
    Limit,
    MessageId,
    OnQueue,
    Operation,
    Queue,
    between,
    count,
    operation,
)
from mq.properties import MAX_TIMEOUT

#: Longest long poll, in seconds.
MAX_WAIT_SECONDS = 20.0
#: Most messages one batch fetch hands out (its reply carries every body).
MAX_FETCH = 100
#: Most queues one fetch_any or watch may name.
MAX_QUEUES = 1000


def check_wait(wait):
    """A long poll's wait in seconds, from 0 to MAX_WAIT_SECONDS: the one check of it."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or \
            not 0 <= wait <= MAX_WAIT_SECONDS:
        raise Invalid(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds")
    return wait


#: Seconds a long poll may wait (nil: 0, answer at once).
Wait = Annotated[float, Limit(0, MAX_WAIT_SECONDS, "wait", check=check_wait)]
#: The queues of a pull-any's fetch_any or watch.
Queues = Annotated[list, count(MAX_QUEUES, "queues"), EACH_QUEUE]


class Fetched(TypedDict, total=False):
    """The answer to a fetch: {"empty": True}, or the message claimed."""

    empty: bool
    id: str
    body: bytes
    content_type: str
    due: float
    receipt: str
    attempts: int
    created_ms: int
    parts: int
    group: str
    attributes: dict | None
    holder: str
    queue: str  # fetch_any's answer only
    owner_only: bool  # From a fetch actor not the queue's own: a fifo queue, ask its own.
    cancelled: bool  # the front's own answer to a long poll it withdrew (its client went away)


@operation("fetch", scope=WRITE, spread=True)
@dataclass(slots=True, frozen=True, kw_only=True)
class Fetch(OnQueue[Fetched]):
    """Claim the oldest ready message of a queue, waiting up to `wait` seconds for one."""

    queue: Queue
    wait: Wait = 0.0
    #: In a fifo queue, the holder a group's in-flight messages may also go to.
    holder: str | None = None


@operation("fetch_batch", scope=WRITE, spread=True)
@dataclass(slots=True, frozen=True, kw_only=True)
class FetchBatch(OnQueue):
    """Claim up to `max` messages of a queue, waiting up to `wait` seconds for the first."""

    queue: Queue
    wait: Wait = 0.0
    max: Annotated[int, between(1, MAX_FETCH, "max")]


@operation("fetch_any", scope=WRITE)
@dataclass(slots=True, frozen=True, kw_only=True)
class FetchAny(Operation):
    """Claim (or with claim false, only name) the oldest ready message among queues this
    actor owns."""

    queues: Queues
    claim: bool = True


@operation("watch", scope=WRITE)
@dataclass(slots=True, frozen=True, kw_only=True)
class Watch(Operation):
    """Answer once one of the queues has a ready message, or after `wait`; claims nothing."""

    queues: Queues
    wait: Wait = 0.0


class Acked(TypedDict):
    """The answer to an ack or a delete."""

    id: str


class Nacked(TypedDict, total=False):
    """The answer to a nack: the dead-letter queue it went to, if it went to one."""

    id: str
    dead_letter: str | None


class Extended(TypedDict):
    """The answer to an extend: the new due time and the delivery's receipt."""

    id: str
    due: float
    receipt: str


@operation("ack", scope=WRITE, spread=True)
@dataclass(slots=True, frozen=True, kw_only=True)
class Ack(OnQueue[Acked]):
    """Remove a delivered message (receipt nil: remove it whatever its state, as delete)."""

    queue: Queue
    id: MessageId
    receipt: str | None = None


@operation("ack_batch", scope=WRITE, spread=True)
@dataclass(slots=True, frozen=True, kw_only=True)
class AckBatch(OnQueue):
    """Ack each receipt ('{id}.{n}'), one outcome per receipt."""

    queue: Queue
    receipts: Annotated[list, count(MAX_BATCH_MESSAGES, "receipts")]


@operation("nack", scope=WRITE)
@dataclass(slots=True, frozen=True, kw_only=True)
class Nack(OnQueue[Nacked]):
    """Make a delivery ready again now (or a dead letter past the queue's retries)."""

    queue: Queue
    id: MessageId
    receipt: str | None = None


@operation("extend", scope=WRITE)
@dataclass(slots=True, frozen=True, kw_only=True)
class Extend(OnQueue[Extended]):
    """Move a delivery's due time to `seconds` from now (nil or 0: the queue's timeout)."""

    queue: Queue
    id: MessageId
    receipt: str | None = None
    seconds: Annotated[float, between(0, MAX_TIMEOUT, "seconds")] | None = None


@operation("delete", scope=WRITE)
@dataclass(slots=True, frozen=True, kw_only=True)
class Delete(OnQueue[Acked]):
    """Remove a message from whatever state it is in."""

    queue: Queue
    id: MessageId
