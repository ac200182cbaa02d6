"""De-duplication keys: symlinks in dedup/{queue}/ named by the key's digest, pointing at the id.

A key answers "duplicate" only for a message whose add was acknowledged: one still in new/
is an add in progress or the leftover of a crashed one (docs/DELIVERY.md).
"""

import os
import time

from mq.errors import Unavailable
from mq.store.changes import Changes, tracked
from mq.store.message import dedup_digest


class DedupKeys:
    """Recording, looking up and expiring de-duplication keys (a part of Store)."""

    def dedup_path(self, queue: str, key: str) -> str:
        """The symlink recording a de-duplication key."""
        return self.dedup_digest_path(queue, dedup_digest(key))

    def dedup_lookup(self, queue: str, key: str, window: float, now: float) -> str | None:
        """The id recorded for a key within the window, or None."""
        path = self.dedup_path(queue, key)
        try:
            if os.lstat(path).st_mtime + window < now:
                return None
            return os.readlink(path)
        except FileNotFoundError:
            return None

    def dedup_pending(self, queue: str, message_id: str, changes: Changes | None = None) -> bool:
        """True when a key's message is still in new/: its add has not been acknowledged.

        When it is not, the folders its add's renames and key entered are recorded on
        `changes`: a reply naming it waits for their flush, however another actor's flush went.
        """
        if os.path.exists(self.new_path(queue, message_id)):
            return True
        tracked(changes).entered(self.queue_dir(queue), self.folder("delay"), self.dedup_dir(queue))
        return False

    def dedup_record(self, queue: str, key: str, message_id: str, window: float,
                     now: float, changes: Changes | None = None) -> str | None:
        """Record key -> id atomically; return None when recorded, else the id recorded first."""
        # Recorded first: a failed attempt may have left a new or expired entry behind.
        tracked(changes).entered(self.dedup_dir(queue))
        return self.dedup_record_digest(queue, dedup_digest(key), message_id, window, now)

    def dedup_record_digest(self, queue: str, digest: str, message_id: str, window: float,
                            now: float) -> str | None:
        """dedup_record for a key known only by its digest (a staged file's 'dk' header)."""
        path = self.dedup_digest_path(queue, digest)
        if not os.path.isdir(self.dedup_dir(queue)):
            self.disk.mkdir(self.dedup_dir(queue))
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

    def dedup_forget(self, queue: str, digest: str, message_id: str) -> None:
        """Drop a key record that points at a message which was never acknowledged."""
        path = self.dedup_digest_path(queue, digest)
        try:
            if os.readlink(path) == message_id:
                self.disk.unlink(path)
        except OSError:
            pass

    def dedup_sweep(self, window_of) -> int:
        """Unlink key records older than their queue's window (window_of(queue) seconds)."""
        count, now = 0, time.time()
        for queue in os.listdir(self.folder("dedup")):
            window = window_of(queue)
            try:
                with os.scandir(self.dedup_dir(queue)) as it:
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
