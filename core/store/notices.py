"""Notices: how a writer that no daemon hears (a Spark driver elsewhere) is noticed.

Not flushed: a notice lost in a crash is not needed, a daemon lists its folders at start.
"""

import os
import time

from mq.store.disk import Disk
from mq.store.root import Root

#: A token of notices/delay that starts so asks the mover to read again the due time of every
#: message in delay/, not only of those it has not timed: a writer moved a known one earlier.
RETIME = "retime-"
#: The start of a queue's notice file's name (Root.notice_path).
READY = "ready:"


class Notices:
    """Posting and reading notice files: a member of Store (store.notices), given the root's
    paths and its Disk."""

    def __init__(self, paths: Root, disk: Disk):
        self.paths = paths
        self.disk = disk

    def post(self, queue: str | None = None, retime: bool = False) -> bool:
        """Replace a notice file with a new token, after the messages it announces are flushed;
        False when it could not be written (a full disk: the messages are in place all the same).
        retime: the token asks for every due time in delay/ to be read again (RETIME).
        """
        path = self.paths.notice_path(queue)
        temp = self.paths.notice_temp_path()
        try:
            if not os.path.isdir(os.path.dirname(path)):
                self.disk.mkdir(os.path.dirname(path))  # A root older than notices/.
            self.disk.create(temp, ((RETIME if retime else "") + os.urandom(16).hex()).encode())
            self.disk.rename_over(temp, path)
            return True
        except OSError:
            self.disk.discard(temp)
            return False

    def sweep_temps(self, min_age: float = 3600.0) -> int:
        """Unlink temporary files of notices older than min_age seconds (a writer died between
        creating one and renaming it); return how many."""
        count, now = 0, time.time()
        try:
            with os.scandir(self.paths.folder("notices")) as it:
                for entry in it:
                    if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                        try:
                            if entry.stat().st_mtime + min_age < now:
                                self.disk.unlink(entry.path)
                                count += 1
                        except FileNotFoundError:
                            continue
        except FileNotFoundError:
            pass
        return count

    def read(self, queue: str | None = None) -> str | None:
        """The token a notice file holds now: '' when none was posted, None when it cannot be
        read now (callers take that as "no change").

        Opening the file, not stat, is what an NFS client revalidates (close-to-open).
        """
        try:
            with open(self.paths.notice_path(queue)) as f:
                return f.read()
        except FileNotFoundError:
            return ""
        except OSError:
            return None

    def posted(self) -> set[str] | None:
        """The queues that have a notice file, from one listing of notices/ (None when it
        cannot be listed now): a queue without one reads as '' without an open of its own."""
        try:
            names = os.listdir(self.paths.folder("notices"))
        except FileNotFoundError:
            return set()
        except OSError:
            return None
        return {name[len(READY):] for name in names if name.startswith(READY)}
