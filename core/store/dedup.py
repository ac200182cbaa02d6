"""De-duplication keys: symlinks in dedup/{queue}/ named by the key's digest, pointing at the id.

A key answers "duplicate" only for a message whose add was acknowledged: one still in new/
is an add in progress or the leftover of a crashed one (docs/DELIVERY.md).
"""

import os
import time

from mq.errors import Unavailable
from mq.store.changes import Changes, tracked
from mq.store.disk import Disk
from mq.store.message import dedup_digest
from mq.store.root import Root


class DedupKeys:
    """Recording, looking up and expiring de-duplication keys: a member of Store
    (store.dedup), given the root's paths and its Disk."""

    def __init__(self, paths: Root, disk: Disk):
        self.paths = paths
        self.disk = disk

    def path(self, queue: str, key: str) -> str:
        """The symlink recording a de-duplication key."""
        return self.paths.dedup_digest_path(queue, dedup_digest(key))

    def lookup(self, queue: str, key: str, window: float, now: float) -> str | None:
        """The id recorded for a key within the window, or None."""
        path = self.path(queue, key)
        try:
            if os.lstat(path).st_mtime + window < now:
                return None
            return os.readlink(path)
        except FileNotFoundError:
            return None

    def pending(self, queue: str, message_id: str, changes: Changes | None = None) -> bool:
        """True when a key's message is still in new/: its add has not been acknowledged.

        When it is not, the folders its add's renames and key entered are recorded on
        `changes`: a reply naming it waits for their flush, however another actor's flush went.
        """
        if os.path.exists(self.paths.new_path(queue, message_id)):
            return True
        tracked(changes).entered(self.paths.queue_dir(queue), self.paths.folder("delay"),
                                 self.paths.dedup_dir(queue))
        return False

    def record(self, queue: str, key: str, message_id: str, window: float,
                     now: float, changes: Changes | None = None) -> str | None:
        """Record key -> id atomically; return None when recorded, else the id recorded first."""
        # Recorded first: a failed attempt may have left a new or expired entry behind.
        tracked(changes).entered(self.paths.dedup_dir(queue))
        return self.record_digest(queue, dedup_digest(key), message_id, window, now)

    def record_digest(self, queue: str, digest: str, message_id: str, window: float,
                            now: float) -> str | None:
        """record for a key known only by its digest (a staged file's 'dk' header)."""
        path = self.paths.dedup_digest_path(queue, digest)
        if not os.path.isdir(self.paths.dedup_dir(queue)):
            self.disk.mkdir(self.paths.dedup_dir(queue))
        for _ in range(3):
            try:
                self.disk.symlink(message_id, path)
                return None
            except FileExistsError:
                try:
                    if os.lstat(path).st_mtime + window >= now:
                        return os.readlink(path)
                    self.disk.unlink(path)  # Expired: the key may be used again.
                except FileNotFoundError:
                    pass
        raise Unavailable("de-duplication key is contended; retry")

    def forget(self, queue: str, digest: str, message_id: str,
               changes: Changes | None = None) -> None:
        """Drop a key record that points at a message which was never acknowledged."""
        path = self.paths.dedup_digest_path(queue, digest)
        try:
            if os.readlink(path) == message_id:
                self.disk.unlink(path)
                tracked(changes).changed(path)
        except OSError:
            pass

    def sweep(self, window_of) -> int:
        """Unlink key records older than their queue's window (window_of(queue) seconds)."""
        count, now = 0, time.time()
        for queue in os.listdir(self.paths.folder("dedup")):
            window = window_of(queue)
            try:
                with os.scandir(self.paths.dedup_dir(queue)) as it:
                    for entry in it:
                        try:
                            if entry.stat(follow_symlinks=False).st_mtime + window < now:
                                self.disk.unlink(entry.path)
                                count += 1
                        except FileNotFoundError:
                            continue
            except FileNotFoundError:
                continue
        return count
