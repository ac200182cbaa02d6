"""Fetching from any of several queues a fetch actor owns: the oldest ready message among
them (fetch_any), and a long poll that claims nothing (watch) for the front's pull-any.

The front asks every fetch actor owning a matching queue for its oldest head without claiming,
claims on the one whose head is oldest (ids are time-ordered), and between tries parks a
`watch` on each: a watch answers as soon as one of its queues has a ready message, so the
front claims exactly one message, and only while its client is still there.
"""

import time
from dataclasses import dataclass

from mq.actors.batch import DEFERRED, Batch, Request
from mq.actors.commands import FetchCommandActor
from mq.operations import FetchAny, Fetched, Watch


@dataclass
class Watcher:
    """A parked watch: who asked, until when, and for which queues."""

    peer: bytes
    rid: bytes
    deadline: float
    queues: list


def oldest_head(actor: FetchCommandActor, queues: list[str], batch: Batch | None = None,
                heads: dict[str, str | None] | None = None) -> tuple[str, str] | None:
    """(queue, id) of the oldest message a fetch could take among the queues, None when there
    is none (a fifo queue whose ready messages all wait for their groups has none).

    heads: queue -> head already found in this pass (a fifo queue's head is a scan past its
    held groups: once per queue per pass, however many watches name it)."""
    heads = {} if heads is None else heads
    best = None
    for queue in queues:
        if queue not in heads:
            heads[queue] = actor.head(queue, batch)
        head = heads[queue]
        if head is not None and (best is None or head < best[1]):
            best = (queue, head)
    return best


def fetch_any(actor: FetchCommandActor, batch: Batch, request: FetchAny, sender: Request) -> Fetched:
    """Claim the oldest ready message among the queues (with claim false, only name it)."""
    queues, claim = request.queues, request.claim
    while queues:
        best = oldest_head(actor, queues, batch)
        if best is None:
            break
        if not claim:
            return {"queue": best[0], "id": best[1]}
        result = actor.take(batch, best[0])
        if result is not None:
            result["queue"] = best[0]
            return result
        # take() found nothing it may hand out in that queue (its index held only stale
        # entries): it is not asked again, so the loop ends after every queue at worst.
        queues = [queue for queue in queues if queue != best[0]]
    return {"empty": True}


def watch(actor: FetchCommandActor, batch: Batch, request: Watch, sender: Request):
    """Answer {"queue": q} once one of the queues has a ready message, or {"empty": true} after
    `wait` seconds; nothing is claimed."""
    queues, wait = request.queues, request.wait
    best = oldest_head(actor, queues)
    if best is not None:
        return {"queue": best[0]}
    if wait <= 0:
        return {"empty": True}
    actor.watches.park(Watcher(sender.peer, sender.rid, time.monotonic() + wait, queues))
    actor.log.debug("fetch.watch", queue=queues[0], queues=len(queues), seconds=wait)
    return DEFERRED


class Watches:
    """The parked watches of one fetch actor; they change only through these methods."""

    def __init__(self, log) -> None:
        self.log = log
        self._parked: list[Watcher] = []

    def __bool__(self) -> bool:
        return bool(self._parked)

    def counts(self) -> dict[str, int]:
        """How many watches wait on each queue one names."""
        counted: dict[str, int] = {}
        for watcher in self._parked:
            for queue in watcher.queues:
                counted[queue] = counted.get(queue, 0) + 1
        return counted

    def park(self, watcher: Watcher) -> None:
        """Keep a watch until one of its queues has a ready message or its time is up."""
        self._parked.append(watcher)

    def serve(self, actor: FetchCommandActor) -> None:
        """Answer each watch whose queues gained a ready message or whose time is up."""
        if not self._parked:
            return
        now = time.monotonic()
        kept: list[Watcher] = []
        heads: dict[str, str | None] = {}
        for watcher in self._parked:
            try:
                best = oldest_head(actor, watcher.queues, heads=heads)
            except OSError:
                best = None  # The front claims (and meets the error) only after an answer.
            if best is not None:
                actor.reply(watcher.peer, watcher.rid, {"queue": best[0]})
            elif watcher.deadline <= now:
                actor.reply(watcher.peer, watcher.rid, {"empty": True})
            else:
                kept.append(watcher)
        self._parked = kept

    def refuse_all(self, actor: FetchCommandActor, error: Exception) -> None:
        """Answer every parked watch with the error (the root went away) and keep none."""
        for watcher in self._parked:
            actor.reply(watcher.peer, watcher.rid, error)
        self._parked = []

    def cancel(self, peer: bytes, rid: bytes) -> None:
        """Drop the watch a front gave up on (its client went away)."""
        for watcher in self._parked:
            if (watcher.peer, watcher.rid) == (peer, rid):
                self.log.debug("fetch.watch_cancelled", queue=watcher.queues[0],
                               queues=len(watcher.queues))
        self._parked = [w for w in self._parked if (w.peer, w.rid) != (peer, rid)]

    def end(self, peer: bytes) -> int:
        """Let every watch of this peer end at the next serve, as if its time were up (its
        front drains); how many."""
        ended = [w for w in self._parked if w.peer == peer]
        for watcher in ended:
            watcher.deadline = 0.0
        return len(ended)

    def nearest_deadline(self) -> float | None:
        """The monotonic time of the first watch to expire, None when none waits."""
        return min((w.deadline for w in self._parked), default=None)
