"""Long polls of the fetch actor: fetches and batch fetches that wait for a message.

`Waiters` holds them per queue, first come first served, and changes only through its own
methods: the fetch commands park a waiter, a front's cancel drops one, a draining front's
`end_waits` ends its own, and between batches (or inside one, before its flush:
actors/fetch.py) `feed` answers those that can have a message or whose time is up. Each is
answered by its own deadline, wherever it stands in its queue: a short poll behind a longer
one does not wait for it (docs/DELIVERY.md, "Long polling"). `FetchActorBatch` carries the
waiters a batch answered to the reply that follows its flush.
"""

import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from mq.actors.batch import Batch


@dataclass(frozen=True)
class Waiter:
    """A parked long poll: who asked, until when (monotonic), and for how many messages
    (None: a single fetch; a number: a batch fetch of at most that many)."""

    queue: str
    peer: bytes
    rid: bytes
    deadline: float
    limit: int | None = None


@dataclass
class FetchActorBatch(Batch):
    """A fetch actor's batch; answered: (peer, request id) of each long poll it answered, whose
    results follow the requests' own in `results`, replied to once the batch is flushed."""

    answered: list = field(default_factory=list)


class Waiters:
    """The long polls of one fetch actor, per queue in arrival order.

    A waiter answered or dropped leaves `_parked` at once; its entries in its queue's line and
    in the deadline heap are passed over when met (so a cancel costs no search).
    """

    def __init__(self, log) -> None:
        self.log = log
        self._queues: dict[str, deque[Waiter]] = {}  # arrival order, per queue
        self._deadlines: list[tuple[float, int, Waiter]] = []  # a heap: the next to expire
        self._parked: dict[tuple[bytes, bytes], Waiter] = {}  # (peer, rid) -> still waiting
        self._ended: list[Waiter] = []  # to answer with nothing at the next feed
        self._order = itertools.count()

    def __bool__(self) -> bool:
        return bool(self._parked or self._ended)

    def _waits(self, waiter: Waiter) -> bool:
        return self._parked.get((waiter.peer, waiter.rid)) is waiter

    def _drop(self, waiter: Waiter) -> None:
        del self._parked[(waiter.peer, waiter.rid)]
        if not self._parked:  # What is left in the lines and the heap is all stale.
            self._queues.clear()
            self._deadlines.clear()

    def park(self, queue: str, peer: bytes, rid: bytes, wait: float,
             limit: int | None = None) -> None:
        """Add a long poll of `wait` seconds behind those already waiting on the queue."""
        waiter = Waiter(queue, peer, rid, time.monotonic() + wait, limit)
        self._queues.setdefault(queue, deque()).append(waiter)
        heapq.heappush(self._deadlines, (waiter.deadline, next(self._order), waiter))
        self._parked[(peer, rid)] = waiter
        self.log.debug("fetch.wait", queue=queue, seconds=wait)

    def waiting(self, queue: str) -> list[Waiter]:
        """The long polls waiting on the queue, oldest first (a copy)."""
        return [w for w in self._queues.get(queue, ()) if self._waits(w)]

    def counts(self) -> dict[str, int]:
        """How many long polls wait on each queue that has one."""
        counted: dict[str, int] = {}
        for waiter in self._parked.values():
            counted[waiter.queue] = counted.get(waiter.queue, 0) + 1
        return counted

    def cancel(self, peer: bytes, rid: bytes) -> None:
        """Drop the long poll a front gave up on (its client went away)."""
        waiter = self._parked.get((peer, rid))
        if waiter is not None:
            self._drop(waiter)
            self.log.debug("fetch.cancelled", queue=waiter.queue)

    def end(self, peer: bytes) -> int:
        """Answer every long poll of this peer with nothing at the next feed, as if its time
        were up (its front drains); how many."""
        ended = [w for w in self._parked.values() if w.peer == peer]
        for waiter in ended:
            self._drop(waiter)
        self._ended.extend(ended)
        return len(ended)

    def nearest_deadline(self) -> float | None:
        """The monotonic time of the first long poll to expire, None when none waits."""
        if self._ended:
            return time.monotonic()
        deadlines = self._deadlines
        while deadlines and not self._waits(deadlines[0][2]):
            heapq.heappop(deadlines)
        return deadlines[0][0] if deadlines else None

    def feed(self, batch: FetchActorBatch, take: Callable[[str, int | None], object]) -> None:
        """Answer each long poll whose time is up, with nothing, then each that can have a
        message (take(queue, limit), None when there is none), oldest first in each queue:
        its answer joins the batch's results, its address batch.answered, in that order."""
        ended, self._ended = self._ended, []
        for waiter in ended:
            self._answer(batch, waiter, None)
        now = time.monotonic()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            waiter = heapq.heappop(deadlines)[2]
            if self._waits(waiter):
                self._drop(waiter)
                self._answer(batch, waiter, None)
        for queue in list(self._queues):
            waiting = self._queues.get(queue)  # None: the last drop cleared the lines
            while waiting:
                waiter = waiting[0]
                if not self._waits(waiter):
                    waiting.popleft()
                    continue
                result = take(queue, waiter.limit)
                if result is None:
                    break  # Nothing for the oldest: nothing for those behind it either.
                waiting.popleft()
                self._drop(waiter)
                self._answer(batch, waiter, result)
            if waiting is not None and not waiting:
                self._queues.pop(queue, None)

    @staticmethod
    def _answer(batch: FetchActorBatch, waiter: Waiter, result) -> None:
        batch.answered.append((waiter.peer, waiter.rid))
        batch.results.append(result or ({"empty": True} if waiter.limit is None
                                        else {"messages": []}))
