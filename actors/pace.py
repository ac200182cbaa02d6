"""Pace: an actor's measured time per message, and the requests it refuses before any work.

A request carries its deadline, when its front stops waiting (docs/PROTOCOL.md, "Failure:
503, not a hang"). Work done after it is wasted, and worse for an add: a message its client
was told is not stored. So a save actor refuses a request already past its deadline at once,
at intake and again before its handler, with 503 and a Retry-After of the time the work it
took on needs at its measured pace; and before an add's renames it discards the files of
every add that a typical commit would end past its deadline (SaveActor.expire, timed by the
pace of the batches' settle()). A fetch actor refuses nothing for time: its requests differ
too widely in cost for a pace per message, and its late work adds no message.
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

    def __init__(self, commit: "Pace | None" = None, refuses: str = "late") -> None:
        #: The pace of the batches' settle() alone (the flush, a save actor's renames).
        self.commit = commit
        #: What is refused before any work: "late", what is past its deadline already;
        #: "none", nothing.
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
        """Before a request's handler: its refusal when it is past its deadline; else None,
        and it counts in the batch in hand."""
        size = weight(payload)
        if self.refuses == "late" and self.late(payload, time.monotonic()):
            return self.refusal(size)
        self.done += size
        return None

    def late(self, payload: dict, now: float) -> bool:
        """Whether this actor refuses the request as past its deadline."""
        if self.refuses != "late":
            return False  # A fetch actor's: no deadline is read per request.
        due = deadline(payload)
        return due is not None and now >= due

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

    def admit(self, requests: list) -> tuple[list, list, Unavailable | None]:
        """(admitted, refused, the refusal) of a batch's requests: the ones past their
        deadline refused, the others admitted (what an admitted add wrote is discarded if it
        would end too late: SaveActor.expire). The refusal's Retry-After is the time the
        admitted ones take; None when none is refused."""
        if self.refuses != "late":
            return requests, [], None
        now = time.monotonic()
        admitted: list = []
        refused: list = []
        for request in requests:
            (refused if self.late(request.payload, now) else admitted).append(request)
        # The weights matter only to a refusal's Retry-After: not summed when none is refused.
        if not refused:
            return admitted, refused, None
        return admitted, refused, self.refusal(sum(weight(request.payload) for request in admitted))
