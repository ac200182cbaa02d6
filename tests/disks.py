"""Disks a test hands to a Store: one that fails chosen operations with a chosen errno.

The files are real; only the failure is chosen, the way a full or failing device would.
"""

import errno
import os

from mq.store import Disk


class FailingDisk(Disk):
    """A real Disk whose chosen operations raise OSError(errno) while `armed`.

    Keywords name the operation and its errno: write (after the file is created), rename,
    symlink, set_mtime, flush_data, flush (the flush after renames), replace, mkdir.
    A count in `after` lets that many calls of an operation succeed first.
    """

    def __init__(self, sync: str = "fs", after: dict | None = None, **failures):
        super().__init__(sync)
        self.failures = failures
        self.after = dict(after or {})
        self.armed = True
        self.calls: dict[str, int] = {}

    def fail(self, op: str) -> None:
        """Raise the errno chosen for op, if armed and its free calls are used up."""
        self.calls[op] = self.calls.get(op, 0) + 1
        if self.armed and op in self.failures and self.calls[op] > self.after.get(op, 0):
            code = self.failures[op]
            raise OSError(code, f"injected: {os.strerror(code)}")

    def write_whole(self, fd, data, mtime, cut=False):
        """Fail after the file is created (or a spare taken), as a full disk does."""
        self.fail("write")
        super().write_whole(fd, data, mtime, cut)

    def rename(self, source, target):
        """Fail a rename."""
        self.fail("rename")
        super().rename(source, target)

    def symlink(self, target, path):
        """Fail recording a key."""
        self.fail("symlink")
        super().symlink(target, path)

    def set_mtime(self, fd, when):
        """Fail setting a due time."""
        self.fail("set_mtime")
        super().set_mtime(fd, when)

    def flush_data(self, anchor, dirs=()):
        """Fail the flush before renames."""
        self.fail("flush_data")
        super().flush_data(anchor, dirs)

    def flush(self, anchor, dirs):
        """Fail the flush after renames."""
        self.fail("flush")
        super().flush(anchor, dirs)

    def replace(self, path, data):
        """Fail replacing a small file."""
        self.fail("replace")
        super().replace(path, data)

    def mkdir(self, path):
        """Fail creating a folder."""
        self.fail("mkdir")
        return super().mkdir(path)


__all__ = ["FailingDisk", "errno"]
