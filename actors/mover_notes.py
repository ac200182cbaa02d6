"""An actor's notes to the mover (timers, settlements), sent together every LINGER_SECONDS.

The mover is one process for all of a daemon's actors. Told after every batch, it woke twice
per batch of each fetch actor (a claim's timer, then the delete that settled it), whatever the
batch held: about 4 of its 10 us per fetch+delete pair on 2 cores, and a process every fetch
actor of a 16-core machine feeds (bench/RESULTS.md, "Wake-ups and system calls per
operation"). Notes wait here until the oldest is LINGER_SECONDS old, then leave as one message
of each kind, in the order they were made.

Nothing waits on them: a timer due within 2 * LINGER_SECONDS goes at once, so the mover knows
every due time before it comes; what it loses by waiting is only its delayed and in-flight
counts, up to LINGER_SECONDS behind (docs/ARCHITECTURE.md). Notes lost with a killed actor are
what a successor's "rescan" covers already, as for a note lost in its socket.
"""

import math
import time
from collections.abc import Callable

from mq.operations import Delayed, Operation, Settled

#: Longest a note waits for later batches' notes.
LINGER_SECONDS = 0.02


class MoverNotes:
    """The notes an actor made for the mover and has not sent yet."""

    def __init__(self, send: Callable[[Operation], None]):
        self.send = send
        #: [note class, entries] runs in the order made; a run takes the next entries of its kind.
        self.runs: list[list] = []
        #: time.monotonic() of the oldest note waiting, None when none waits.
        self.since: float | None = None

    def add(self, hidden: list, settled: list) -> None:
        """Keep a batch's (queue, id, deliveries, due) timers and (queue, id, deliveries)
        settlements; send everything at once when a timer falls due soon."""
        if hidden:
            self._append(Delayed, hidden)
        if settled:
            self._append(Settled, settled)
        if not self.runs:
            return
        if self.since is None:
            self.since = time.monotonic()
        if hidden and min(entry[3] for entry in hidden) - time.time() < 2 * LINGER_SECONDS:
            self.send_all()

    def _append(self, kind: type[Operation], entries: list) -> None:
        if not self.runs or self.runs[-1][0] is not kind:
            self.runs.append([kind, []])
        self.runs[-1][1].extend(list(entry) for entry in entries)

    def wait_ms(self, longest: int) -> int:
        """Milliseconds the actor may wait for requests before send_due must run, at most longest."""
        if self.since is None:
            return longest
        left = self.since + LINGER_SECONDS - time.monotonic()
        return max(0, min(longest, math.ceil(left * 1000)))

    def send_due(self) -> None:
        """Send what waits once the oldest note is LINGER_SECONDS old."""
        if self.since is not None and time.monotonic() - self.since >= LINGER_SECONDS:
            self.send_all()

    def send_all(self) -> None:
        """Send every note waiting, one message per run."""
        runs, self.runs, self.since = self.runs, [], None
        for kind, entries in runs:
            self.send(kind(entries=entries))
