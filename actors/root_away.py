"""What an actor does while its root is away (docs/OPERATIONS.md, "The root's file system").

The supervisor checks the root five times a second and tells every child through shared
memory (mq.supervisor.heartbeat). Meanwhile an actor touches nothing of the root: it refuses
what needs it with 503, serves only what reads its memory, skips its chores, and on the way
back re-lists and rescans as at a start, since the notifications were dropped. An error that
the root's loss may have caused before the supervisor saw it is checked against the root
itself.
"""

from collections.abc import Callable

import zmq

from mq.actors.batch import Request
from mq.errors import MqError, Unavailable
from mq.operations import Cancel, Operation, Relist, Rescan, Stats
from mq.store import Store
from mq.store.root import RootWatch
from mq.supervisor import heartbeat

#: Ops served while the root is away: they read the actor's memory only.
ROOT_FREE_OPS = frozenset({Stats.op, Cancel.op})
#: Error kinds a vanished root produces in the moment before the supervisor sees it (a queue
#: "not found" in the empty mount point, ENOENT on new/): checked against the root then.
ROOT_SUSPECT_KINDS = frozenset({"not_found", "internal", "storage", "unavailable"})


class RootAway:
    """An actor's conduct while its root is away, mixed into every actor (actors/base.py,
    `Actor`): it answers refusals on the actor's socket and, on the way back, tells the fetch
    actors and the mover through its links (actors/links.py)."""

    store: Store
    root_watch: RootWatch
    root_was_lost: bool
    fetchers: list
    mover: zmq.Socket | None
    send: Callable[[zmq.Socket | None, Operation], None]
    reply: Callable[[bytes, bytes, object], None]

    def root_lost(self) -> bool:
        """Whether the supervisor says the root is away (a load from shared memory); on the
        way back, re-list and rescan as at a start: notifications were dropped meanwhile."""
        lost = bool(heartbeat.root_lost_since())
        if self.root_was_lost and not lost:
            for sock in self.fetchers:
                self.send(sock, Relist())
            self.send(self.mover, Rescan())
        self.root_was_lost = lost
        return lost

    def root_away(self) -> None:
        """Instead of tick() while the root is away (the fetch actor answers its long polls)."""

    def root_refusal(self) -> Unavailable:
        """The answer to an op that needs the root while it is away."""
        return Unavailable(f"the root {self.store.root} is not available (its file system is "
                           "not mounted); retry later")

    def recheck_root(self, results: list) -> None:
        """Replace errors the root's loss may have caused in the moment before the supervisor
        saw it (a queue "not found" in the empty mount point) by the refusal: the root checked
        on the file system itself (one stat of FORMAT), on such errors only. The supervisor's
        last verdict can be 0.2 s old, too old to tell a missing queue from a missing root."""
        if any(isinstance(r, MqError) and r.kind in ROOT_SUSPECT_KINDS for r in results):
            if self.root_watch.check():
                for pos, result in enumerate(results):
                    if isinstance(result, MqError) and result.kind in ROOT_SUSPECT_KINDS:
                        results[pos] = self.root_refusal()

    def serve_while_away(self, requests: list[Request]) -> list[Request]:
        """The requests to serve while the root is away: those that read memory only; the
        others that want an answer are refused now."""
        # Nothing touches the root meanwhile: notifications are dropped (re-listed when it
        # is back), requests refused unless they read memory only.
        for request in requests:
            if request.rid and request.op not in ROOT_FREE_OPS:
                self.reply(request.peer, request.rid, self.root_refusal())
        # A front's cancel is a notification (no request id) that reads memory only.
        return [r for r in requests if r.op in ROOT_FREE_OPS]
