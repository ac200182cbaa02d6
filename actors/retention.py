"""Retention: the daemon's reaper removes messages older than their queue's `retention`.

A message's age is read from its id (a v7 UUID carries its creation time), so a pass needs
names only. The fetch actor never hands out an expired message either (actors/fetch.py), so
a pass's interval bounds how long an expired message uses disk, not whether it is delivered.
"""

import time

from mq import logs
from mq.delivery import expiry_cutoff_ms

#: Seconds between passes. A pass lists only the queues whose oldest message may have expired.
SWEEP_SECONDS = 1.0
#: Seconds after which a queue is listed again whatever it held: covers messages with old ids
#: that arrived since its last listing (a redrive from a dead-letter queue, another writer).
FULL_SWEEP_SECONDS = 300.0


class RetentionSweep:
    """Callable chore: remove expired messages of every queue, listing only what may hold one."""

    def __init__(self, store, props) -> None:
        self.store = store
        self.props = props
        self.oldest: dict[str, tuple[int, float]] = {}  # queue -> (oldest kept ms, listed at)

    def due_cutoffs(self, now: float) -> dict[str, int]:
        """Per queue worth listing now, the creation time (Unix ms) before which messages expire."""
        cutoffs = {}
        queues = self.store.queues.list_queues()
        self.oldest = {q: self.oldest[q] for q in queues if q in self.oldest}  # drop deleted ones
        for gone in self.props.queues().difference(queues):
            self.props.forget(gone)
        for queue, props in self.props.effective_each(queues):
            retention = props["retention"]
            if not retention:
                continue  # Kept until acked.
            cutoff = expiry_cutoff_ms(retention, now)
            oldest, listed = self.oldest.get(queue, (None, float("-inf")))
            if oldest is None or oldest < cutoff or time.monotonic() - listed > FULL_SWEEP_SECONDS:
                cutoffs[queue] = cutoff
        return cutoffs

    def __call__(self) -> None:
        """One pass: list the queues that may hold expired messages and remove those."""
        now = time.time()
        cutoffs = self.due_cutoffs(now)
        if not cutoffs:
            return
        removed, oldest = self.store.queues.remove_expired(cutoffs)
        listed = time.monotonic()
        for queue in cutoffs:
            # An empty queue gets only younger messages (ids are made when a message is added).
            self.oldest[queue] = (oldest.get(queue, int(now * 1000)), listed)
        for queue, count in removed.items():
            logs.get().info("reaper.expired", queue=queue, count=count)
