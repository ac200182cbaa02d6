"""The fetch actor's queue administration: queues, peek, purge, redrive, properties and the
default property rules (docs/PROTOCOL.md, "Fetch actor")."""

from dataclasses import dataclass
from typing import Annotated, TypedDict

from mq import properties as rules
from mq.errors import Invalid
from mq.operations.fields import (
    READ,
    WRITE,
    MessageId,
    OnQueue,
    Operation,
    Queue,
    Touches,
    between,
    operation,
)
from mq.operations.wire import Rest, Rpc

#: Most messages one peek returns.
MAX_PEEK = 1000

#: A queue's own properties, checked (mq.properties); the dead-letter queue they name is a
#: queue the op touches (its dead letters will be written there, a redrive reads them back).
Properties = Annotated[dict, Touches(rules.validate, rules.named_queues)]
#: The default property rules, [[regex, properties], ...], checked.
Rules = Annotated[list, rules.validate_rules]


@operation("queue_get", scope=READ)
@dataclass(slots=True, frozen=True, kw_only=True)
class QueueGet(OnQueue):
    """A queue's effective properties and ready count (hidden: also in flight and delayed)."""

    queue: Queue
    hidden: bool = False


@operation("queue_put")
@dataclass(slots=True, frozen=True, kw_only=True)
class QueuePut(OnQueue):
    """Create a queue."""

    queue: Queue


@operation("queue_delete")
@dataclass(slots=True, frozen=True, kw_only=True)
class QueueDelete(OnQueue):
    """Delete a queue with its messages, keys and properties."""

    queue: Queue


class Redriven(TypedDict):
    """The answer to a redrive: the dead-letter queue it emptied and how many moved."""

    queue: str
    dead_letter_queue: str
    moved: int


@operation("redrive")
@dataclass(slots=True, frozen=True, kw_only=True)
class Redrive(OnQueue[Redriven]):
    """Move every message of `source` (nil: the queue's dead-letter queue) into the queue."""

    queue: Queue
    source: Queue | None = None


class Moved(TypedDict):
    """The answer to a move: the message's id and the queue it is now ready in."""

    id: str
    queue: str


@operation("move", scope=WRITE, rest=Rest("POST", "/{queue}/messages/{id}/move", query={"to": "target"}),
           rpc=Rpc("move", ("queue", "id", "target")))
@dataclass(slots=True, frozen=True, kw_only=True)
class Move(OnQueue[Moved]):
    """Move a ready message of the queue into `target`, ready there as new (it keeps its id)."""

    queue: Queue
    id: MessageId
    target: Queue

    def __post_init__(self):
        if self.target == self.queue:
            raise Invalid("move: a message moves to another queue")


@operation("peek", scope=READ)
@dataclass(slots=True, frozen=True, kw_only=True)
class Peek(OnQueue):
    """Up to `max` of the oldest ready messages with ids after `after`; claims nothing."""

    queue: Queue
    max: Annotated[int, between(1, MAX_PEEK, "max")] = 10
    after: MessageId | None = None


@operation("purge", rest=Rest("POST", "/{queue}/purge"))
@dataclass(slots=True, frozen=True, kw_only=True)
class Purge(OnQueue):
    """Remove every message of a queue (keys: also its de-duplication keys)."""

    queue: Queue
    keys: bool = False


@operation("props_get", scope=READ)
@dataclass(slots=True, frozen=True, kw_only=True)
class PropsGet(OnQueue):
    """A queue's own and effective properties."""

    queue: Queue


@operation("props_put")
@dataclass(slots=True, frozen=True, kw_only=True)
class PropsPut(OnQueue):
    """Replace a queue's own properties."""

    queue: Queue
    properties: Properties


@operation("props_patch")
@dataclass(slots=True, frozen=True, kw_only=True)
class PropsPatch(OnQueue):
    """Change some of a queue's own properties."""

    queue: Queue
    properties: Properties


@operation("props_delete")
@dataclass(slots=True, frozen=True, kw_only=True)
class PropsDelete(OnQueue):
    """Drop a queue's own properties (the default rules apply again)."""

    queue: Queue


@operation("rules_get", scope=READ)
@dataclass(slots=True, frozen=True, kw_only=True)
class RulesGet(Operation):
    """The default property rules."""


@operation("rules_put")
@dataclass(slots=True, frozen=True, kw_only=True)
class RulesPut(Operation):
    """Replace the default property rules."""

    rules: Rules


@operation("rules_delete")
@dataclass(slots=True, frozen=True, kw_only=True)
class RulesDelete(Operation):
    """Drop the default property rules."""
