"""FlushTimes: how long the flushes of one process took, as a histogram of fixed buckets.

A flush (syncfs, or the fsyncs of a batch's folders) is where a slow or failing disk shows
first: every add, ack and move waits on one. Recording one is a bisect and two adds, kept in
the process's memory and read by the stats op; like the event counters it starts from zero
with its process (docs/OPERATIONS.md, "Metrics").
"""

import bisect
import time
from contextlib import contextmanager

#: Upper bounds of the buckets, in seconds: a healthy local disk flushes in well under 10 ms,
#: a network file system in tens of ms; seconds mean trouble.
BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class FlushTimes:
    """Counts of flushes per bucket of duration, their number and their total time."""

    def __init__(self):
        self.counts = [0] * (len(BOUNDS) + 1)  # The last one is above every bound.
        self.total_s = 0.0

    def observe(self, seconds: float) -> None:
        """Record one flush that took this long."""
        self.counts[bisect.bisect_left(BOUNDS, seconds)] += 1
        self.total_s += seconds

    @contextmanager
    def timed(self):
        """Record the time the with-block took, whether it succeeded or raised."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.observe(time.monotonic() - started)

    def snapshot(self) -> dict:
        """{"count", "sum_s", "buckets": [[upper bound, flushes at most that long], ...]}, the
        buckets cumulative as Prometheus has them, the last one's bound null (+Inf)."""
        cumulative, running = [], 0
        for bound, n in zip((*BOUNDS, None), self.counts):
            running += n
            cumulative.append([bound, running])
        return {"count": running, "sum_s": round(self.total_s, 6), "buckets": cumulative}
