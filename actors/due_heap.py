"""The mover's timers: (due, queue, id, deliveries) entries ordered by due time (`DueHeap`).

One entry per delivery in delay/, from the notes of the save and fetch actors and the mover's
scans of delay/; the mover pops what is due and releases it (actors/mover.py). The heap also
keeps each queue's delayed and in-flight counts (the statistics), and remembers for a while
the deliveries settled before their timer came, so a late timer does not count them again.
The mover keeps a second one for the accumulation windows.
"""

import heapq
import time
from collections import OrderedDict

from mq import properties

#: Seconds a delivery settled before it was timed is remembered. Its timer comes from another
#: actor than the settlement (a delayed add's save actor, the delete's fetch actor), and each
#: actor's notes wait up to 20 ms (actors/mover_notes.py): timed after it left delay/, it
#: would count as delayed until its due time, maybe days away.
EARLY_SETTLED_SECONDS = 10.0


class DueHeap:
    """(due, queue, id, deliveries) entries ordered by due time, one entry per delivery."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, str, str, int]] = []
        self.due: dict[tuple[str, str, int], float] = {}
        # Entries of a queue a fetch actor purged or deleted (settled without an id): still
        # timed, since a delayed add racing the purge may hold the same key space, but no
        # longer counted.
        self.settled: set[tuple[str, str, int]] = set()
        self.counts: dict[str, list[int]] = {}  # queue -> [delayed, in flight], settled excluded
        #: Deliveries settled before they were timed -> when (time.monotonic()), oldest first.
        self.settled_early: OrderedDict[tuple[str, str, int], float] = OrderedDict()
        #: Queues purged or deleted in the last EARLY_SETTLED_SECONDS -> when (time.monotonic()).
        self.purged: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self.due)

    def add(self, due: float, queue: str, message_id: str, attempts: int = 0) -> None:
        """Time a message; a later add for the same delivery replaces the earlier due time.

        The replaced entry stays in the heap until it surfaces; when such entries outnumber
        the live ones the heap is rebuilt, so a message extended again and again costs one
        entry, not one per extend.
        """
        key = (queue, message_id, attempts)
        if self.due.get(key) == due or key in self.settled_early:
            return  # Timed already, or left delay/ before its timer came.
        if key not in self.due:
            self._tally(key, 1)
        self.due[key] = due
        heapq.heappush(self.heap, (due, queue, message_id, attempts))
        self._compact()

    def _compact(self) -> None:
        """Rebuild the heap once its replaced and dropped entries outnumber the live ones."""
        if len(self.heap) > 2 * len(self.due) + 64:
            self.heap = [(d, *k) for k, d in self.due.items()]
            heapq.heapify(self.heap)

    def next_due(self) -> float | None:
        """The earliest due time, or None when nothing is timed."""
        while self.heap and self.due.get(self.heap[0][1:]) != self.heap[0][0]:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    def pop_due(self, now: float) -> list[tuple[str, str, int]]:
        """Remove and return the (queue, id, deliveries) due at or before now."""
        out = []
        while (due := self.next_due()) is not None and due <= now:
            _, queue, message_id, attempts = heapq.heappop(self.heap)
            del self.due[(queue, message_id, attempts)]
            if (queue, message_id, attempts) in self.settled:
                self.settled.discard((queue, message_id, attempts))
            else:
                self._tally((queue, message_id, attempts), -1)
            out.append((queue, message_id, attempts))
        return out

    def settle(self, queue: str, message_id: str | None, attempts: int | None) -> None:
        """Entries that left delay/ (acked, nacked, deleted; None: any delivery, or any id).

        A message's own entries are dropped: their timers need not fire (no wake-up to stat a
        file that is gone), and a delivery that left delay/ never comes back under its key:
        one settled before its timer came is remembered, and that timer ignored, for
        EARLY_SETTLED_SECONDS. A whole queue's (purge, deletion) are only no longer counted:
        a delayed add racing the purge keeps its timer, whatever order the two notifications
        arrive in (one told after it is kept only when its file is in delay/: purged_lately).
        """
        if message_id is None:
            for key in [key for key in self.due if key[0] == queue and key not in self.settled]:
                self.settled.add(key)
                self._tally(key, -1)
            now = time.monotonic()
            self.purged = {q: at for q, at in self.purged.items()
                           if at >= now - EARLY_SETTLED_SECONDS}
            self.purged[queue] = now
            return
        keys = [(queue, message_id, attempts)] if attempts is not None else \
            [(queue, message_id, n) for n in range(properties.MAX_RETRY + 2)]
        for key in keys:
            if key in self.due:
                del self.due[key]  # Its heap entry is skipped when it surfaces.
                if key in self.settled:
                    self.settled.discard(key)
                else:
                    self._tally(key, -1)
            elif attempts is not None:
                self._settled_before_timed(key)

    def queues(self) -> set[str]:
        """The queues with timers: counted ones, and those of purged or deleted queues."""
        return set(self.counts) | {key[0] for key in self.settled}

    def forget(self, gone: set[str], in_delay) -> None:
        """Drop the timers of gone queues (whose file in_delay(queue, id, deliveries) does not
        find: a delayed add racing the deletion keeps its own), and what is older than
        EARLY_SETTLED_SECONDS of the purges and early settlements."""
        for key in [key for key in self.due if key[0] in gone and not in_delay(*key)]:
            del self.due[key]
            if key in self.settled:
                self.settled.discard(key)
            else:
                self._tally(key, -1)
        self._compact()
        since = time.monotonic() - EARLY_SETTLED_SECONDS
        self.purged = {q: at for q, at in self.purged.items() if at >= since}
        while self.settled_early and next(iter(self.settled_early.values())) < since:
            self.settled_early.popitem(last=False)

    def purged_lately(self, queue: str) -> bool:
        """Whether the queue was purged or deleted in the last EARLY_SETTLED_SECONDS: a timer
        that comes now may be of a message the purge took."""
        at = self.purged.get(queue)
        return at is not None and at >= time.monotonic() - EARLY_SETTLED_SECONDS

    def _settled_before_timed(self, key: tuple[str, str, int]) -> None:
        """Remember for EARLY_SETTLED_SECONDS a delivery that left delay/ before its timer came
        (a delivery never comes back under its key), forgetting the ones older than that."""
        now = time.monotonic()
        early = self.settled_early
        while early and next(iter(early.values())) < now - EARLY_SETTLED_SECONDS:
            early.popitem(last=False)
        early[key] = now

    def _tally(self, key: tuple[str, str, int], change: int) -> None:
        """Count an entry in or out of its queue's delayed (0 deliveries) or in-flight figure."""
        counts = self.counts.setdefault(key[0], [0, 0])
        counts[1 if key[2] else 0] += change
        if counts == [0, 0]:
            del self.counts[key[0]]
