"""The disk: every change an mq root receives, and the flush that makes changes durable.

Everything that writes under a root goes through a Disk, so the flush policy lives here
once, and a test can hand the store a disk that records or fails (tests/crash_model.py).
"""

import ctypes
import errno
import os
import shutil
import stat

from mq.ids import new_id
from mq.store.renames import UNSUPPORTED, checked_rename, rename_noreplace

#: The flush policies: "fs" is one syncfs(2) of the root's file system per batch, "file" an
#: fsync of every file written and every folder changed.
SYNC_MODES = ("fs", "file")

#: statfs(2) f_type of file systems on which syncfs(2) may not reach stable storage: on FUSE
#: (GlusterFS, CephFS's ceph-fuse, virtiofs...) it never reaches the file system's daemon; on
#: network file systems it may not reach the server. Only per-file fsync is sure there
#: (docs/CLUSTER.md, "The flush").
PER_FILE_FLUSH = {0x65735546: "fuse", 0x6969: "nfs", 0x00C36400: "ceph", 0xFF534D42: "cifs",
                  0xFE534D42: "smb2", 0x01021997: "9p", 0x0BD00BD0: "lustre"}

#: FUSE file systems (their type in /proc/self/mountinfo) whose every change of a name or of
#: an inode's times is durable when its call returns, and which are sent no folder fsync:
#: JuiceFS commits each metadata operation in its metadata engine before it answers, and its
#: FUSE layer answers FSYNCDIR with ENOSYS, after which the kernel answers every folder fsync
#: itself (docs/FORMAT.md, "Durability").
SYNCHRONOUS_METADATA = frozenset({"fuse.juicefs"})

_libc = ctypes.CDLL(None, use_errno=True)


def filesystem_type(path: str) -> int:
    """statfs(2) f_type of the file system holding path (or its nearest existing parent)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is its first word.
    if _libc.statfs(os.fsencode(path), buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def mount_type(path: str, mountinfo: str = "/proc/self/mountinfo") -> str:
    """The type a mount table gives the file system holding path (or its nearest existing
    parent), "fuse.juicefs" say; "" when none is found."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    try:
        device = os.stat(path).st_dev
        with open(mountinfo) as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    for line in lines:
        fields = line.split()
        # id, parent, major:minor, root, mount point, options, optional fields, "-", type, ...
        if len(fields) > 7 and fields[2] == wanted and "-" in fields[6:]:
            return fields[fields.index("-", 6) + 1]
    return ""


def choose_sync(path: str) -> tuple[str, str]:
    """The flush policy --sync=auto picks for a root, and the name of its file system kind
    ("file" on the kinds in PER_FILE_FLUSH, else "fs"; "fs" when statfs fails)."""
    try:
        kind = filesystem_type(path)
    except OSError:
        return "fs", "unknown"
    if kind in PER_FILE_FLUSH:
        return "file", PER_FILE_FLUSH[kind]
    return "fs", f"0x{kind:x}"


class Disk:
    """The write primitives and flushes of one flush policy (docs/FORMAT.md, Durability).

    sync="fs" falls back to "file" on a libc without syncfs(2), since the per-file recipe
    is durable everywhere; `fell_back` records that it did. Renames never replace a name
    (renameat2 RENAME_NOREPLACE); where the file system refuses the flag, renames are checked
    ones (renames.checked_rename), and the refusal is remembered for this Disk's life.
    """

    def __init__(self, sync: str = "fs", libc=None, synchronous_metadata: bool = False):
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be 'fs' or 'file', not {sync!r}")
        self._syncfs = getattr(libc if libc is not None else _libc, "syncfs", None)
        self.fell_back = sync == "fs" and self._syncfs is None
        self.sync = "file" if self.fell_back else sync
        #: A GroupFlush shared with the daemon's other actors (share_flushes), or None.
        self.group = None
        #: With sync=file: the file system makes every change of a name or of an inode's
        #: times durable before the call returns (SYNCHRONOUS_METADATA), so neither a folder
        #: nor a file whose due time was set is fsynced: the call would change nothing there
        #: and cost FUSE round trips (an open, a close and a look at the folder's attributes).
        self.synchronous_metadata = synchronous_metadata
        #: The file system refused renameat2's RENAME_NOREPLACE once: it is not asked again.
        self.refuses_noreplace = False

    # -- changes --------------------------------------------------------------------------

    def create(self, path: str, data: bytes, mtime: float | None = None) -> None:
        """Create a file that must not exist, write all of data, set its mtime; nothing is
        left behind on failure. With sync=file the file is fsynced here."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            self.write_whole(fd, data, mtime)
        except BaseException:
            os.close(fd)
            self.discard(path)
            raise
        os.close(fd)

    def write_whole(self, fd: int, data: bytes, mtime: float | None, cut: bool = False) -> None:
        """Write all of data from the start of an open file, cut it to that length (cut: it
        held more before), set its mtime (fsync with sync=file)."""
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if cut:
            os.ftruncate(fd, len(data))
        if mtime is not None:
            os.utime(fd, ns=(int(mtime * 1e9), int(mtime * 1e9)))
        if self.sync == "file":
            os.fsync(fd)

    def reuse(self, spare: str, path: str, data: bytes, mtime: float | None = None) -> bool:
        """Take a spare file (docs/FORMAT.md, "Spare files") as path and make it hold exactly
        data; False when another writer took the spare first, or it is not a file with one
        name that this process can open for writing (then it is unlinked).

        Written over in place and cut to length, not truncated first: the blocks it holds are
        kept, so the file system allocates neither an inode nor a block. Like create, nothing
        is left behind on failure.
        """
        try:
            self.rename(spare, path)
        except FileNotFoundError:
            return False
        try:
            # Only a file of the root's own is written: a symbolic link planted in spare/ is
            # not followed (ELOOP), a fifo does not wait for a reader (ENXIO), and a second
            # name of a file elsewhere is refused below, so an add never writes outside the
            # root. O_NONBLOCK changes nothing for a regular file.
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            # No file this process may write (another owner's, or not a file at all): no
            # spare, and out of the way of the create that follows.
            if os.path.isdir(path) and not os.path.islink(path):
                self.remove_tree(path)
            else:
                self.discard(path)
            return False
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            self.discard(path)  # Drops this name only; the other name's file is untouched.
            return False
        try:
            self.write_whole(fd, data, mtime, cut=True)
        except BaseException:
            os.close(fd)
            self.discard(path)
            raise
        os.close(fd)
        return True

    def publish(self, path: str, data: bytes) -> None:
        """Create a file that must not exist and appears whole: written under a temporary
        name, then linked into place (FileExistsError when it exists), so that a reader never
        sees it empty or half written."""
        temp = f"{os.path.dirname(path)}/.{new_id()}.tmp"
        self.create(temp, data)
        try:
            os.link(temp, path)
        finally:
            self.discard(temp)

    def replace(self, path: str, data: bytes) -> None:
        """Replace a small file durably: temp file, fsync, rename over, fsync the folder.

        Used for every small file a root holds (properties, manifests, markers), whatever
        the sync mode: each is one change that must be durable when this returns.
        """
        temp = f"{os.path.dirname(path)}/.{new_id()}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            self.rename_over(temp, path)
        except BaseException:
            self.discard(temp)
            raise
        self.fsync_dir(os.path.dirname(path))

    def rename(self, source: str, target: str) -> None:
        """Rename one entry (the only way a message changes state); FileExistsError when the
        target exists, which for a state change means a peer got there first."""
        if not self.refuses_noreplace:
            try:
                rename_noreplace(source, target)
                return
            except OSError as err:
                if err.errno not in UNSUPPORTED:
                    raise
            self.refuses_noreplace = True
        # The file system refused the flag (GlusterFS: EINVAL, which a FUSE kernel does not
        # remember as it does ENOSYS, so each try is a round trip to its client): from now on
        # its check that no target exists is made here, by one lookup, as the kernel made it
        # before passing the flag on; it is half of what keeps two clients from both
        # "winning" (renames.py).
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), source, None, target)
        checked_rename(source, target)

    def rename_over(self, source: str, target: str) -> None:
        """Rename one entry over whatever has the target name (a small file replaced whole)."""
        os.rename(source, target)

    def unlink(self, path: str) -> None:
        """Unlink one entry."""
        os.unlink(path)

    def discard(self, path: str) -> None:
        """Unlink a file that was never acknowledged, ignoring any failure."""
        try:
            self.unlink(path)
        except OSError:
            pass

    def symlink(self, target: str, path: str) -> None:
        """Create a symbolic link (a de-duplication key) that must not exist."""
        os.symlink(target, path)

    def mkdir(self, path: str) -> bool:
        """Create a folder and make its name durable; False when it existed."""
        try:
            os.mkdir(path)
        except FileExistsError:
            return False
        self.fsync_dir(os.path.dirname(path))
        return True

    def set_mtime(self, fd: int, when: float) -> None:
        """Set an open file's mtime (a due time); with sync=file, fsync it, since folder
        fsyncs do not carry an inode's times."""
        os.utime(fd, ns=(int(when * 1e9), int(when * 1e9)))
        if self.sync == "file" and not self.synchronous_metadata:
            os.fsync(fd)

    def remove_tree(self, path: str) -> None:
        """Remove a folder and everything in it (reaped queues, finished stage folders)."""
        shutil.rmtree(path)

    # -- flushes --------------------------------------------------------------------------

    def flush_data(self, anchor: str, dirs=()) -> None:
        """Make files written so far durable, contents and names, before they are renamed into
        view or named by anything else (a de-duplication key). With sync=file each file was
        fsynced as written: what is left is the names in the folders they were written in."""
        if self.sync == "fs":
            self.syncfs(anchor)
        else:
            for path in sorted(dirs):
                self.fsync_dir(path)

    def flush(self, anchor: str, dirs) -> None:
        """Make the given folders' entries (with sync=fs: every change on the file system of
        anchor) durable."""
        if self.sync == "fs":
            self.syncfs(anchor)
        else:
            for path in sorted(dirs):
                self.fsync_dir(path)

    def share_flushes(self, group) -> None:
        """From now on, skip a syncfs when one another process started after this one's
        changes has completed (mq.store.group_flush)."""
        self.group = group

    def syncfs(self, anchor: str) -> None:
        """Make every change made so far on the file system of anchor durable: by a syncfs(2)
        of the daemon's flush group that started after them, or by one here."""
        if self.group is None:
            self.syncfs_now(anchor)
        else:
            self.group.sync(lambda: self.syncfs_now(anchor))

    def syncfs_now(self, anchor: str) -> None:
        """syncfs(2) the file system holding anchor; the descriptor lives only for the call,
        so a caller that never closes its store leaks nothing."""
        syncfs = self._syncfs
        if syncfs is None:  # A C library without it: sync is then "file", which never calls it.
            raise OSError(errno.ENOSYS, "the C library has no syncfs(2)")
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        """fsync a folder so that the names created, renamed or removed in it are durable
        (already so, where the file system's metadata is synchronous)."""
        if self.synchronous_metadata:
            return
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

