"""Statistics and the notifications between actors (docs/PROTOCOL.md): one-way messages that
get no reply, so a bad one is dropped with its error logged."""

from collections.abc import Sequence
from dataclasses import dataclass

from mq.operations.fields import EVERY, MOVER, READ, OnQueue, Operation, Queue, operation


@operation("stats", scope=READ, actor=EVERY)
@dataclass(slots=True, frozen=True, kw_only=True)
class Stats(Operation):
    """An actor's counters and flush times (every actor answers it)."""

    #: Also the process's heap blocks after a full garbage collection (GET /_mq/stats?heap=1).
    heap: bool = False


@operation("ready")
@dataclass(slots=True, frozen=True, kw_only=True)
class Ready(OnQueue):
    """To a fetch actor: [id, deliveries] pairs became ready in a queue (a save actor's with
    the file's bytes third)."""

    queue: Queue
    ids: Sequence[list] = ()


@operation("taken")
@dataclass(slots=True, frozen=True, kw_only=True)
class Taken(OnQueue):
    """To a fetch actor: [id, bytes] of ready messages a redrive moved out of a queue (or
    another fetch actor claimed from it: bytes 0, its file still counted)."""

    queue: Queue
    ids: Sequence[list] = ()


@operation("relist")
@dataclass(slots=True, frozen=True, kw_only=True)
class Relist(Operation):
    """To a fetch actor: list every indexed queue again (a "ready" may have been lost)."""


@operation("cancel")
@dataclass(slots=True, frozen=True, kw_only=True)
class Cancel(Operation):
    """To a fetch actor: drop the long poll or watch of this request id on the same link."""

    request: bytes


@operation("end_waits")
@dataclass(slots=True, frozen=True, kw_only=True)
class EndWaits(Operation):
    """To a fetch actor: answer every long poll and watch of the same link now, as if its time
    were up (the front drains)."""


@operation("delayed", actor=MOVER)
@dataclass(slots=True, frozen=True, kw_only=True)
class Delayed(Operation):
    """To the mover: time a message put in delay/, or each [queue, id, attempts, due] of
    `entries`."""

    queue: str | None = None
    id: str | None = None
    attempts: int = 0
    due: float | None = None
    entries: list | None = None

    def all_entries(self):
        """Every (queue, id, attempts, due) the notification times."""
        if self.entries:
            return self.entries
        if self.queue is None or self.id is None or self.due is None:
            return ()
        return ((self.queue, self.id, self.attempts, self.due),)


@operation("rescan", actor=MOVER)
@dataclass(slots=True, frozen=True, kw_only=True)
class Rescan(Operation):
    """To the mover: list delay/ again."""


@operation("relay", actor=MOVER)
@dataclass(slots=True, frozen=True, kw_only=True)
class Relay(OnQueue):
    """To the mover: pass ready [id, deliveries] pairs on to their queue's fetch actor (with
    `taken`, [id, bytes] pairs a redrive moved out of the queue, passed on as `taken`)."""

    queue: Queue
    ids: list
    taken: bool = False


@operation("settled", actor=MOVER)
@dataclass(slots=True, frozen=True, kw_only=True)
class Settled(Operation):
    """To the mover: [queue, id, deliveries] entries taken out of delay/ (nil: any)."""

    entries: Sequence[list] = ()


@operation("window", actor=MOVER)
@dataclass(slots=True, frozen=True, kw_only=True)
class Window(OnQueue):
    """To the mover: a save actor opened an accumulation window; time its close."""

    queue: Queue
    window: str
