"""GroupFlush: one syncfs(2) covers the pending changes of every actor of a daemon.

A syncfs started after an actor's writes makes them durable, whoever started it. So the
actors of one daemon share a small file in their run folder holding three counters: syncfs
calls started, the start number of the last one completed, and flushes found already covered.
An actor done writing notes the started count S0 (without a lock: it only grows), takes the
file's lock and, if the last completed syncfs started after S0, is done; else it starts one
itself, holding the lock until it returns. While one actor's syncfs runs, the others finishing
their batches wait on the lock, and the first to get it next flushes for all of them: under
contention one syncfs covers many batches, instead of one each (docs/ARCHITECTURE.md,
"Group commit").

The counters live in a shared memory map of the file, read and written through a memoryview
of 8-byte words: an aligned 8-byte load or store is one instruction on the machines Python runs
on, so a reader never sees half a counter. (Not struct.pack_into: it zeroes the bytes before
writing them, and an actor reading STARTED in between took 0 for it, and a syncfs done before
its writes for one after them.)
"""

import fcntl
import mmap
import os
import struct

#: started, completed (start number of the last syncfs that returned), covered.
_LAYOUT = struct.Struct("=QQQ")
_STARTED, _COMPLETED, _COVERED = 0, 8, 16


def flush_file(run_dir: str) -> str:
    """The flush counters' file of the daemon whose sockets are in run_dir."""
    return os.path.join(run_dir, "flush")


class GroupFlush:
    """The shared flush counters of one daemon's actors, in the file at path."""

    def __init__(self, path: str):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(self.fd).st_size < _LAYOUT.size:
                # Several actors may extend it at once: each to the same size, all zeros.
                os.ftruncate(self.fd, _LAYOUT.size)
            self.map = mmap.mmap(self.fd, _LAYOUT.size)
        except BaseException:
            os.close(self.fd)
            raise
        self.words = memoryview(self.map).cast("Q")

    def _get(self, offset: int) -> int:
        return self.words[offset // 8]

    def _set(self, offset: int, value: int) -> None:
        self.words[offset // 8] = value

    def sync(self, syncfs) -> bool:
        """Make every change this process made before the call durable: by a syncfs another
        actor started after them, or by calling syncfs() here. True when it called syncfs."""
        before = self._get(_STARTED)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            if self._get(_COMPLETED) > before:
                self._set(_COVERED, self._get(_COVERED) + 1)
                return False
            number = self._get(_STARTED) + 1
            self._set(_STARTED, number)
            syncfs()  # An error leaves COMPLETED as it was: nobody counts this one as done.
            self._set(_COMPLETED, number)
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap and close the file."""
        self.words.release()  # The map refuses to close while a view of it is held.
        self.map.close()
        os.close(self.fd)


def read_counts(path: str) -> dict:
    """The counters of a daemon's flush file, read without joining it: syncfs calls started,
    completed (start number), flushes covered (bench/group_flush.py counts the syncfs calls)."""
    with open(path, "rb") as f:
        data = f.read(_LAYOUT.size)
    started, completed, covered = _LAYOUT.unpack(data.ljust(_LAYOUT.size, b"\0"))
    return {"started": started, "completed": completed, "covered": covered}
