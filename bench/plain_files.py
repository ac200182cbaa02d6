"""The file calls of mq's actors, made by plain Python: the floor an actor's CPU is held to.

bench/actor_cpu.py times each actor op and then this class making the same system calls on
the same disk, in the same thread: per batch of adds the save actor's (an id's random bits,
create, write and close each file in new/, rename each into its queue, the batch's stats of
props/, its listing of spare/ and one syncfs); per batch of fetches the fetch actor's (open,
fstat, read, rename into delay/, set the due time and close each, the stats and a syncfs);
per batch of acks (a rename into remove/ and a stat each, a syncfs); and the reaper's pass
over remove/ (two listings 2 s apart, a syncfs, then a stat and a rename into spare/ each).
`strace -c` of both sides shows the same calls (bench/RESULTS.md, "CPU per message against
plain file calls").
"""

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = _libc.renameat2
_renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint)
_AT_FDCWD, _RENAME_NOREPLACE = -100, 1
BODY = b"MQ" + b"\0" * 195  # The size of a 100-byte message's file with its header.


def rename_noreplace(source: str, target: str) -> None:
    """renameat2(RENAME_NOREPLACE), as mq's checked rename makes it."""
    if _renameat2(_AT_FDCWD, source.encode(), _AT_FDCWD, target.encode(), _RENAME_NOREPLACE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), source)


class PlainFiles:
    """A folder laid out as an mq root, worked on one system call after another."""

    def __init__(self, base: str, queue: str = "hot"):
        self.root = os.path.join(base, "plain")
        for name in ("new", "queues", "delay", "remove", "spare", "props"):
            os.makedirs(os.path.join(self.root, name))
        self.queue = queue
        self.queue_dir = os.path.join(self.root, "queues", queue)
        os.mkdir(self.queue_dir)
        self.number = 0

    def _batch_checks(self) -> None:
        """The stats of a batch: the default and the queue's property files (absent here)."""
        props = os.path.join(self.root, "props")
        for name in ("_defaults.json", f"{self.queue}.json"):
            os.stat(props)
            try:
                os.stat(os.path.join(props, name))
            except FileNotFoundError:
                pass

    def _syncfs(self) -> None:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _libc.syncfs(fd)
        finally:
            os.close(fd)

    def add(self, count: int) -> list[str]:
        """A batch of adds; the names stored."""
        self._batch_checks()
        spare = os.path.join(self.root, "spare")
        os.lstat(spare)
        os.listdir(spare)
        names = []
        for _ in range(count):
            os.urandom(8)
            self.number += 1
            name = f"{self.number:016x}-7000-8000-000000000000"
            fd = os.open(os.path.join(self.root, "new", f"{self.queue}:{name}"),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            os.write(fd, BODY)
            os.close(fd)
            names.append(name)
        for name in names:
            rename_noreplace(os.path.join(self.root, "new", f"{self.queue}:{name}"),
                             os.path.join(self.queue_dir, name))
        self._syncfs()
        return names

    def fetch(self, names: list[str]) -> None:
        """A batch of fetches of these names: each read and claimed into delay/."""
        self._batch_checks()
        for name in names:
            path = os.path.join(self.queue_dir, name)
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            os.fstat(fd)
            os.read(fd, len(BODY) + 1)
            rename_noreplace(path, os.path.join(self.root, "delay", f"{self.queue}:{name}.1"))
            os.utime(fd, ns=(1, 1))
            os.close(fd)
        self._syncfs()

    def ack(self, names: list[str]) -> None:
        """A batch of acks of claimed names: each renamed into remove/."""
        for name in names:
            target = os.path.join(self.root, "remove", f"{self.queue}:{name}")
            rename_noreplace(os.path.join(self.root, "delay", f"{self.queue}:{name}.1"), target)
            os.stat(target)
        self._syncfs()

    def reap_listing(self) -> None:
        """The reaper's first look at remove/: a listing."""
        with os.scandir(os.path.join(self.root, "remove")) as it:
            for entry in it:
                entry.is_dir(follow_symlinks=False)

    def reap(self) -> int:
        """The reaper's pass 2 s later: list, syncfs, stat and keep each as a spare."""
        remove = os.path.join(self.root, "remove")
        with os.scandir(remove) as it:
            files = [entry for entry in it if not entry.is_dir(follow_symlinks=False)]
        os.listdir(os.path.join(self.root, "spare"))
        self._syncfs()
        for entry in files:
            entry.stat(follow_symlinks=False)
            entry.is_file(follow_symlinks=False)
            os.rename(entry.path, os.path.join(self.root, "spare", entry.name))
        return len(files)
