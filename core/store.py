"""The on-disk format: the only code that builds paths under an mq root (docs/FORMAT.md)."""

import ctypes
import errno
import hashlib
import os
import re
import shutil
import struct
import time
from dataclasses import dataclass

import msgpack
import orjson

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

#: Names no queue may have: '.' and '..' are folders, '_mq' holds the admin endpoints.
RESERVED_NAMES = (".", "..", "_mq")
QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,%d}$" % MAX_QUEUE_NAME)
FOLDERS = ("new", "queues", "delay", "remove", "run", "dedup", "props", "notices")
#: Errors that mean "cannot be stored now, try later" rather than "your request is wrong".
RETRYABLE = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EAGAIN}

_libc = ctypes.CDLL(None, use_errno=True)


def validate_queue(name: str) -> str:
    """Return name if it is a safe queue name, else raise Invalid saying why."""
    if not isinstance(name, str) or not QUEUE_PATTERN.fullmatch(name):
        raise Invalid(
            f"invalid queue name {name!r}: use 1 to {MAX_QUEUE_NAME} characters "
            "from A-Z a-z 0-9 _ . -"
        )
    if name in RESERVED_NAMES:
        raise Invalid(f"invalid queue name {name!r}: {', '.join(RESERVED_NAMES)} are reserved")
    return name


def validate_id(message_id: str) -> str:
    """Return message_id if it is in the id format, else raise Invalid."""
    if not isinstance(message_id, str) or not is_id(message_id):
        raise Invalid(f"invalid message id {message_id!r}: expected a lower-case UUID")
    return message_id


def encode_message(body: bytes, content_type: str, created_ms: int, message_id: str = "",
                   dedup_key: str = "") -> bytes:
    """The bytes of a message file: magic, header length, msgpack header, body."""
    header = {"ct": content_type, "t": created_ms}
    if message_id:
        header["id"] = message_id
    if dedup_key:
        header["dk"] = dedup_digest(dedup_key)
    packed = msgpack.packb(header)
    return MAGIC + struct.pack(">I", len(packed)) + packed + body


def dedup_digest(key: str) -> str:
    """The file name a de-duplication key is recorded under (any key fits a name)."""
    return hashlib.sha256(key.encode()).hexdigest()[:40]


def entry_name(message_id: str, attempts: int = 0) -> str:
    """A message's name in its folder: the id, then '.N' once it has been delivered N times."""
    return f"{message_id}.{attempts}" if attempts else message_id


def parse_entry(name: str) -> tuple[str, int] | None:
    """(id, deliveries so far) of an entry name; None when it is not one."""
    message_id, dot, count = name.partition(".")
    if not is_id(message_id) or (dot and not count.isdigit()):
        return None
    return message_id, int(count) if dot else 0


@dataclass
class Message:
    """A message as read from its file."""

    queue: str
    id: str
    body: bytes
    content_type: str
    created_ms: int
    dedup_digest: str = ""


def decode_message(queue: str, message_id: str, data: bytes) -> Message:
    """Parse a message file's bytes; raise ValueError when they are not one."""
    if data[:3] != MAGIC or len(data) < 7:
        raise ValueError(f"{queue}/{message_id}: not an mq message file")
    (length,) = struct.unpack(">I", data[3:7])
    header = msgpack.unpackb(data[7 : 7 + length])
    return Message(queue, message_id, data[7 + length :], header["ct"], header["t"],
                   header.get("dk", ""))


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

    def ready_path(self, queue: str, message_id: str, attempts: int = 0) -> str:
        """Where a ready message waits to be fetched (delivered `attempts` times so far)."""
        return os.path.join(self.root, "queues", queue, entry_name(message_id, attempts))

    def delay_path(self, queue: str, message_id: str, attempts: int = 0) -> str:
        """Where a delayed (attempts 0) or in-flight message waits for its due time (mtime)."""
        return os.path.join(self.root, "delay", f"{queue}:{entry_name(message_id, attempts)}")

    def dedup_path(self, queue: str, key: str) -> str:
        """The symlink recording a de-duplication key; it points at the message id."""
        return self.dedup_digest_path(queue, dedup_digest(key))

    def dedup_digest_path(self, queue: str, digest: str) -> str:
        """dedup_path for a key known only by its digest (the 'dk' header of a message file)."""
        return os.path.join(self.root, "dedup", queue, digest)

    def props_path(self, queue: str) -> str:
        """The JSON file of a queue's own properties."""
        return os.path.join(self.root, "props", f"{queue}.json")

    def default_props_path(self) -> str:
        """The JSON file of the default property rules."""
        return os.path.join(self.root, "props", "_defaults.json")

    def remove_path(self, queue: str, message_id: str) -> str:
        """Where a removed message waits for the reaper."""
        return os.path.join(self.root, "remove", f"{queue}:{message_id}")

    def notice_path(self, queue: str | None = None) -> str:
        """The notice file of a queue's ready messages, or (queue None) of delay/."""
        return os.path.join(self.root, "notices", f"ready:{queue}" if queue else "delay")

    def run_dir(self) -> str:
        """Folder for the daemons' ZeroMQ sockets and other runtime files."""
        return os.path.join(self.root, "run")

    @staticmethod
    def split_name(name: str) -> tuple[str, str, int] | None:
        """(queue, id, deliveries) of a 'queue:id[.N]' name in new/, delay/ or remove/."""
        queue, sep, entry = name.rpartition(":")
        parsed = parse_entry(entry) if sep and QUEUE_PATTERN.fullmatch(queue) else None
        return (queue, *parsed) if parsed else None

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
        if self.fault in ("flush", "flush_dirs"):
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
        return sorted(n for n in os.listdir(self.folder("queues")) if QUEUE_PATTERN.fullmatch(n))

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
        for leftover in (os.path.join(self.folder("dedup"), queue), self.props_path(queue),
                         self.notice_path(queue)):
            try:
                os.rename(leftover, os.path.join(self.folder("remove"),
                                                 f"{queue}:{new_id()}.{os.path.basename(leftover)}"))
            except FileNotFoundError:
                pass
        self.flush({self.folder("queues"), self.folder("remove"), self.folder("new"),
                    self.folder("delay"), self.folder("props"), self.folder("dedup"),
                    self.folder("notices")})
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
            self.write_whole(fd, data, due)
        except OSError as err:
            os.close(fd)
            self.discard_new(path)
            raise unavailable(err, "cannot write message file") from err
        os.close(fd)
        return path

    def write_whole(self, fd: int, data: bytes, due: float | None) -> None:
        """Write all of data to a new file, make the due time its mtime, fsync it with sync=file."""
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if due is not None:
            os.utime(fd, ns=(int(due * 1e9), int(due * 1e9)))
        if self.sync == "file":
            os.fsync(fd)

    @staticmethod
    def discard_new(path: str) -> None:
        """Unlink a never-acknowledged file from new/ (the seed's clean-up of a failed write)."""
        try:
            os.unlink(path)
        except OSError:
            pass

    def deliver_new(self, queue: str, message_id: str, delayed: bool) -> str:
        """Rename a written message from new/ into its queue (or delay/); return the folder.

        The queue is created first if it is missing (auto-create), also for a delayed
        message, so that it has a queue to become ready in.
        """
        source = self.new_path(queue, message_id)
        if not self.queue_exists(queue):
            if not self.auto_create:
                self.discard_new(source)
                raise NotFound(f"queue {queue!r} does not exist")
            self.create_queue(queue)
        target = self.delay_path(queue, message_id) if delayed else self.ready_path(queue, message_id)
        os.rename(source, target)
        return os.path.dirname(target)

    def claim(self, queue: str, message_id: str, due: float, attempts: int = 0) -> bytes | None:
        """Move a ready message to delay/ as delivery attempts+1, due at `due`; return its bytes.

        None when the message is gone (fetched by a peer, removed): the caller tries the next.
        The due time is set before the rename, so the rename publishes both at once.
        """
        source = self.ready_path(queue, message_id, attempts)
        try:
            with open(source, "rb") as f:
                data = f.read()
                os.utime(f.fileno(), ns=(int(due * 1e9), int(due * 1e9)))
            os.rename(source, self.delay_path(queue, message_id, attempts + 1))
        except FileNotFoundError:
            return None
        return data

    def candidates(self, queue: str, message_id: str, max_attempts: int):
        """Every path a message may have, newest state first: new/, then each delivery count."""
        yield "new", 0, self.new_path(queue, message_id)
        for attempts in range(max_attempts + 1):
            yield "ready", attempts, self.ready_path(queue, message_id, attempts)
            yield "delayed" if attempts == 0 else "in_flight", attempts, \
                self.delay_path(queue, message_id, attempts)

    def locate(self, queue: str, message_id: str, max_attempts: int) -> tuple[str, int] | None:
        """(state, deliveries) of a message, probing its possible names (no folder listing)."""
        for state, attempts, path in self.candidates(queue, message_id, max_attempts):
            if os.path.exists(path):
                return state, attempts
        return None

    def remove(self, queue: str, message_id: str, max_attempts: int = 0,
               known: tuple[str, int] | None = None) -> str | None:
        """Move a message from any state to remove/; return the folder it left, None if absent.

        `known` is the caller's (state, deliveries) guess, tried first; then every name the
        message may have up to max_attempts deliveries is tried in turn.
        """
        target = self.remove_path(queue, message_id)
        paths = [p for _, _, p in self.candidates(queue, message_id, max_attempts)]
        if known:
            paths.insert(0, self.state_path(queue, message_id, *known))
        for source in paths:
            try:
                os.rename(source, target)
                return os.path.dirname(source)
            except FileNotFoundError:
                continue
        return None

    def state_path(self, queue: str, message_id: str, state: str, attempts: int) -> str:
        """The path of a message in a given state after a given number of deliveries."""
        if state == "new":
            return self.new_path(queue, message_id)
        if state == "ready":
            return self.ready_path(queue, message_id, attempts)
        return self.delay_path(queue, message_id, attempts)

    def ack(self, queue: str, message_id: str, attempts: int) -> bool:
        """Remove delivery `attempts` of an in-flight message; False when that delivery is over."""
        try:
            os.rename(self.delay_path(queue, message_id, attempts), self.remove_path(queue, message_id))
        except FileNotFoundError:
            return False
        return True

    def extend(self, queue: str, message_id: str, attempts: int, due: float) -> bool:
        """Set a new due time on delivery `attempts`; False when that delivery is over."""
        try:
            os.utime(self.delay_path(queue, message_id, attempts), ns=(int(due * 1e9), int(due * 1e9)))
        except FileNotFoundError:
            return False
        return True

    def release(self, queue: str, message_id: str, now: float, attempts: int = 0,
                dead_letter: str | None = None, force: bool = False) -> tuple[str, float]:
        """Move a message from delay/ back to its queue when due (or now, with force).

        With dead_letter set, the message goes to that queue instead, as a new ready message.
        Returns (outcome, due): "ready"; "dead" (moved to the dead-letter queue); "not_due"
        with its later due time (it was extended); "gone" (removed or moved by a peer);
        "removed" (its queue no longer exists, so it went to remove/).
        """
        source = self.delay_path(queue, message_id, attempts)
        try:
            due = os.stat(source).st_mtime
        except FileNotFoundError:
            return "gone", now
        if due > now and not force:
            return "not_due", due
        if dead_letter:
            target = self.ready_path(dead_letter, message_id)
            outcome = "dead"
            if not self.queue_exists(dead_letter):
                self.create_queue(dead_letter)
        else:
            target = self.ready_path(queue, message_id, attempts)
            outcome = "ready"
        try:
            os.rename(source, target)
        except FileNotFoundError:
            pass
        else:
            return self._unless_extended(source, target, outcome, due, now, force)
        if not os.path.exists(source):
            return "gone", now
        if os.path.isdir(os.path.dirname(target)):
            # The file was away during the rename and is back: another mover's release put it
            # back in delay/ after an extend (_unless_extended). Time it again; never remove it.
            try:
                return "not_due", os.stat(source).st_mtime
            except FileNotFoundError:
                return "gone", now
        try:
            os.rename(source, self.remove_path(queue, message_id))
        except FileNotFoundError:
            return "gone", now
        return "removed", now

    @staticmethod
    def _unless_extended(source: str, target: str, outcome: str, due: float, now: float,
                         force: bool) -> tuple[str, float]:
        """After release's rename: put the message back in delay/ if an extend moved its due
        time between release's stat and its rename.

        The mtime travels with the file, so this stat sees any extend that answered 200; one
        that comes after the rename finds no file in delay/ and is refused.
        """
        try:
            extended = os.stat(target).st_mtime
        except FileNotFoundError:
            return "gone", now  # Taken by a peer that listed the queue meanwhile.
        if force or extended <= now:
            return outcome, due
        try:
            os.rename(target, source)
        except FileNotFoundError:
            return "gone", now
        return "not_due", extended

    def redrive(self, dead_letter: str, queue: str) -> list[str]:
        """Move every ready message of a dead-letter queue back to `queue` as new; return ids."""
        moved = []
        if not self.queue_exists(queue):
            self.create_queue(queue)
        for name in os.listdir(self.queue_dir(dead_letter)):
            parsed = parse_entry(name)
            if not parsed:
                continue
            try:
                os.rename(os.path.join(self.queue_dir(dead_letter), name),
                          self.ready_path(queue, parsed[0]))
                moved.append(parsed[0])
            except FileNotFoundError:
                continue
        return moved

    def list_ready(self, queue: str, known=()) -> list[tuple[str, int]]:
        """(id, deliveries) of a queue's ready messages (to rebuild an index, never per fetch).

        Names in `known` (ids of never-delivered messages the caller has: such an entry's name
        is its id) are skipped unparsed, which halves a re-listing of a deep queue.
        """
        try:
            names = os.listdir(self.queue_dir(queue))
        except FileNotFoundError:
            return []
        return [parsed for name in names if name not in known and (parsed := parse_entry(name))]

    def list_delayed(self, known=()) -> list[tuple[float, str, str, int]]:
        """(due, queue, id, deliveries) of every message in delay/ (at start and to self-heal).

        Entries whose (queue, id, deliveries) is in `known` are skipped without a stat: the
        mover already times them, and re-reads the due time before it moves one anyway.
        """
        entries = []
        with os.scandir(self.folder("delay")) as it:
            for entry in it:
                parts = self.split_name(entry.name)
                if not parts or parts in known:
                    continue
                try:
                    entries.append((entry.stat().st_mtime, *parts))
                except FileNotFoundError:
                    continue
        return entries

    # -- de-duplication keys: symlinks named by the key's digest, pointing at the id ------

    def dedup_lookup(self, queue: str, key: str, window: float, now: float) -> str | None:
        """The id recorded for a key within the window, or None."""
        path = self.dedup_path(queue, key)
        try:
            if os.lstat(path).st_mtime + window < now:
                return None
            return os.readlink(path)
        except FileNotFoundError:
            return None

    def dedup_record(self, queue: str, key: str, message_id: str, window: float,
                     now: float) -> str | None:
        """Record key -> id atomically; return None when recorded, else the id recorded first."""
        return self.dedup_record_digest(queue, dedup_digest(key), message_id, window, now)

    def dedup_record_digest(self, queue: str, digest: str, message_id: str, window: float,
                            now: float) -> str | None:
        """dedup_record for a key known only by its digest (a staged file's 'dk' header)."""
        path = self.dedup_digest_path(queue, digest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for _ in range(3):
            try:
                os.symlink(message_id, path)
                return None
            except FileExistsError:
                try:
                    if os.lstat(path).st_mtime + window >= now:
                        return os.readlink(path)
                    os.unlink(path)  # Expired: the key may be used again.
                except FileNotFoundError:
                    pass
        raise Unavailable("de-duplication key is contended; retry")

    def dedup_forget(self, queue: str, digest: str, message_id: str) -> None:
        """Drop a key record that points at a message which was never acknowledged."""
        path = os.path.join(self.root, "dedup", queue, digest)
        try:
            if os.readlink(path) == message_id:
                os.unlink(path)
        except OSError:
            pass

    def dedup_sweep(self, window_of) -> int:
        """Unlink key records older than their queue's window (window_of(queue) seconds)."""
        count, now = 0, time.time()
        for queue in os.listdir(self.folder("dedup")):
            folder = os.path.join(self.folder("dedup"), queue)
            window = window_of(queue)
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        if entry.stat(follow_symlinks=False).st_mtime + window < now:
                            os.unlink(entry.path)
                            count += 1
                    except FileNotFoundError:
                        continue
        return count

    # -- notices: how a writer that no daemon hears (a Spark driver elsewhere) is noticed --

    def post_notice(self, queue: str | None = None) -> bool:
        """Replace a notice file with a new token, after the messages it announces are flushed;
        False when it could not be written (a full disk: the messages are in place all the same).

        Not fsynced: a notice lost in a crash is not needed, a daemon lists its folders at start.
        """
        path = self.notice_path(queue)
        temp = f"{os.path.dirname(path)}/.{new_id()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)  # A root older than notices/.
            with open(temp, "w") as f:
                f.write(new_id())
            os.replace(temp, path)
            return True
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass
            return False

    def sweep_notice_temps(self, min_age: float = 3600.0) -> int:
        """Unlink temporary files of notices older than min_age seconds (a writer died between
        creating one and renaming it); return how many."""
        count, now = 0, time.time()
        try:
            with os.scandir(self.folder("notices")) as it:
                for entry in it:
                    if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                        try:
                            if entry.stat().st_mtime + min_age < now:
                                os.unlink(entry.path)
                                count += 1
                        except FileNotFoundError:
                            continue
        except FileNotFoundError:
            pass
        return count

    def read_notice(self, queue: str | None = None) -> str | None:
        """The token a notice file holds now: '' when none was posted, None when it cannot be
        read now (callers take that as "no change").

        Opening the file, not stat, is what an NFS client revalidates (close-to-open).
        """
        try:
            with open(self.notice_path(queue)) as f:
                return f.read()
        except FileNotFoundError:
            return ""
        except OSError:
            return None

    # -- properties -------------------------------------------------------------------------

    def write_json(self, path: str, value) -> None:
        """Replace a small JSON file durably: write a temp file, fsync, rename, fsync folder."""
        temp = f"{path}.{new_id()}.tmp"
        with open(temp, "wb") as f:
            f.write(orjson.dumps(value))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
        fsync_dir(os.path.dirname(path))

    def delete_file(self, path: str) -> bool:
        """Unlink a small metadata file durably; False when it did not exist."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        fsync_dir(os.path.dirname(path))
        return True

    def clean_new(self, min_age: float = 0.0) -> int:
        """Move files left in new/ by a crash (older than min_age seconds) to remove/.

        They were never acknowledged; a de-duplication key recorded for one is dropped so a
        retry of that add is stored, not answered with an id that was never delivered.
        """
        moved = 0
        cutoff = time.time() - min_age
        with os.scandir(self.folder("new")) as it:
            for entry in it:
                try:
                    if min_age and entry.stat().st_mtime > cutoff:
                        continue
                    parts = self.split_name(entry.name)
                    if parts:
                        with open(entry.path, "rb") as f:
                            head = f.read(4096)
                        try:
                            digest = decode_message(parts[0], parts[1], head).dedup_digest
                        except Exception:
                            digest = ""
                        if digest:
                            self.dedup_forget(parts[0], digest, parts[1])
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


# -- the Spark pipeline's view of a root (docs/PIPELINE.md) --------------------------------
# Functions rather than Store methods so that this section stands apart from the daemon's.

#: Folder where Spark write tasks stage message files until their job commits.
STAGE_FOLDER = "stage"
#: Marker file whose presence in a stage folder means "this job decided to commit".
COMMIT_MARKER = "COMMIT"
#: Folder of the Spark streaming reader's batch manifests, one sub-folder per consumer.
STREAMS_FOLDER = "streams"


@dataclass
class Entry:
    """A message found by a folder listing: its state, where it is, how often delivered."""

    state: str  # ready, delayed (added with a delay, never fetched) or in_flight
    queue: str
    id: str
    attempts: int
    path: str


def _in_shard(message_id: str, shard: tuple[int, int] | None) -> bool:
    # The last two hex digits of a v7 id are random, so shards come out even.
    return shard is None or int(message_id[34:36], 16) % shard[1] == shard[0]


def list_entries(store: Store, queues, shard: tuple[int, int] | None = None):
    """Yield an Entry for each ready, delayed and in-flight message of the queues; open none.

    shard=(i, n) keeps only ids whose last two hex digits modulo n are i. Each folder is
    listed once; a message that moves between the listings may be yielded twice (once per
    state) or not at all, so readers treat entries as hints and skip what is gone.
    """
    wanted = set(queues)
    for queue in sorted(wanted):
        folder = store.queue_dir(queue)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            if _in_shard(name[:36], shard) and (parsed := parse_entry(name)):
                yield Entry("ready", queue, parsed[0], parsed[1], os.path.join(folder, name))
    delay = store.folder("delay")
    for name in os.listdir(delay):
        queue, _, entry = name.rpartition(":")
        if queue in wanted and _in_shard(entry[:36], shard) and (parsed := parse_entry(entry)):
            yield Entry("in_flight" if parsed[1] else "delayed", queue, parsed[0], parsed[1],
                        os.path.join(delay, name))


def read_entry(entry: Entry) -> tuple[Message, float] | None:
    """(message, file mtime) of a listed entry, read whole; None when it moved or went.

    A message file is complete before it is renamed out of new/ and never rewritten, so a
    successful open always reads a whole message, even if the file is renamed meanwhile.
    """
    try:
        with open(entry.path, "rb") as f:
            data = f.read()
            mtime = os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None
    return decode_message(entry.queue, entry.id, data), mtime


def stage_folder(store: Store, job: str, task: str = "") -> str:
    """{root}/stage/{job}[/{task}]: where a Spark write job's task stages its files."""
    validate_id(job)
    if task:
        validate_id(task)
    return os.path.join(store.root, STAGE_FOLDER, job, task)


def staged_name(queue: str, message_id: str, delayed: bool, keyed: bool) -> str:
    """A staged file's name: two flag letters (r/d: ready/delayed, k/-: has a dedup key), '.', queue:id."""
    return f"{'d' if delayed else 'r'}{'k' if keyed else '-'}.{queue}:{message_id}"


def parse_staged(name: str) -> tuple[str, str, bool, bool] | None:
    """(queue, id, delayed, keyed) of a staged file's name; None when it is not one."""
    if len(name) < 4 or name[2] != "." or name[0] not in "rd" or name[1] not in "k-":
        return None
    queue, sep, message_id = name[3:].rpartition(":")
    if not sep or not is_id(message_id) or not QUEUE_PATTERN.fullmatch(queue):
        return None
    return queue, message_id, name[0] == "d", name[1] == "k"


def write_staged(store: Store, folder: str, name: str, data: bytes, due: float | None) -> str:
    """Create one staged file (exclusive create, whole write, due time as mtime); return its path.

    With sync=file the file is fsynced here; with sync=fs the task flushes once at its end.
    """
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        store.write_whole(fd, data, due)
    finally:
        os.close(fd)
    return path


def publish_staged(store: Store, folder: str, name: str,
                   parsed: tuple[str, str, bool, bool] | None = None) -> str | None:
    """Rename a staged file into its queue (or delay/ when delayed); return the folder it entered.

    The caller makes sure the queue exists (a delayed message needs it to become ready in);
    one deleted meanwhile is created again. None when the staged file is gone (another
    committer of the same job published it first). `parsed` is parse_staged(name), if known.
    """
    queue, message_id, delayed, _ = parsed or parse_staged(name)
    target = store.delay_path(queue, message_id) if delayed else store.ready_path(queue, message_id)
    source = os.path.join(folder, name)
    for _ in range(3):
        try:
            os.rename(source, target)
            return os.path.dirname(target)
        except FileNotFoundError:
            if not os.path.exists(source):
                return None
            store.create_queue(queue)  # False when another thread or process created it first.
    raise Unavailable(f"cannot publish {source}: queue {queue!r} keeps disappearing")


def list_stages(store: Store) -> list[tuple[str, str, float]]:
    """(job, folder, folder mtime) of every stage folder under the root."""
    base = os.path.join(store.root, STAGE_FOLDER)
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    found = []
    for job in names:
        folder = os.path.join(base, job)
        try:
            found.append((job, folder, os.stat(folder).st_mtime))
        except FileNotFoundError:
            continue
    return found


def mark_committing(store: Store, job: str, tasks: list[str]) -> None:
    """Record durably that a job's tasks' staged files are to be published (roll forward after a crash).

    The marker lists the task folders whose attempts succeeded; failed attempts' folders
    in the same job folder are never published.
    """
    folder = stage_folder(store, job)
    with open(os.path.join(folder, COMMIT_MARKER), "xb") as f:
        f.write(orjson.dumps(tasks))
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(folder)


def committing_tasks(folder: str) -> list[str] | None:
    """The task ids a stage folder's commit marker lists; None when it has none."""
    try:
        with open(os.path.join(folder, COMMIT_MARKER), "rb") as f:
            return orjson.loads(f.read())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError:
        return None  # Torn by a crash before its fsync: the job never decided to commit.


def stream_folder(store: Store, consumer: str) -> str:
    """{root}/streams/{consumer}: the batch manifests of one streaming consumer."""
    return os.path.join(store.root, STREAMS_FOLDER, validate_queue(consumer))


def manifest_path(store: Store, consumer: str, seq: int) -> str:
    """The manifest of a consumer's micro-batch `seq`: the (queue, id, delivery) it claimed."""
    return os.path.join(stream_folder(store, consumer), f"{int(seq):012d}.json")


def list_manifests(store: Store, consumer: str) -> list[int]:
    """The batch numbers of a consumer's manifests, in order."""
    try:
        names = os.listdir(stream_folder(store, consumer))
    except FileNotFoundError:
        return []
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def daemon_run_dirs(store: Store) -> list[str]:
    """The run/ folders of the daemons that use this root (their ZeroMQ sockets live there)."""
    try:
        return [os.path.join(store.run_dir(), n) for n in sorted(os.listdir(store.run_dir()))]
    except FileNotFoundError:
        return []
