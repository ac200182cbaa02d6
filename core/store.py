"""The on-disk format: the only code that builds paths under an mq root (docs/FORMAT.md)."""

import ctypes
import errno
import os
import re
import shutil
import struct
import time
from dataclasses import dataclass

import msgpack

from mq.errors import Invalid, NotFound, Unavailable
from mq.ids import is_id, new_id

#: Version of the layout and file format; stored in {root}/FORMAT.
FORMAT_VERSION = 1
#: First bytes of every message file: "MQ" and the file-format version.
MAGIC = b"MQ\x01"
#: Default content type of a message added without one.
DEFAULT_CONTENT_TYPE = "application/octet-stream"
#: Longest queue name, in characters.
MAX_QUEUE_NAME = 128

QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,%d}$" % MAX_QUEUE_NAME)
FOLDERS = ("new", "queues", "delay", "remove", "run")
#: Errors that mean "cannot be stored now, try later" rather than "your request is wrong".
RETRYABLE = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EAGAIN}

_libc = ctypes.CDLL(None, use_errno=True)


def validate_queue(name: str) -> str:
    """Return name if it is a safe queue name, else raise Invalid saying why."""
    if not isinstance(name, str) or not QUEUE_PATTERN.match(name):
        raise Invalid(
            f"invalid queue name {name!r}: use 1 to {MAX_QUEUE_NAME} characters "
            "from A-Z a-z 0-9 _ . -"
        )
    if name in (".", ".."):
        raise Invalid(f"invalid queue name {name!r}: '.' and '..' are reserved")
    return name


def validate_id(message_id: str) -> str:
    """Return message_id if it is in the id format, else raise Invalid."""
    if not isinstance(message_id, str) or not is_id(message_id):
        raise Invalid(f"invalid message id {message_id!r}: expected a lower-case UUID")
    return message_id


def encode_message(body: bytes, content_type: str, created_ms: int) -> bytes:
    """The bytes of a message file: magic, header length, msgpack header, body."""
    header = msgpack.packb({"ct": content_type, "t": created_ms})
    return MAGIC + struct.pack(">I", len(header)) + header + body


@dataclass
class Message:
    """A message as read from its file."""

    queue: str
    id: str
    body: bytes
    content_type: str
    created_ms: int


def decode_message(queue: str, message_id: str, data: bytes) -> Message:
    """Parse a message file's bytes; raise ValueError when they are not one."""
    if data[:3] != MAGIC or len(data) < 7:
        raise ValueError(f"{queue}/{message_id}: not an mq message file")
    (length,) = struct.unpack(">I", data[3:7])
    header = msgpack.unpackb(data[7 : 7 + length])
    return Message(queue, message_id, data[7 + length :], header["ct"], header["t"])


def syncfs(fd: int) -> None:
    """Flush every dirty page and inode of the file system that holds fd (Linux syncfs(2))."""
    if _libc.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def fsync_dir(path: str) -> None:
    """fsync a directory so that the names created or renamed in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unavailable(err: OSError, what: str) -> Unavailable:
    """Translate a failed disk operation into the error a client sees."""
    return Unavailable(f"{what}: {os.strerror(err.errno) if err.errno else err}", retry_after=1)


class Store:
    """One mq root: its folders, the states of messages and the renames between them.

    sync: "fs" flushes a batch with one syncfs(2) of the root's file system; "file" fsyncs
    each file and each directory touched. Both flush before any reply (docs/FORMAT.md).
    """

    def __init__(self, root: str, sync: str = "fs", auto_create: bool = True):
        if sync not in ("fs", "file"):
            raise ValueError(f"sync must be 'fs' or 'file', not {sync!r}")
        self.root = os.path.abspath(root)
        self.sync = sync
        self.auto_create = auto_create
        self._root_fd: int | None = None
        # Tests switch this on to prove the save path's error handling (docs/FORMAT.md).
        self.fault = os.environ.get("MQ_TEST_FAULT", "")

    # -- paths: nothing else in mq builds them -------------------------------------------

    def folder(self, name: str) -> str:
        """Path of one of the root's top-level folders."""
        return os.path.join(self.root, name)

    def queue_dir(self, queue: str) -> str:
        """Folder of a queue's ready messages."""
        return os.path.join(self.root, "queues", queue)

    def new_path(self, queue: str, message_id: str) -> str:
        """Where a message is written before it is delivered."""
        return os.path.join(self.root, "new", f"{queue}:{message_id}")

    def ready_path(self, queue: str, message_id: str) -> str:
        """Where a ready message waits to be fetched."""
        return os.path.join(self.root, "queues", queue, message_id)

    def delay_path(self, queue: str, message_id: str) -> str:
        """Where a fetched or delayed message waits for its due time (the file's mtime)."""
        return os.path.join(self.root, "delay", f"{queue}:{message_id}")

    def remove_path(self, queue: str, message_id: str) -> str:
        """Where a removed message waits for the reaper."""
        return os.path.join(self.root, "remove", f"{queue}:{message_id}")

    def run_dir(self) -> str:
        """Folder for the daemons' ZeroMQ sockets and other runtime files."""
        return os.path.join(self.root, "run")

    @staticmethod
    def split_name(name: str) -> tuple[str, str] | None:
        """Split a 'queue:id' file name from new/, delay/ or remove/; None if it is not one."""
        queue, sep, message_id = name.rpartition(":")
        if not sep or not is_id(message_id) or not QUEUE_PATTERN.match(queue):
            return None
        return queue, message_id

    # -- the root -------------------------------------------------------------------------

    def init(self) -> None:
        """Create the folders and the FORMAT file, or check the version of an existing root."""
        try:
            os.makedirs(self.root, exist_ok=True)
            for name in FOLDERS:
                os.makedirs(self.folder(name), exist_ok=True)
        except OSError as err:
            raise Unavailable(f"cannot create root {self.root}: {err.strerror}") from err
        format_path = os.path.join(self.root, "FORMAT")
        try:
            with open(format_path, "x") as f:
                f.write(f"mq-format {FORMAT_VERSION}\n")
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(self.root)
        except FileExistsError:
            with open(format_path) as f:
                found = f.read().split()
            if found != ["mq-format", str(FORMAT_VERSION)]:
                raise Invalid(f"{format_path}: unsupported format {' '.join(found)!r}")

    def root_fd(self) -> int:
        """An open descriptor on the root, kept for syncfs."""
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        return self._root_fd

    def flush_data(self) -> None:
        """Make written file contents durable before they are renamed into view.

        With sync=file each file was fsynced as it was written, so there is nothing to do.
        """
        if self.sync == "fs":
            if self.fault == "flush":
                raise OSError(errno.EIO, "injected flush fault")
            syncfs(self.root_fd())

    def flush(self, dirs: set[str]) -> None:
        """Make the given directories' entries (and, with sync=fs, all written data) durable."""
        if self.fault == "flush":
            raise OSError(errno.EIO, "injected flush fault")
        if self.sync == "fs":
            syncfs(self.root_fd())
        else:
            for path in sorted(dirs):
                fsync_dir(path)

    # -- queues ---------------------------------------------------------------------------

    def queue_exists(self, queue: str) -> bool:
        """True when the queue's folder exists."""
        return os.path.isdir(self.queue_dir(queue))

    def create_queue(self, queue: str) -> bool:
        """Create a queue durably; False when it already existed."""
        try:
            os.mkdir(self.queue_dir(queue))
        except FileExistsError:
            return False
        fsync_dir(self.folder("queues"))
        return True

    def list_queues(self) -> list[str]:
        """Names of all queues."""
        return sorted(n for n in os.listdir(self.folder("queues")) if QUEUE_PATTERN.match(n))

    def delete_queue(self, queue: str) -> int:
        """Remove a queue and its messages in every state; return how many were in flight."""
        trash = os.path.join(self.folder("remove"), f"{queue}:{new_id()}.queue")
        try:
            os.rename(self.queue_dir(queue), trash)
        except FileNotFoundError:
            raise NotFound(f"queue {queue!r} does not exist") from None
        moved = 0
        prefix = queue + ":"
        for folder in ("new", "delay"):
            for name in os.listdir(self.folder(folder)):
                if name.startswith(prefix) and self.split_name(name):
                    try:
                        os.rename(os.path.join(self.folder(folder), name),
                                  os.path.join(self.folder("remove"), name))
                        moved += 1
                    except FileNotFoundError:
                        pass
        self.flush({self.folder("queues"), self.folder("remove"), self.folder("new"),
                    self.folder("delay")})
        return moved

    # -- messages -------------------------------------------------------------------------

    def write_new(self, queue: str, message_id: str, data: bytes, due: float | None) -> str:
        """Write a message file once into new/ (exclusive create); return its path.

        With sync=file the file is fsynced here; with sync=fs the caller flushes the batch.
        A failed write leaves nothing behind.
        """
        path = self.new_path(queue, message_id)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as err:
            raise unavailable(err, "cannot create message file") from err
        try:
            if self.fault == "enospc":
                raise OSError(errno.ENOSPC, "injected: no space left on device")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if due is not None:
                os.utime(fd, ns=(int(due * 1e9), int(due * 1e9)))
            if self.sync == "file":
                os.fsync(fd)
        except OSError as err:
            os.close(fd)
            self.discard_new(path)
            raise unavailable(err, "cannot write message file") from err
        os.close(fd)
        return path

    @staticmethod
    def discard_new(path: str) -> None:
        """Unlink a never-acknowledged file from new/ (the seed's clean-up of a failed write)."""
        try:
            os.unlink(path)
        except OSError:
            pass

    def deliver_new(self, queue: str, message_id: str, delayed: bool) -> str:
        """Rename a written message from new/ into its queue (or delay/); return the folder."""
        source = self.new_path(queue, message_id)
        target = self.delay_path(queue, message_id) if delayed else self.ready_path(queue, message_id)
        try:
            os.rename(source, target)
        except FileNotFoundError:
            if delayed or not os.path.exists(source):
                raise
            if not self.auto_create:
                self.discard_new(source)
                raise NotFound(f"queue {queue!r} does not exist") from None
            self.create_queue(queue)
            os.rename(source, target)
        return os.path.dirname(target)

    def claim(self, queue: str, message_id: str, due: float) -> bytes | None:
        """Move a ready message to delay/ with its due time; return its file's bytes.

        None when the message is gone (fetched by a peer, removed): the caller tries the next.
        The due time is set before the rename, so the rename publishes both at once.
        """
        source = self.ready_path(queue, message_id)
        try:
            with open(source, "rb") as f:
                data = f.read()
                os.utime(f.fileno(), ns=(int(due * 1e9), int(due * 1e9)))
            os.rename(source, self.delay_path(queue, message_id))
        except FileNotFoundError:
            return None
        return data

    def remove(self, queue: str, message_id: str) -> str | None:
        """Move a message from new/, its queue or delay/ to remove/; return the folder it left."""
        target = self.remove_path(queue, message_id)
        for source in (self.new_path(queue, message_id), self.ready_path(queue, message_id),
                       self.delay_path(queue, message_id)):
            try:
                os.rename(source, target)
                return os.path.dirname(source)
            except FileNotFoundError:
                continue
        return None

    def release(self, queue: str, message_id: str, now: float) -> tuple[str, float]:
        """Move a message from delay/ back to its queue when due.

        Returns (outcome, due): "ready"; "not_due" with its later due time (it was extended);
        "gone" (removed or moved by a peer); "removed" (its queue no longer exists, so it
        went to remove/).
        """
        source = self.delay_path(queue, message_id)
        try:
            due = os.stat(source).st_mtime
            if due > now:
                return "not_due", due
            os.rename(source, self.ready_path(queue, message_id))
            return "ready", due
        except FileNotFoundError:
            pass
        if not os.path.exists(source):
            return "gone", now
        try:
            os.rename(source, self.remove_path(queue, message_id))
        except FileNotFoundError:
            return "gone", now
        return "removed", now

    def list_ready(self, queue: str) -> list[str]:
        """Ids of a queue's ready messages (used to rebuild an index, never per fetch)."""
        try:
            return [n for n in os.listdir(self.queue_dir(queue)) if is_id(n)]
        except FileNotFoundError:
            return []

    def list_delayed(self) -> list[tuple[float, str, str]]:
        """(due, queue, id) of every message in delay/ (used at start and to self-heal)."""
        entries = []
        with os.scandir(self.folder("delay")) as it:
            for entry in it:
                parts = self.split_name(entry.name)
                if not parts:
                    continue
                try:
                    entries.append((entry.stat().st_mtime, *parts))
                except FileNotFoundError:
                    continue
        return entries

    def read_any(self, queue: str, message_id: str) -> tuple[str, bytes] | None:
        """(state, bytes) of a message wherever it is now; None when it is in none of them."""
        for state, path in (("ready", self.ready_path(queue, message_id)),
                            ("delayed", self.delay_path(queue, message_id))):
            try:
                with open(path, "rb") as f:
                    return state, f.read()
            except FileNotFoundError:
                continue
        return None

    def clean_new(self, min_age: float = 0.0) -> int:
        """Move files left in new/ by a crash (older than min_age seconds) to remove/."""
        moved = 0
        cutoff = time.time() - min_age
        with os.scandir(self.folder("new")) as it:
            for entry in it:
                try:
                    if entry.stat().st_mtime > cutoff and min_age:
                        continue
                    os.rename(entry.path, os.path.join(self.folder("remove"), entry.name))
                    moved += 1
                except FileNotFoundError:
                    continue
        if moved:
            self.flush({self.folder("new"), self.folder("remove")})
        return moved

    def reap(self) -> int:
        """Unlink everything in remove/."""
        return reap_folder(self.folder("remove"))


def reap_folder(path: str) -> int:
    """Unlink every file in a folder, and remove its sub-folders (deleted queues) whole."""
    count = 0
    with os.scandir(path) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                count += 1
            except FileNotFoundError:
                continue
    return count
