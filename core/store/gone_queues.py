"""The sweep that releases a process's per-queue state once its queue is gone.

A queue deleted through this daemon is forgotten at once by its fetch actor; the save actors,
the mover and the fronts, and every process for a queue that went otherwise (another daemon
on the root deleted it), learn it here: every SWEEP_SECONDS, a process that keeps anything
about queues lists queues/ once and forgets those not in it. A queue created again before
the sweep keeps what was kept about it, as if it had never gone.
"""

import gc
import sys
import time
from collections.abc import Callable, Collection

#: Seconds between two listings of queues/ by one actor (none while it keeps no queue).
SWEEP_SECONDS = 5.0


class GoneQueues:
    """Callable chore: forget the queues a process keeps state about that queues/ no longer has."""

    def __init__(self, list_queues: Callable[[], list[str]], queue_exists: Callable[[str], bool],
                 tables: Callable[[], dict[str, Collection[str]]],
                 forget: Callable[[set[str]], None], log,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.list_queues = list_queues
        self.queue_exists = queue_exists
        self.tables = tables
        self.forget = forget
        self.log = log
        self.clock = clock
        self.swept_at = clock()

    def remembered(self) -> set[str]:
        """Every queue any of the process's tables holds."""
        return set().union(*self.tables().values())

    def __call__(self) -> None:
        """Once every SWEEP_SECONDS: forget the remembered queues queues/ does not have."""
        if self.clock() - self.swept_at < SWEEP_SECONDS:
            return
        self.swept_at = self.clock()
        known = self.remembered()
        if not known:
            return
        try:
            existing = self.list_queues()
            # Each one checked again: a listing that came back short (a network file system's
            # hiccup) must not take a live queue's counters.
            gone = {queue for queue in known.difference(existing) if not self.queue_exists(queue)}
        except OSError:
            return  # The root is away or failing: nothing is known to be gone.
        if gone:
            self.forget(gone)
            self.log.debug("queues.forgotten", count=len(gone))

    def sizes(self) -> dict[str, int]:
        """How many queues each table holds (in the statistics, to watch them shrink)."""
        return {name: len(queues) for name, queues in self.tables().items()}

    def figures(self, heap: bool) -> dict:
        """What a process's statistics answer says of its per-queue state: the tables' sizes,
        and when asked (heap) the memory blocks Python's allocator holds for it."""
        return {"tables": self.sizes(), **({"heap_blocks": heap_blocks()} if heap else {})}


def heap_blocks() -> int:
    """The blocks Python's allocator holds for this process after a full garbage collection:
    state kept per queue grows it by at least a block a queue (the queue's name), where
    resident memory also follows the allocator's high-water mark of the busiest moment and
    garbage awaiting collection comes and goes (docs/OPERATIONS.md, "Watching mq")."""
    gc.collect()
    return sys.getallocatedblocks()
