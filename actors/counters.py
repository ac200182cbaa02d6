"""Counters: an actor's per-queue event totals, with a rate over the last minute for each.

Counting is a dict lookup and an add: the actors count on their hot paths (every add, fetch
and ack). The totals live as long as the process: a restarted actor starts from zero, which
is what Prometheus expects of a counter (it sees the reset and carries on).
"""

import time
from collections import defaultdict
from collections.abc import Callable

#: Seconds the rates are averaged over.
WINDOW_SECONDS = 60


class Counters:
    """Per-queue totals of named events, and a ring of per-second buckets for their rates."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        # (queue, event) -> [second, count] buckets, one slot per second of the window.
        self.buckets: dict[tuple[str, str], list[list[int]]] = {}

    def count(self, queue: str, event: str, n: int = 1) -> None:
        """Record n events of a kind for a queue."""
        self.totals[queue][event] += n
        second = int(self.clock())
        ring = self.buckets.get((queue, event))
        if ring is None:
            ring = self.buckets[(queue, event)] = [[-1, 0] for _ in range(WINDOW_SECONDS)]
        slot = ring[second % WINDOW_SECONDS]
        if slot[0] != second:
            slot[0], slot[1] = second, 0
        slot[1] += n

    def rate(self, queue: str, event: str) -> float:
        """Events per second over the last WINDOW_SECONDS whole seconds (the current one too)."""
        ring = self.buckets.get((queue, event))
        if ring is None:
            return 0.0
        now = int(self.clock())
        recent = sum(n for second, n in ring if now - second < WINDOW_SECONDS)
        return recent / WINDOW_SECONDS

    def forget(self, queue: str) -> None:
        """Drop a deleted queue's counters."""
        self.totals.pop(queue, None)
        for key in [k for k in self.buckets if k[0] == queue]:
            del self.buckets[key]

    def snapshot(self) -> dict[str, dict]:
        """queue -> {"totals": {event: n}, "rates": {event: per second over the last minute}}."""
        return {queue: {"totals": dict(events),
                        "rates": {event: round(self.rate(queue, event), 3) for event in events}}
                for queue, events in self.totals.items()}
