"""The supervisor's watch over the root's file system (docs/OPERATIONS.md, "The root's file
system").

A root on a network or FUSE file system can go away under a running daemon: the FUSE process
killed (every path fails with ENOTCONN) or the file system unmounted (the root's path then
leads to the empty mount-point folder, where an add fails and a queue is "not found"). The
supervisor alone looks at the file system, a few times a second (two stats, core/store/root.py
RootWatch), and tells every child through the shared heartbeat mapping (supervisor/heartbeat.py):
a child learns it with a load from memory, so no request pays a system call for it, every
child hears the same verdict at once, and one process, not one per actor, stats a file system
that may be slow to answer. The actors then refuse what needs the root with 503 and
Retry-After (actors/base.py), and resume when the supervisor sees the root back.
"""

import time

from mq import logs
from mq.store.root import RootWatch
from mq.supervisor.heartbeat import Slot, share_root_state

#: Seconds between two checks of the root: the longest an outage goes unnoticed by the actors
#: (an actor that meets one earlier, through an error, checks the root itself).
ROOT_CHECK_SECONDS = 0.2


class RootState:
    """Whether the root is there, as the supervisor last saw it; published to the children."""

    def __init__(self, root: str, slot: Slot, root_id: str = "", missing: str = ""):
        """root_id: the root's ID, when known (a root with another is away); missing: why the
        path is no root at start (it is then away from the start)."""
        self.root = root
        self.watch = RootWatch(root, root_id)
        self.slot = slot
        self.lost_since = 0.0  # Unix time the root was found gone; 0.0 while it is there
        self.error = ""
        self.last_check = float("-inf")
        slot.stamp(0.0)
        # Set before the first fork: every child inherits the module's reference to the slot.
        share_root_state(slot)
        if missing:
            self.set_missing(missing)

    def set_missing(self, error: str) -> None:
        """The path is no root (yet): away until a check finds one, a second from now at the
        earliest (the start's preparation that found it unusable is not tried again at once)."""
        self.lost_since = self.lost_since or time.time()
        self.error = error
        self.slot.stamp(self.lost_since)
        self.last_check = time.monotonic() + 1.0 - ROOT_CHECK_SECONDS

    @property
    def lost(self) -> bool:
        """Whether the root is away now."""
        return bool(self.lost_since)

    def poll(self, now: float) -> bool:
        """Check the root when ROOT_CHECK_SECONDS passed since the last check (now is
        monotonic); log and publish a change. True when the state changed at this check."""
        if now - self.last_check < ROOT_CHECK_SECONDS:
            return False
        self.last_check = now
        error = self.watch.check()
        changed = False
        if error and not self.lost:
            self.lost_since, self.error = time.time(), error
            self.slot.stamp(self.lost_since)
            logs.get().error("root.lost", root=self.root, error=error,
                             action="refusing what needs the root with 503 until it is back")
            changed = True
        elif not error and self.lost:
            lost_s = round(time.time() - self.lost_since, 3)
            self.lost_since, self.error = 0.0, ""
            self.slot.stamp(0.0)
            logs.get().info("root.back", root=self.root, lost_s=lost_s)
            changed = True
        elif error:
            self.error = error
        return changed

    def health(self) -> dict:
        """The "root" entry of health.json."""
        return {"state": "lost" if self.lost else "ok", "lost_since": self.lost_since or None,
                "error": self.error or None}
