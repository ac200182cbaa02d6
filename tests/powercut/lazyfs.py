"""A FUSE file system that forgets, at a power cut, every change that was not flushed.

In the spirit of Jepsen's lazyfs: a pass-through over a backing folder that also keeps the
image a disk would hold after losing power. A file's data (and mtime) enters that image when
the file is fsynced (fsync or fdatasync); a folder's entries (names, and which file each name
points to) when the folder is fsynced. Nothing else makes anything durable: syncfs(2) on a
FUSE mount never reaches the file system (there is no FUSE operation for it), which is the
point of the exercise. Unmounting is the power cut: the backing folder is rewritten to hold
the durable image only, so the next mount sees what a restarted machine would.

    python tests/powercut/lazyfs.py BACKING MOUNTPOINT [--faults FILE]   (unmount with fusermount3 -u)

With --faults, chosen operations fail with a chosen errno (FaultyLazyFS).

Test infrastructure (tests/powercut/), built on mfusepy (PyPI) and /dev/fuse.
"""

import errno
import os
import shutil
import sys
import time

import mfusepy


class LazyFS(mfusepy.Operations):
    """Pass-through operations that record what fsync made durable."""

    use_ns = True

    def __init__(self, backing: str):
        self.backing = os.path.realpath(backing)
        self.next_ident = 0
        self.idents: dict[int, int] = {}  # backing inode -> identity of the file it holds
        self.data: dict[int, tuple[bytes, int]] = {}  # identity -> (durable bytes, mtime ns)
        self.listings: dict[str, dict] = {}  # folder -> {name: ("file", identity) | ("dir",)
        #                                       | ("link", target)}, as last fsynced
        for folder, _, _ in os.walk(self.backing):  # What is there at mount time is durable.
            rel = "/" + os.path.relpath(folder, self.backing).removeprefix(".")
            self.listings[rel.rstrip("/") or "/"] = self.entries(rel)

    # -- the durable image ------------------------------------------------------------------

    def real(self, path: str) -> str:
        """The backing path of a path in the mount."""
        return self.backing + path

    def identity(self, ino: int, new: bool = False) -> int:
        """A file's identity: stable across renames and links, never reused (inodes are)."""
        if new or ino not in self.idents:
            self.next_ident += 1
            self.idents[ino] = self.next_ident
        return self.idents[ino]

    def entries(self, path: str) -> dict:
        """A folder's entries now, as the durable image records them; files found are made
        durable too (used at mount time only for unknown files)."""
        out = {}
        folder = self.real(path.rstrip("/"))
        for entry in os.scandir(folder):
            st = entry.stat(follow_symlinks=False)
            if entry.is_symlink():
                out[entry.name] = ("link", os.readlink(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                out[entry.name] = ("dir",)
            else:
                known = st.st_ino in self.idents
                ident = self.identity(st.st_ino)
                if not known:
                    self.remember_data(entry.path, ident)
                out[entry.name] = ("file", ident)
        return out

    def remember_data(self, real_path: str, ident: int) -> None:
        """Make a file's current bytes and mtime durable."""
        with open(real_path, "rb") as f:
            self.data[ident] = (f.read(), os.fstat(f.fileno()).st_mtime_ns)

    def power_cut(self) -> None:
        """Rewrite the backing folder to hold the durable image only."""
        image = self.backing + ".image"
        shutil.rmtree(image, ignore_errors=True)
        self.write_image("/", image)
        shutil.rmtree(self.backing)
        os.rename(image, self.backing)

    def write_image(self, path: str, target: str) -> None:
        """Write one durable folder (and what it holds, recursively) at target."""
        os.mkdir(target)
        for name, entry in self.listings.get(path, {}).items():
            child = os.path.join(target, name)
            if entry[0] == "dir":
                self.write_image(path.rstrip("/") + "/" + name, child)
            elif entry[0] == "link":
                os.symlink(entry[1], child)
            else:
                # A name whose file was never fsynced: the name survived, the data did not.
                data, mtime = self.data.get(entry[1], (b"", None))
                with open(child, "wb") as f:
                    f.write(data)
                if mtime is not None:
                    os.utime(child, ns=(mtime, mtime))

    # -- operations: flushes ----------------------------------------------------------------

    def fsync(self, path, datasync, fh):
        """The file's data becomes durable."""
        os.fsync(fh)
        self.remember_data(f"/proc/self/fd/{fh}", self.identity(os.fstat(fh).st_ino))
        return 0

    def fsyncdir(self, path, datasync, fh):
        """The folder's entries become durable."""
        self.listings[path] = self.entries(path)
        return 0

    # -- operations: pass-through -----------------------------------------------------------

    def getattr(self, path, fh=None):
        """lstat of the backing file."""
        st = os.lstat(self.real(path)) if fh is None else os.fstat(fh)
        return {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid",
                                                   "st_size", "st_ino")} | {
            "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    def readdir(self, path, fh):
        """The backing folder's names."""
        return [".", ".."] + os.listdir(self.real(path))

    def access(self, path, amode):
        """access(2) of the backing path."""
        if not os.access(self.real(path), amode):
            raise OSError(errno.EACCES, "")
        return 0

    def create(self, path, mode, flags):
        """A new file (opened read-write, so that fsync can read it back)."""
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
        fd = os.open(self.real(path), flags | os.O_CREAT, mode)
        self.identity(os.fstat(fd).st_ino, new=True)
        return fd

    def open(self, path, flags):
        """An existing file; write-only opens become read-write."""
        if flags & os.O_ACCMODE == os.O_WRONLY:
            flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
        return os.open(self.real(path), flags)

    def read(self, path, size, offset, fh):
        """pread."""
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        """pwrite: visible at once, durable only after fsync."""
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        """ftruncate or truncate."""
        os.truncate(fh if fh is not None else self.real(path), length)
        return 0

    def flush(self, path, fh):
        """close(2) of a descriptor flushes nothing to stable storage."""
        return 0

    def release(self, path, fh):
        """Close the backing descriptor."""
        os.close(fh)
        return 0

    def utimens(self, path, times=None):
        """Set atime and mtime (nanoseconds)."""
        os.utime(self.real(path), ns=times)
        return 0

    def chmod(self, path, mode):
        """chmod."""
        os.chmod(self.real(path), mode)
        return 0

    def mkdir(self, path, mode):
        """A new folder (its name is durable once its parent is fsynced)."""
        os.mkdir(self.real(path), mode)
        return 0

    def rmdir(self, path):
        """rmdir."""
        os.rmdir(self.real(path))
        return 0

    def unlink(self, path):
        """unlink."""
        os.unlink(self.real(path))
        return 0

    def rename(self, old, new):
        """rename(2): atomic, durable once both folders are fsynced."""
        os.rename(self.real(old), self.real(new))
        return 0

    def link(self, target, source):
        """A hard link target -> source: one file, two names."""
        os.link(self.real(source), self.real(target))
        return 0

    def symlink(self, target, source):
        """A symbolic link target -> source."""
        os.symlink(source, self.real(target))
        return 0

    def readlink(self, path):
        """readlink."""
        return os.readlink(self.real(path))

    def statfs(self, path):
        """statvfs of the backing file system."""
        st = os.statvfs(self.real(path))
        return {key: getattr(st, key) for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree",
                                                   "f_bavail", "f_files", "f_ffree", "f_favail",
                                                   "f_flag", "f_namemax")}


class FaultyLazyFS(LazyFS):
    """LazyFS that fails chosen operations on chosen paths with a chosen errno, as a network
    file system does while its server or metadata engine is away (EIO, ENOTCONN...).

    The faults file holds lines "OP PATH ERRNO" (e.g. "readdir /root/queues 5"; a PATH ending
    in "*" names every path it begins, for files whose names a test cannot know); it is read
    again whenever it changed, so a test arms and clears faults by writing it. An ERRNO of
    "+MS" makes the operation wait MS milliseconds instead, then succeed: a slow file system,
    as a distributed one is under load (every operation waits, since there is one thread)."""

    def __init__(self, backing: str, faults: str):
        super().__init__(backing)
        self.faults_path = faults
        self.faults_seen: tuple = ()
        self.faults: dict[tuple[str, str], float] = {}  # errno, or -seconds for a wait
        self.prefixes: list[tuple[str, str, float]] = []  # (op, path prefix, errno or -seconds)

    def fault(self, op: str, path: str) -> None:
        """Raise the errno armed for op on path, if any."""
        try:
            info = os.stat(self.faults_path)
            seen = (info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            seen = ()
        if seen != self.faults_seen:
            self.faults_seen, self.faults, self.prefixes = seen, {}, []
            if seen:
                with open(self.faults_path) as f:
                    for line in f:
                        if line.split():
                            name, where, text = line.split()
                            code = -float(text) / 1000 if text.startswith("+") else int(text)
                            if where.endswith("*"):
                                self.prefixes.append((name, where[:-1], code))
                            else:
                                self.faults[(name, where)] = code
        code = self.faults.get((op, path)) or next(
            (code for name, prefix, code in self.prefixes
             if name == op and path.startswith(prefix)), 0)
        if code < 0:
            time.sleep(-code)
        elif code:
            raise mfusepy.FuseOSError(int(code))


def _failing(op: str):
    """A FaultyLazyFS operation: the armed fault, else LazyFS's."""
    def operation(self, path, *args, **kwargs):
        self.fault(op, path)
        return getattr(LazyFS, op)(self, path, *args, **kwargs)
    operation.__name__ = op
    return operation


for _op in ("getattr", "readdir", "open", "create", "read", "write", "mkdir", "rename", "unlink",
            "fsync", "fsyncdir", "link", "symlink", "utimens"):
    setattr(FaultyLazyFS, _op, _failing(_op))


def main() -> int:
    """Mount until unmounted, then cut the power (with --faults FILE: a FaultyLazyFS)."""
    backing, mountpoint = sys.argv[1:3]
    faults = sys.argv[4] if sys.argv[3:4] == ["--faults"] else ""
    fs = FaultyLazyFS(backing, faults) if faults else LazyFS(backing)
    # One thread: operations are applied one at a time, so the image needs no lock.
    mfusepy.FUSE(fs, mountpoint, foreground=True, nothreads=True, fsname="lazyfs")
    fs.power_cut()
    return 0


if __name__ == "__main__":
    sys.exit(main())
