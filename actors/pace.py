"""Pace: an actor's measured time per message, and the requests it refuses before any work.

A request carries its deadline, when its front stops waiting (docs/PROTOCOL.md, "Failure:
503, not a hang"). Work done after it is wasted, and worse for an add: a message its client
was told is not stored. So an actor admits the requests of a batch only while the whole
batch, at its measured pace, ends before the deadline of every request admitted, and refuses
the others at once with 503 and a Retry-After of the time the work it took on needs. It
checks again before each request's handler (the pace measured so far in this batch) and
before an add's commit (actors/save.py).
"""

import math
import time

from mq.errors import Unavailable

#: Weight of the newest batch in the pace (an exponential moving average).
NEW_WEIGHT = 0.3
#: Bounds of the Retry-After a refusal names, in seconds.
RETRY_BOUNDS = (1, 60)


def weight(payload: dict) -> int:
    """The messages a request carries: those of a batch add, else one."""
    messages = payload.get("messages")
    return len(messages) if isinstance(messages, list) and messages else 1


def deadline(payload: dict) -> float | None:
    """When the request's sender stops waiting (the host's monotonic clock), if it said."""
    value = payload.get("deadline")
    return float(value) if isinstance(value, (int, float)) else None


class Pace:
    """Seconds per message, over the batches an actor served and the one in hand."""

    def __init__(self, commit: "Pace | None" = None, refuses: str = "pace") -> None:
        #: The pace of the batches' settle() alone (the flush, a save actor's renames).
        self.commit = commit
        #: What is refused before any work: "pace", what the pace says cannot end before its
        #: deadline; "late", only what is past it already; "none", nothing.
        self.refuses = refuses
        self.per_message = 0.0  # 0: nothing measured yet
        #: Moving averages of a batch's seconds and messages: their ratio is the pace, so a
        #: batch weighs by its size (one request stalled by the machine moves it little).
        self.seconds_avg = self.messages_avg = 0.0
        self.started = 0.0  # the batch in hand: when it began, and the messages dispatched
        self.done = 0

    def begin(self) -> None:
        """A batch starts."""
        self.started, self.done = time.monotonic(), 0

    def start(self, payload: dict) -> Unavailable | None:
        """Before a request's handler: its refusal when it is past its deadline, or, after the
        batch's first, cannot finish before it at the pace seen so far; else None, and it
        counts in the batch in hand."""
        size, due, now = weight(payload), deadline(payload), time.monotonic()
        by_pace = self.refuses == "pace" and self.done
        if self.refuses != "none" and due is not None and (now >= due or by_pace and (
                now + self.seconds(size) + self.commit_seconds(self.done + size) > due)):
            return self.refusal(size)
        self.done += size
        return None

    def end(self, settled: float) -> None:
        """The batch in hand was settled, its settle() in `settled` seconds: fold its time per
        message into the pace, and that of its settle() into the commits' pace."""
        if self.commit is not None:
            self.commit.record(self.done, settled)
        self.record(self.done, time.monotonic() - self.started)
        self.done = 0

    def record(self, messages: int, seconds: float) -> None:
        """Fold the time some messages took into the pace."""
        if messages:
            keep = 1 - NEW_WEIGHT if self.messages_avg else 0.0
            self.seconds_avg = NEW_WEIGHT * seconds + keep * self.seconds_avg
            self.messages_avg = NEW_WEIGHT * messages + keep * self.messages_avg
            self.per_message = self.seconds_avg / self.messages_avg

    def seconds(self, messages: int) -> float:
        """How long that many messages take at the pace (the batch in hand's so far, if
        slower than the average)."""
        pace = self.per_message
        if self.done:
            pace = max(pace, (time.monotonic() - self.started) / self.done)
        return messages * pace

    def commit_seconds(self, messages: int) -> float:
        """How long settling that many written messages takes (the renames into view, the
        flush): at the commits' pace, or at the pace of this batch's writes so far when that
        is slower (the disk slowed since the commits were timed; a rename costs about what a
        write does on a distributed file system), or, before anything was measured, at the
        whole pace (which holds their writes too: more, not less)."""
        live = (time.monotonic() - self.started) / self.done if self.done else 0.0
        if self.commit is not None and self.commit.per_message:
            return messages * max(self.commit.per_message, live)
        return self.seconds(messages)

    def commit_batch_seconds(self) -> float:
        """How long a batch's settling takes, on average over the batches timed (0 before
        any): a flush is shared by the whole batch, so a big batch commits in about the time
        of a small one plus its renames, not in its count times a small batch's pace."""
        return self.commit.seconds_avg if self.commit is not None else 0.0

    def refusal(self, backlog: int) -> Unavailable:
        """503 for a request the actor cannot finish in time; Retry-After: the backlog's time."""
        low, high = RETRY_BOUNDS
        wait = min(high, max(low, math.ceil(self.seconds(backlog))))
        return Unavailable(f"overloaded: cannot finish this request before its deadline "
                           f"({self.per_message * 1000:.2f} ms per message); retry later",
                           retry_after=wait)

    def admit(self, requests: list) -> tuple[list, list, Unavailable]:
        """(admitted, refused, the refusal) of a batch's requests: taken in order while the
        batch, at the pace, ends before every admitted request's deadline. The first one not
        yet past its deadline is taken whatever the pace says: it measures the pace again (a
        pace that only refused would never learn that the disk is fast again), and
        what it wrote is discarded if it ends too late (SaveActor.expire). The refusal's
        Retry-After is the time the admitted ones take."""
        now = time.monotonic()
        admitted: list = []
        refused: list = []
        total, earliest = 0, math.inf
        for request in requests:
            due, size = deadline(request.payload), weight(request.payload)
            ends = now + (total + size) * self.per_message
            if self.refuses != "none" and due is not None and (
                    now >= due or self.refuses == "pace" and admitted and ends > min(earliest, due)):
                refused.append(request)
                continue
            admitted.append(request)
            total += size
            if due is not None:
                earliest = min(earliest, due)
        return admitted, refused, self.refusal(total)
