"""Long polls of the fetch actor: fetches and batch fetches that wait for a message.

`Waiters` holds them per queue, first come first served, and changes only through its own
methods: the fetch commands park a waiter, a front's cancel drops one, and between batches
(or inside one, before its flush: actors/fetch.py) `feed` answers those that can have a
message or whose time is up. `FetchBatch` carries the waiters a batch answered to the reply
that follows its flush.
"""

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from mq.actors.batch import Batch


@dataclass(frozen=True)
class Waiter:
    """A parked long poll: who asked, until when (monotonic), and for how many messages
    (None: a single fetch; a number: a batch fetch of at most that many)."""

    peer: bytes
    rid: bytes
    deadline: float
    limit: int | None = None


@dataclass
class FetchBatch(Batch):
    """A fetch actor's batch; answered: (peer, request id) of each long poll it answered, whose
    results follow the requests' own in `results`, replied to once the batch is flushed."""

    answered: list = field(default_factory=list)


class Waiters:
    """The long polls of one fetch actor, per queue in arrival order."""

    def __init__(self, log) -> None:
        self.log = log
        self._queues: dict[str, deque[Waiter]] = {}

    def __bool__(self) -> bool:
        return bool(self._queues)

    def park(self, queue: str, peer: bytes, rid: bytes, wait: float,
             limit: int | None = None) -> None:
        """Add a long poll of `wait` seconds behind those already waiting on the queue."""
        self._queues.setdefault(queue, deque()).append(
            Waiter(peer, rid, time.monotonic() + wait, limit))
        self.log.debug("fetch.wait", queue=queue, seconds=wait)

    def waiting(self, queue: str) -> list[Waiter]:
        """The long polls waiting on the queue, oldest first (a copy)."""
        return list(self._queues.get(queue, ()))

    def cancel(self, peer: bytes, rid: bytes) -> None:
        """Drop the long poll a front gave up on (its client went away)."""
        for queue, waiting in list(self._queues.items()):
            kept = deque(w for w in waiting if (w.peer, w.rid) != (peer, rid))
            if len(kept) != len(waiting):
                self.log.debug("fetch.cancelled", queue=queue)
                if kept:
                    self._queues[queue] = kept
                else:
                    del self._queues[queue]

    def nearest_deadline(self) -> float | None:
        """The monotonic time of the first long poll to expire, None when none waits."""
        return min((waiting[0].deadline for waiting in self._queues.values()), default=None)

    def feed(self, batch: FetchBatch, take: Callable[[str, int | None], object]) -> None:
        """Answer each long poll that can have a message (take(queue, limit), None when there is
        none) or whose time is up: its answer joins the batch's results, its address
        batch.answered, in that order."""
        now = time.monotonic()
        for queue in list(self._queues):
            waiting = self._queues[queue]
            while waiting:
                waiter = waiting[0]
                result = None if waiter.deadline <= now else take(queue, waiter.limit)
                if result is None and waiter.deadline > now:
                    break
                waiting.popleft()
                batch.answered.append((waiter.peer, waiter.rid))
                batch.results.append(result or ({"empty": True} if waiter.limit is None
                                                else {"messages": []}))
            if not waiting:
                del self._queues[queue]
