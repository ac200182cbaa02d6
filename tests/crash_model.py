"""A recording disk and a crash model: what a power cut at any point of a recording leaves.

In the spirit of ALICE (Pillai et al., OSDI '14). A RecordingDisk is a real mq.store.Disk: every
change happens on the working root as usual, and every system call the Disk's own code makes
is also written to a log (`Recording`). From the log, `durable_root_at` / `crash_states` build
the root a power cut after the first k events would leave, and write it into a fresh folder,
where the tests run the recovery a restart runs and check what survived.

Why the system calls and not the Disk methods: a test must fail when a flush is left out of
a Disk method (say the fsync in Disk.set_mtime), so the log holds the fsync(2), syncfs(2) and
folder fsyncs that really ran, not what a method was meant to do. The calls are seen through a
stand-in for the `os` module of mq.store.disk (in place only while a recording runs), which
logs only while a RecordingDisk method is running on the calling thread (`_gate`), and passes
everything else straight to os. syncfs is
seen by wrapping the Disk's libc function. Disk.remove_tree goes through shutil, so it is logged
as one event by its method.

The model (all of it deliberately pessimistic):
- Events are entry changes (create with a new inode, mkdir, symlink, unlink, rename, rmtree),
  inode changes (data written at an offset, length cut, mtime set) and flushes (syncfs, fsync of a file, fsync of a
  folder). A flush counts once its call returned; a power cut after event k keeps only the
  flushes among the first k events.
- syncfs makes every earlier change durable. fsync of a file makes its data and mtime durable,
  never its name. fsync of a folder makes the earlier entry changes in that folder durable.
- A rename is durable only when both its folders were fsynced after it (or a syncfs came), and
  then whole: the old name gone and the new one there. POSIX promises nothing at all for a
  rename; needing both sides flushed is the strictest reading the per-file recipe
  (--sync=file) can rely on. The state where both names survive is not modelled.
- An entry change whose parent folder is missing from the durable tree is lost (unreachable).
- A file's content is its written data when that data is durable, else empty; its mtime is the
  last durable one (or the one it had when created).
- Leaks: a journalling file system may also write metadata nobody flushed, in the order it was
  changed, at any time (a periodic journal commit). So `crash_states` also gives, for each cut,
  the states where the first p metadata changes (entries and mtimes) reached the disk anyway,
  while unflushed data did not. This is what exposes a missing flush *between* two changes
  (data before rename, message before its de-duplication key): without leaks, a later flush
  would cover both and the missing one would not show. With `leak_data` set on a recording,
  each such state also comes with every unflushed data write on disk, whatever metadata
  leaked (writeback writes a file's pages on its own schedule): what a file written again in
  place (a spare) needs.

The starting point is a snapshot taken when recording began: every file, folder and link of
the root with its bytes and mtime, all durable (the tests flush their set-up first).
"""

import contextlib
import functools
import os
import stat
import threading
from dataclasses import dataclass, field

import mq.store.disk as disk_module
import mq.store.renames as renames
from mq.store import Disk

#: Entry changes: they change which names exist.
ENTRY_KINDS = ("create", "mkdir", "symlink", "unlink", "rename", "rmtree")
#: Changes of a file's bytes.
DATA_KINDS = ("write", "truncate")
#: Flushes.
FLUSH_KINDS = ("syncfs", "fsync", "fsync_dir")

_gate = threading.local()


@dataclass(frozen=True)
class Event:
    """One logged change or flush. Paths are relative to the root ('' is the root itself)."""

    kind: str
    path: str = ""
    target: str = ""        # rename: the new path; symlink: what the link points at
    inode: int | None = None
    data: bytes = b""       # write: the bytes written
    mtime_ns: int | None = None  # write, truncate, mtime, create: the file's mtime afterwards
    offset: int = 0         # write: where in the file
    length: int = 0         # truncate: the file's new length

    def folders(self) -> tuple[str, ...]:
        """The folders whose fsync makes this entry change durable."""
        if self.kind == "rename":
            return (parent(self.path), parent(self.target))
        return (parent(self.path),)

    def __str__(self) -> str:
        if self.kind == "rename":
            return f"rename {self.path} -> {self.target}"
        if self.kind == "symlink":
            return f"symlink {self.path} -> {self.target}"
        if self.kind == "write":
            return f"write inode {self.inode} ({len(self.data)} bytes at {self.offset})"
        if self.kind == "truncate":
            return f"truncate inode {self.inode} to {self.length} bytes"
        if self.kind == "mtime":
            return f"mtime inode {self.inode} = {self.mtime_ns}"
        if self.kind == "fsync":
            return f"fsync inode {self.inode}"
        if self.kind == "create":
            return f"create {self.path} (inode {self.inode})"
        if self.kind == "syncfs":
            return "syncfs"
        return f"{self.kind} {self.path}"


def parent(path: str) -> str:
    """The folder holding a relative path ('' for the root)."""
    return path.rpartition("/")[0]


def in_subtree(path: str, top: str) -> bool:
    """True when path is top or below it."""
    return path == top or path.startswith(top + "/")


@dataclass
class Snapshot:
    """A root as it was when recording began: tree (path -> node) and the files' inodes.

    A node is ("dir",), ("file", inode) or ("link", target); inodes maps an inode to its
    (data, mtime_ns).
    """

    tree: dict
    inodes: dict


@contextlib.contextmanager
def _logged():
    """The RecordingDisk logging this thread's calls (None when none is), held locked: a call
    and its log entry happen together, so concurrent callers (a commit's publishing threads)
    log in the order their calls took effect."""
    disk = getattr(_gate, "disk", None)
    if disk is None:
        yield None
    else:
        with disk._lock:
            yield disk


class _RecordingOs:
    """Stands in for `os` inside mq.store.disk: logs the calls a RecordingDisk method makes."""

    def __getattr__(self, name):
        return getattr(os, name)

    def open(self, path, flags, mode=0o777, *, dir_fd=None):
        with _logged() as disk:
            creating = disk is not None and flags & os.O_CREAT and not os.path.lexists(path)
            fd = os.open(path, flags, mode, dir_fd=dir_fd)
            if creating:
                disk._created(path, fd)
            return fd

    def write(self, fd, data):
        with _logged() as disk:
            offset = os.lseek(fd, 0, os.SEEK_CUR)
            written = os.write(fd, data)
            if disk is not None:
                disk._wrote(fd, bytes(memoryview(data)[:written]), offset)
            return written

    def ftruncate(self, fd, length):
        with _logged() as disk:
            os.ftruncate(fd, length)
            if disk is not None:
                disk._truncated(fd, length)

    def utime(self, path, *args, **kwargs):
        with _logged() as disk:
            os.utime(path, *args, **kwargs)
            if disk is not None:
                disk._set_mtime(path)

    def fsync(self, fd):
        with _logged() as disk:
            os.fsync(fd)
            if disk is not None:
                disk._fsynced(fd)

    def rename(self, source, target, *args, **kwargs):
        with _logged() as disk:
            os.rename(source, target, *args, **kwargs)
            if disk is not None:
                disk._renamed(source, target)

    replace = rename  # os.replace is rename(2) too.

    def rename_noreplace(self, source, target):
        with _logged() as disk:
            renames.rename_noreplace(source, target)
            if disk is not None:
                disk._renamed(source, target)

    def unlink(self, path, *args, **kwargs):
        with _logged() as disk:
            os.unlink(path, *args, **kwargs)
            if disk is not None:
                disk._log_entry("unlink", path)

    remove = unlink

    def symlink(self, target, path, *args, **kwargs):
        with _logged() as disk:
            os.symlink(target, path, *args, **kwargs)
            if disk is not None:
                disk._log_entry("symlink", path, target=target)

    def mkdir(self, path, *args, **kwargs):
        with _logged() as disk:
            os.mkdir(path, *args, **kwargs)
            if disk is not None:
                disk._log_entry("mkdir", path)


_recordings = 0
_recordings_lock = threading.Lock()


def _route_disk_calls(recording: bool) -> None:
    """Route mq.store.disk's calls to os through the recorder while any recording runs, and
    straight to os again once none does."""
    global _recordings
    with _recordings_lock:
        _recordings += 1 if recording else -1
        disk_module.os = _RecordingOs() if _recordings else os
        # renameat2 is reached through ctypes, not os: routed the same way.
        disk_module.rename_noreplace = disk_module.os.rename_noreplace if _recordings \
            else renames.rename_noreplace


def _while_recording(method):
    """Wrap a Disk method so the os calls it makes on this thread are logged."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        outer = getattr(_gate, "disk", None)
        _gate.disk = self if self.recording is not None else outer
        try:
            return method(self, *args, **kwargs)
        finally:
            _gate.disk = outer

    return wrapper


class RecordingDisk(Disk):
    """A real Disk that, once start_recording() was called, logs every change and flush.

    Before that it is an ordinary Disk (set-up goes through it unlogged). mark(name, value)
    notes that a reply went out after the events logged so far: a cut at or after that point
    must keep what the reply acknowledged.
    """

    def __init__(self, sync: str = "fs", libc=None):
        super().__init__(sync, libc)
        self.recording: Recording | None = None
        self._lock = threading.RLock()
        self._inodes: dict[int, int] = {}  # st_ino -> model inode, for the files we know
        self._next_inode = 0
        real_syncfs = self._syncfs
        if real_syncfs is not None:
            def syncfs(fd):
                with self._lock:
                    result = real_syncfs(fd)
                    if result == 0 and self.recording is not None:
                        self._log(Event("syncfs"))
                    return result
            self._syncfs = syncfs

    def start_recording(self, root: str) -> "Recording":
        """Snapshot the root (taken as durable) and log every change made from now on."""
        root = os.path.realpath(root)
        snapshot = Snapshot({}, {})
        for path, node in scan(root).items():
            if node[0] == "file":
                _, data, mtime_ns, st_ino = node
                inode = self._inode_of(st_ino, fresh=True)
                snapshot.tree[path] = ("file", inode)
                snapshot.inodes[inode] = (data, mtime_ns)
            else:
                snapshot.tree[path] = node
        self.recording = Recording(root, snapshot, [], [])
        _route_disk_calls(True)
        return self.recording

    def stop_recording(self) -> "Recording":
        """Stop logging; return the recording."""
        recording, self.recording = self.recording, None
        if recording is not None:
            _route_disk_calls(False)
        return recording

    def mark(self, name, value=None) -> None:
        """Note that a reply (name, value) went out after every event logged so far."""
        self.recording.marks.append((len(self.recording.events), name, value))

    def remove_tree(self, path: str) -> None:
        """Remove a folder whole; logged as one rmtree (shutil's calls are not seen)."""
        with self._lock:
            super().remove_tree(path)
            if self.recording is not None:
                self._log_entry("rmtree", path)

    # -- what the stand-in os reports ------------------------------------------------------

    def _rel(self, path, resolved: bool = False) -> str | None:
        """path relative to the root, None when outside it. Only the folders are resolved,
        not the last part, unless the whole path already is (resolved)."""
        path = os.path.abspath(os.fsdecode(path))
        full = path if resolved else \
            os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        root = self.recording.root
        if full == root:
            return ""
        return full[len(root) + 1:] if full.startswith(root + "/") else None

    def _inode_of(self, st_ino: int, fresh: bool = False) -> int:
        with self._lock:
            if fresh or st_ino not in self._inodes:
                self._next_inode += 1
                self._inodes[st_ino] = self._next_inode
            return self._inodes[st_ino]

    def _log(self, event: Event) -> None:
        with self._lock:
            self.recording.events.append(event)

    def _log_entry(self, kind: str, path, **fields) -> None:
        rel = self._rel(path)
        if rel is not None:
            self._log(Event(kind, rel, **fields))

    def _created(self, path, fd: int) -> None:
        rel = self._rel(path)
        if rel is not None:
            info = os.fstat(fd)
            self._log(Event("create", rel, inode=self._inode_of(info.st_ino, fresh=True),
                            mtime_ns=info.st_mtime_ns))

    def _wrote(self, fd: int, data: bytes, offset: int) -> None:
        info = os.fstat(fd)
        self._log(Event("write", inode=self._inode_of(info.st_ino), data=data,
                        mtime_ns=info.st_mtime_ns, offset=offset))

    def _truncated(self, fd: int, length: int) -> None:
        info = os.fstat(fd)
        self._log(Event("truncate", inode=self._inode_of(info.st_ino), length=length,
                        mtime_ns=info.st_mtime_ns))

    def _set_mtime(self, path) -> None:
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode):
            self._log(Event("mtime", inode=self._inode_of(info.st_ino), mtime_ns=info.st_mtime_ns))

    def _fsynced(self, fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            rel = self._rel(os.readlink(f"/proc/self/fd/{fd}"), resolved=True)
            if rel is not None:
                self._log(Event("fsync_dir", rel))
        else:
            self._log(Event("fsync", inode=self._inode_of(info.st_ino)))

    def _renamed(self, source, target) -> None:
        rel_source, rel_target = self._rel(source), self._rel(target)
        if rel_source is None or rel_target is None:
            return
        info = os.lstat(target)
        inode = self._inode_of(info.st_ino) if stat.S_ISREG(info.st_mode) else None
        self._log(Event("rename", rel_source, target=rel_target, inode=inode))


for _name, _method in vars(Disk).items():
    if callable(_method) and not _name.startswith("_") and _name not in vars(RecordingDisk):
        setattr(RecordingDisk, _name, _while_recording(_method))
RecordingDisk.remove_tree = _while_recording(RecordingDisk.remove_tree)


@dataclass
class CrashState:
    """The durable tree and inodes a power cut leaves: after `cut` events, with the first
    `leaked` events' unflushed metadata on disk all the same."""

    cut: int
    leaked: int
    tree: dict
    inodes: dict
    ghosts: list = field(default_factory=list)  # durable changes lost for want of a parent
    data_leaked: bool = False  # every unflushed data write on disk too

    def signature(self):
        """A hashable value equal for equal on-disk states."""
        files = []
        for path, node in sorted(self.tree.items()):
            if node[0] == "file":
                files.append((path, *self.inodes[node[1]]))
            else:
                files.append((path, *node))
        return tuple(files)

    def materialize(self, target: str) -> None:
        """Write this state into target, a folder that must not exist."""
        for path, node in sorted(self.tree.items()):
            full = os.path.join(target, path) if path else target
            if node[0] == "dir":
                os.mkdir(full)
            elif node[0] == "link":
                os.symlink(node[1], full)
        for path, node in self.tree.items():
            if node[0] == "file":
                data, mtime_ns = self.inodes[node[1]]
                full = os.path.join(target, path)
                with open(full, "wb") as f:
                    f.write(data)
                os.utime(full, ns=(mtime_ns, mtime_ns))


@dataclass
class Recording:
    """The log of one recording: the snapshot it started from, its events and reply marks."""

    root: str
    snapshot: Snapshot
    events: list
    marks: list  # (events logged before the reply, name, value)
    leak_data: bool = False  # unflushed data writes may be on disk too (module docstring)

    def covered_at(self) -> list[int]:
        """For each event, the index of the first flush that makes it durable (len: never)."""
        cached = getattr(self, "_covered", None)
        if cached is not None and len(cached) == len(self.events):
            return cached
        self._covered = self._coverage()
        return self._covered

    def _coverage(self) -> list[int]:
        n = len(self.events)
        never = n
        next_syncfs = [never] * (n + 1)
        for i in range(n - 1, -1, -1):
            next_syncfs[i] = i if self.events[i].kind == "syncfs" else next_syncfs[i + 1]
        dir_fsyncs: dict[str, list[int]] = {}
        inode_fsyncs: dict[int, list[int]] = {}
        for i, event in enumerate(self.events):
            if event.kind == "fsync_dir":
                dir_fsyncs.setdefault(event.path, []).append(i)
            elif event.kind == "fsync":
                inode_fsyncs.setdefault(event.inode, []).append(i)

        def first_after(indexes, i):
            return next((j for j in indexes if j > i), never)

        covered = []
        for i, event in enumerate(self.events):
            by_syncfs = next_syncfs[i + 1]
            if event.kind in ENTRY_KINDS:
                by_folders = max(first_after(dir_fsyncs.get(f, ()), i) for f in event.folders())
                covered.append(min(by_syncfs, by_folders))
            elif event.kind in DATA_KINDS + ("mtime",):
                covered.append(min(by_syncfs, first_after(inode_fsyncs.get(event.inode, ()), i)))
            else:
                assert event.kind in FLUSH_KINDS, event
                covered.append(i)  # A flush is done as soon as its call returned.
        return covered

    def state_at(self, cut: int, leaked: int = 0, everything: bool = False,
                 data_leaked: bool = False) -> CrashState:
        """The state a power cut after `cut` events leaves, the unflushed metadata of the
        first `leaked` events on disk all the same; everything=True: every change kept (what
        the live root must look like); data_leaked: every data write kept."""
        covered = self.covered_at()
        tree = dict(self.snapshot.tree)
        # An inode the log never saw created (made outside the Disk) reads as empty; the
        # divergence check reports how it got there.
        data = {i: v[0] for i, v in self.snapshot.inodes.items()}
        mtimes = {i: v[1] for i, v in self.snapshot.inodes.items()}
        state = CrashState(cut, leaked, tree, {}, data_leaked=data_leaked)
        for i, event in enumerate(self.events[:cut]):
            durable = everything or covered[i] < cut
            if event.kind == "create":
                data.setdefault(event.inode, b"")
                mtimes.setdefault(event.inode, event.mtime_ns)
            if event.kind in ENTRY_KINDS and (durable or i < leaked):
                self._apply(state, event)
            elif event.kind == "mtime" and (durable or i < leaked):
                mtimes[event.inode] = event.mtime_ns
            elif event.kind in DATA_KINDS and (durable or data_leaked):
                old = data.get(event.inode, b"")
                if event.kind == "write":
                    end = event.offset + len(event.data)
                    data[event.inode] = old[:event.offset].ljust(event.offset, b"\0") + \
                        event.data + old[end:]
                else:
                    data[event.inode] = old[:event.length].ljust(event.length, b"\0")
                mtimes[event.inode] = event.mtime_ns
        state.inodes = {node[1]: (data.get(node[1], b""), mtimes.get(node[1], 0))
                        for node in tree.values() if node[0] == "file"}
        return state

    @staticmethod
    def _apply(state: CrashState, event: Event) -> None:
        """Apply one durable entry change to a state's tree."""
        tree = state.tree
        if event.kind in ("unlink", "rmtree"):
            for path in [p for p in tree if in_subtree(p, event.path)]:
                del tree[path]
            return
        if parent(event.target if event.kind == "rename" else event.path) not in tree:
            state.ghosts.append(event)  # Its folder never reached the disk: unreachable.
            if event.kind != "rename":
                return
        if event.kind == "create":
            tree[event.path] = ("file", event.inode)
        elif event.kind == "mkdir":
            tree[event.path] = ("dir",)
        elif event.kind == "symlink":
            tree[event.path] = ("link", event.target)
        elif event.kind == "rename":
            moved = {p: tree.pop(p) for p in [p for p in tree if in_subtree(p, event.path)]}
            if not moved:
                # The name it had never reached the disk, yet the rename did: the inode has
                # the new name only.
                moved = {event.path: ("file", event.inode) if event.inode else ("dir",)}
            if parent(event.target) not in tree:
                return
            for path in [p for p in tree if in_subtree(p, event.target)]:
                del tree[path]
            for path, node in moved.items():
                tree[event.target + path[len(event.path):]] = node

    def crash_states(self, cut: int | None = None):
        """Every distinct state a power cut can leave: for each cut (or only the one given)
        and each number of leading events whose unflushed metadata leaked."""
        cuts = range(len(self.events) + 1) if cut is None else (cut,)
        covered = self.covered_at()
        for k in cuts:
            seen = set()
            leak_points = [0] + [i + 1 for i in range(k) if covered[i] >= k and
                                 self.events[i].kind in ENTRY_KINDS + ("mtime",)]
            for leaked in leak_points:
                for data_leaked in (False, True) if self.leak_data else (False,):
                    state = self.state_at(k, leaked, data_leaked=data_leaked)
                    signature = state.signature()
                    if signature not in seen:
                        seen.add(signature)
                        yield state

    def acknowledged(self, cut: int) -> dict:
        """The replies that went out before a power cut after `cut` events: name -> value."""
        return {name: value for at, name, value in self.marks if at <= cut}

    def describe(self, state: CrashState) -> str:
        """The log up to a state's cut, each event flagged durable (D), leaked (L) or lost."""
        covered = self.covered_at()
        lines = [f"power cut after {state.cut} of {len(self.events)} events "
                 f"(unflushed metadata of the first {state.leaked} leaked"
                 f"{', every unflushed data write too' if state.data_leaked else ''}):"]
        marks = {}
        for at, name, _ in self.marks:
            marks.setdefault(at, []).append(name)
        for i, event in enumerate(self.events[:state.cut]):
            for name in marks.get(i, ()):
                lines.append(f"        -- reply {name} sent")
            flag = "D" if covered[i] < state.cut else \
                "L" if i < state.leaked and event.kind in ENTRY_KINDS + ("mtime",) else "-"
            lines.append(f"  {i:3d} {flag} {event}")
        for name in marks.get(state.cut, ()):
            lines.append(f"        -- reply {name} sent")
        for event in state.ghosts:
            lines.append(f"  lost with its folder (never durable): {event}")
        return "\n".join(lines)

    def divergence(self, ignore: tuple[str, ...] = ()) -> list[str]:
        """How the live root differs from the log replayed whole ([] when the log saw every
        change); paths under a folder in `ignore` are left out."""
        model = self.state_at(len(self.events), everything=True)
        live = scan(self.root)

        def kept(path):
            return not any(in_subtree(path, top) for top in ignore)

        want = {p: ("file", *model.inodes[n[1]]) if n[0] == "file" else n
                for p, n in model.tree.items() if kept(p)}
        have = {p: n[:3] for p, n in live.items() if kept(p)}
        return [f"{p}: log says {want.get(p, 'nothing')!s:.120}, root has {have.get(p, 'nothing')!s:.120}"
                for p in sorted(set(want) | set(have)) if want.get(p) != have.get(p)]


def scan(root: str) -> dict:
    """Every folder, file and link under root by relative path: ("dir",), ("link", target)
    or ("file", data, mtime_ns, st_ino)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        rel = "" if rel == "." else rel
        found[rel] = ("dir",)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path, key = os.path.join(folder, name), f"{rel}/{name}" if rel else name
            if os.path.islink(path):
                found[key] = ("link", os.readlink(path))
                continue
            with open(path, "rb") as f:
                data = f.read()
            info = os.stat(path)
            found[key] = ("file", data, info.st_mtime_ns, info.st_ino)
    return found


def crash_states(recording: Recording, cut: int | None = None):
    """Every distinct on-disk state a power cut during the recording can leave (see module)."""
    return recording.crash_states(cut)


def durable_root_at(recording: Recording, cut: int, target_dir: str, leaked: int = 0) -> CrashState:
    """Write into target_dir (which must not exist) the root a power cut after `cut` events
    leaves; return that state."""
    state = recording.state_at(cut, leaked)
    state.materialize(target_dir)
    return state
