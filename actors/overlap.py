"""Overlap: whether a save actor makes a batch's file calls one after another or several at once.

On a local disk an add's create, write and rename are mostly CPU: the thread never sleeps in
them, and running them on threads would only add the threads' cost. On a network or FUSE file
system each call is a round trip (about a millisecond on JuiceFS, several on GlusterFS) in
which the actor sleeps; one call at a time then leaves the file system idle while it could
serve many (bench/RESULTS.md, "Adds where the file system waits"). So the actor measures,
for each batch made one call at a time, how long its thread slept outside the flushes per
file (the kernel's own account of the thread: time on a CPU and time waiting for one, from
/proc/thread-self/schedstat, so a busy machine is not mistaken for a slow disk), and once
the files wait on the file system, it writes and renames a batch's files on a few threads.
It chooses from the medians of the last MEASURED batches, and while the calls overlap, one
batch every PROBE_SECONDS runs one call at a time again, to see whether they still wait.
No option turns this on: the measurement does (docs/ARCHITECTURE.md, "Group commit").
"""

import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

#: Threads of a save actor's file calls once they overlap (only made then).
THREADS = 16
#: Sleep per file, in seconds, outside the flushes, from which the file calls overlap...
WAIT_PER_FILE = 0.0005
#: ... when it is also at least this share of those batches' time (not the flushes').
WAIT_SHARE = 0.5
#: How often, in seconds, a batch runs one call at a time again while they overlap.
PROBE_SECONDS = 10.0
#: The measured batches the choice looks at: their medians, so that one batch's slow call
#: (a queue's folder made and fsynced, a journal commit waited for) decides nothing.
MEASURED = 3
SCHEDSTAT = "/proc/thread-self/schedstat"
T = TypeVar("T")


def cpu_seconds() -> Callable[[], float]:
    """A clock of the calling thread's time on a CPU and waiting for one (schedstat), or,
    where the kernel does not keep that, its CPU time alone."""
    try:
        fd = os.open(SCHEDSTAT, os.O_RDONLY)
    except OSError:
        return time.thread_time

    def clock() -> float:
        on_cpu, waiting = os.pread(fd, 64, 0).split()[:2]
        return (int(on_cpu) + int(waiting)) / 1e9
    return clock


class Overlap:
    """One save actor's choice between one file call at a time and several, by measurement."""

    def __init__(self) -> None:
        self.clock = cpu_seconds()
        self.pool: ThreadPoolExecutor | None = None
        self.on = False
        #: (sleep per file, sleep's share of the time) of the last batches measured.
        self.measured: deque[tuple[float, float]] = deque(maxlen=MEASURED)
        self.probed = 0.0  # monotonic time of the last batch made one call at a time
        self.measuring: tuple[float, float] | None = None

    def begin(self) -> ThreadPoolExecutor | None:
        """A batch starts: the threads its file calls run on, or None for one at a time
        (measured: the batch's wall and CPU clocks are read here and in end())."""
        now = time.monotonic()
        if self.on and now - self.probed < PROBE_SECONDS:
            self.measuring = None
            return self.pool
        self.probed = now
        self.measuring = (now, self.clock())
        return None

    def end(self, files: int, flush_seconds: float) -> None:
        """The batch made `files` files in `flush_seconds` of flushes: when it was measured,
        keep its sleep per file and choose for the next batches."""
        if self.measuring is None or not files:
            return
        started, cpu = self.measuring
        self.measuring = None
        wall = max(time.monotonic() - started - flush_seconds, 1e-9)
        slept = min(wall, max(0.0, wall - (self.clock() - cpu)))
        self.measured.append((slept / files, slept / wall))
        self.on = (len(self.measured) == MEASURED
                   and statistics.median(m[0] for m in self.measured) >= WAIT_PER_FILE
                   and statistics.median(m[1] for m in self.measured) >= WAIT_SHARE)
        if self.on and self.pool is None:
            self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="files")

    def wait_per_file(self) -> float:
        """The median sleep per file of the last batches measured, in seconds (0 before any)."""
        return statistics.median(m[0] for m in self.measured) if self.measured else 0.0


def run_all(pool: Executor, call: Callable[[T], object], items: Iterable[T]) -> list:
    """call(item) for each item on the pool; each one's result or the exception it raised, in
    order."""
    def caught(item: T) -> object:
        try:
            return call(item)
        except BaseException as err:  # noqa: BLE001 - each call's failure is its own answer
            return err
    return list(pool.map(caught, items))
