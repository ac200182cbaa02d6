"""The on-disk format of an mq root (docs/FORMAT.md): one module an idea, one Store to use them.

names (queue and id grammar), message (the file's bytes), disk (writes and flushes), changes
(the folders an operation changed, flushed once by whoever answers for it), root (every
path), states (the renames of a message), queues, dedup, notices, recovery, staging and
streams (the Spark pipeline's files), listing (reading without claiming), accumulation
(windows and compound messages) and windows (their names), spares (removed messages' files
written again).
"""

from collections.abc import Iterable

import orjson

from mq.errors import MqError
from mq.flush_times import FlushTimes
from mq.store.accumulation import Accumulation
from mq.store.changes import Changes
from mq.store.dedup import DedupKeys
from mq.store.disk import SYNCHRONOUS_METADATA, Disk, choose_sync, mount_type
from mq.store.message import (
    DEFAULT_CONTENT_TYPE,
    MAGIC,
    CorruptMessage,
    Message,
    decode_message,
    dedup_digest,
    encode_message,
)
from mq.store.names import (
    MAX_QUEUE_NAME,
    QUEUE_PATTERN,
    RESERVED_NAMES,
    entry_name,
    parse_entry,
    split_name,
    validate_id,
    validate_queue,
)
from mq.store.notices import Notices
from mq.store.queues import Queues
from mq.store.recovery import Recovery, reap_folder
from mq.store.root import FOLDERS, FORMAT_VERSION, Root
from mq.store.spares import Spares
from mq.store.staging import Staging
from mq.store.states import MessageStates
from mq.store.streams import Streams

__all__ = [
    "DEFAULT_CONTENT_TYPE", "FOLDERS", "FORMAT_VERSION", "MAGIC", "MAX_QUEUE_NAME",
    "QUEUE_PATTERN", "RESERVED_NAMES", "Changes", "CorruptMessage", "Disk", "Message", "Root", "Store",
    "decode_message", "dedup_digest", "encode_message", "entry_name", "parse_entry",
    "reap_folder", "split_name", "validate_id", "validate_queue",
]


class Store(Root):
    """One mq root: its paths, the states of messages and every change made to it.

    sync: "fs" flushes a batch with one syncfs(2) of the root's file system; "file" fsyncs
    each file and each directory touched. Both flush before any reply (docs/FORMAT.md).
    "auto" picks "file" where syncfs may not reach stable storage (FUSE, NFS, CephFS...).
    disk: the Disk every change goes through (by default, a real one of that sync mode).

    The Store is its paths (Root) and holds its parts, each built here with what it uses (the
    paths, the one Disk, the timed flush, another part) and owning its own state
    (docs/ARCHITECTURE.md, "The store's parts"). Callers use the parts themselves
    (store.states.claim, store.queues.create_queue); the Store's own methods are what joins
    parts or needs none.
    """

    def __init__(self, root: str, sync: str = "auto", auto_create: bool = True,
                 disk: Disk | None = None):
        super().__init__(root)
        #: The file system kind --sync=auto looked at ("" when a mode was given).
        self.filesystem = ""
        if sync == "auto" and disk is None:
            sync, self.filesystem = choose_sync(root)
        if disk is None:
            disk = Disk(sync, synchronous_metadata=sync == "file"
                        and mount_type(root) in SYNCHRONOUS_METADATA)
        self._disk = disk
        self.sync = self._disk.sync
        #: How long each flush took: where a slow disk shows first (the stats op serves it).
        self.flush_times = FlushTimes()
        #: De-duplication keys (dedup/): recorded by adds, looked up, expired by the reaper.
        self.dedup = DedupKeys(self, self.disk)
        #: The notice files other writers post and the daemon's actors read (notices/).
        self.notices = Notices(self, self.disk)
        #: Removed messages' files kept in spare/, taken by write_new, refilled by the reaper.
        self.spares = Spares(self, self.disk, self.flush)
        #: The queues: their folders, purges and deletions, and whether an add creates one.
        self.queues = Queues(self, self.disk, self.flush, auto_create)
        #: The renames of a message between its states.
        self.states = MessageStates(self, self.disk, self.queues)
        #: Accumulation windows (accum/): their parts, and the compounds they close into.
        self.accumulation = Accumulation(self, self.disk, self.flush, self.queues)
        #: Crash clean-up of new/ and reaping of remove/.
        self.recovery = Recovery(self, self.disk, self.flush, self.dedup)
        #: The Spark write jobs' staged files (stage/) and their publishing.
        self.staging = Staging(self, self.disk, self.queues)
        #: The manifests of the pipeline's streaming reads (streams/).
        self.streams = Streams(self, self.disk)

    @property
    def disk(self) -> Disk:
        """The one Disk every part of this store changes the root through: given at
        construction and never replaced, since each part holds it."""
        return self._disk

    def init(self, make: bool = True, expect_id: str = "") -> str:
        """Create the folders, ID and FORMAT, or check an existing root; return its id
        (Root.create: make False never makes a root where there is none)."""
        return self.create(self.disk, make, expect_id)

    def flush_data(self) -> None:
        """Make the files written into new/ durable (contents and names) before they are
        renamed into view or a key names them."""
        with self.flush_times.timed():
            self.disk.flush_data(self.root, {self.folder("new")})

    def flush(self, dirs: Iterable[str]) -> None:
        """Make the given folders' entries (with sync=fs: every change) durable: a Changes
        that store operations filled, or the folders of a method that flushes itself."""
        with self.flush_times.timed():
            self.disk.flush(self.root, dirs)

    def write_new(self, queue: str, message_id: str, data: bytes, due: float | None) -> str:
        """Write a message file into new/ (a spare file when there is one, else a new one by
        exclusive create); return its path.

        With sync=file the file is fsynced here; with sync=fs the caller flushes the batch.
        A failed write leaves nothing behind; the OSError is the caller's to map.
        """
        path = self.new_path(queue, message_id)
        while (spare := self.spares.take()) is not None:
            if self.disk.reuse(spare, path, data, due):
                return path
        self.disk.create(path, data, due)
        return path

    def deliver_ready(self, queue: str, message_ids: list[str], changes: Changes) -> list:
        """states.deliver_new of messages written into new/ for one queue, each ready now: the
        same renames, the folders' paths made once and the change set told once. Each id's
        error (OSError or MqError) or None, in order; a failure leaves the others delivered."""
        states, rename = self.states, self.disk.rename
        new, ready = self.new_path(queue, ""), self.ready_path(queue, "")
        outcomes: list = []
        for message_id in message_ids:
            try:
                if queue in states.admitted:
                    try:
                        rename(new + message_id, ready + message_id)
                        outcomes.append(None)
                        continue
                    except (FileNotFoundError, NotADirectoryError):
                        states.admitted.discard(queue)  # Deleted since: admitted again below.
                states.deliver_new(queue, message_id, False, changes)
                outcomes.append(None)
            except (OSError, MqError) as err:
                outcomes.append(err)
        if None in outcomes:
            changes.renamed(new, ready)
        return outcomes

    def discard_new(self, queue: str, message_id: str, changes: Changes | None = None) -> None:
        """Take a never-acknowledged file out of new/: with sync=fs into remove/, where the
        reaper keeps it as a spare file, else (or when that rename fails) unlinked.

        An unlinked file frees its inode, and on ext4 without a journal every create near
        an inode freed in the last hours scans past it: a batch discarded under load (a 503)
        made the adds after it dearer, and so more of them late (bench/RESULTS.md, "The
        batch rounds that collapse").
        """
        source = self.new_path(queue, message_id)
        if self.disk.sync == "fs":
            target = self.remove_path(queue, message_id)
            try:
                self.disk.rename(source, target)
            except OSError:
                pass
            else:
                if changes is not None:
                    changes.renamed(source, target)
                return
        self.disk.discard(source)
        if changes is not None:
            changes.changed(source)

    def write_json(self, path: str, value: object) -> None:
        """Replace a small JSON file (properties, rules) durably."""
        self.disk.replace(path, orjson.dumps(value))

    def delete_file(self, path: str) -> bool:
        """Unlink a small metadata file durably; False when it did not exist."""
        try:
            self.disk.unlink(path)
        except FileNotFoundError:
            return False
        self.disk.fsync_dir(path.rpartition("/")[0])
        return True
