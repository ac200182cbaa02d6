"""Spare files: the files of removed messages, kept to be written again as new messages.

Creating a file costs the file system an inode and a block, and unlinking one frees them;
ext4 without a journal even skips every inode freed in the last hours when it looks for a
free one, so on a busy root each create scans thousands of them (bench/RESULTS.md). A
message file taken from spare/ costs two renames and a write instead (docs/FORMAT.md,
"Spare files").
"""

import os
import random
import stat
import time

from mq.ids import new_id
from mq.store.changes import Flush
from mq.store.disk import Disk
from mq.store.recovery import QuietFolders
from mq.store.root import Root

#: Largest file kept, in bytes the file system allocated to it (st_blocks): one 4 KiB block,
#: so that --spare-files bounds the space spares hold (the default, 65,536: 256 MiB).
SPARE_MAX_BYTES = 4096
#: Seconds a removed file must have been left alone (its ctime: any rename, write or time set
#: moves it) before it is kept as a spare. A process that opened the file before its message
#: was removed (a slow writer whose add a queue deletion took, a claim setting a due time just
#: as a delete came) has that long to finish with its descriptor before another message's
#: bytes can be in the file.
GRACE_SECONDS = 2.0
#: Seconds a writer waits before listing spare/ again after a listing that found it empty.
LIST_SECONDS = 0.5
#: Seconds the reaper's count of spare files may go without a listing of spare/ (Spares.room).
RELIST_SECONDS = 5.0
#: Most names one writer takes from a listing: a random sample, so that writers sharing
#: spare/ rarely try the same one, and a listing of a full spare/ is paid once per that many.
TAKE_PER_LISTING = 10_000


class Spares:
    """Taking spare files for new messages, and the reaper's recycling of removed ones.

    A member of Store (store.spares), given the root's paths, its Disk and the store's timed
    flush: the names taken from the last listing of spare/ are this object's own state.
    """

    def __init__(self, paths: Root, disk: Disk, flush: Flush):
        self.paths = paths
        self.disk = disk
        self.flush = flush
        #: Names of the last listing of spare/ not tried yet; None: list again.
        self.listed: list | None = None
        #: When a listing last found spare/ empty (time.monotonic()).
        self.empty_at = float("-inf")
        #: The reaper's: name -> when a pass over remove/ first listed it (time.time()), for
        #: the names still there at the last pass.
        self.seen: dict[str, float] = {}
        #: The reaper's: when a pass last listed remove/ (time.monotonic()).
        self.listed_remove_at = float("-inf")
        #: The reaper's: spare/ holds at most this many files (Spares.room), listed at listed_at.
        self.spares_at_most = 0
        self.listed_at = float("-inf")
        #: The reaper's, without spares: remove/ and spare/ as last found empty.
        self.quiet = QuietFolders()

    def take(self) -> str | None:
        """The path of a spare file to try, None when spare/ was empty at a listing less than
        LIST_SECONDS ago.

        Another writer may take the same one first: Disk.reuse then says so and the caller
        asks again.
        """
        if self.disk.sync != "fs":
            return None  # Only sync=fs makes spares (recycle_removed).
        if not self.listed:
            now = time.monotonic()
            if now - self.empty_at < LIST_SECONDS:
                return None
            try:
                # Spares belong to the reaper's user: a writer running as another (a broker-less
                # one) could not write them, and would only unlink them one by one. A spare/
                # that is a link (made after the start's check of the root) names files that
                # are not the root's: taking one would move it in and write over it.
                info = os.lstat(self.paths.folder("spare"))
                mine = stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
                names = os.listdir(self.paths.folder("spare")) if mine else []
            except FileNotFoundError:
                names = []
            self.listed = random.sample(names, min(len(names), TAKE_PER_LISTING))
            if not self.listed:
                self.empty_at = now
                return None
        try:
            return self.paths.spare_path(self.listed.pop())
        except IndexError:
            return None  # Another thread of the writer took the last one (actors/overlap.py).

    def recycle_removed(self, limit: int, grace: float = GRACE_SECONDS) -> tuple[int, int]:
        """One pass of the reaper over remove/: (files moved to spare/, entries unlinked).

        A file is written again only once its removal is durable: the pass lists remove/,
        flushes, and only then renames what it listed, so that after a power cut a spare's
        new contents can never appear under the name of the message it held (docs/FORMAT.md).
        A file to keep that changed less than `grace` seconds ago is left for a later pass.
        Only with sync=fs: a folder fsync cannot make the rename that brought a file into
        remove/ durable in the folder it came from; otherwise (or with limit 0) remove/ is
        emptied and spares left by an earlier run are unlinked too. Files with another name
        (a hard link), over SPARE_MAX_BYTES, of another owner (a broker-less writer running as
        another user: this daemon may not write them) and beyond `limit` are unlinked;
        folders (deleted queues) are removed whole.
        """
        remove, spare = self.paths.folder("remove"), self.paths.folder("spare")
        if limit <= 0 or self.disk.sync != "fs":
            return 0, self.quiet.reap(remove, self.disk) + self.quiet.reap(spare, self.disk)
        if self.seen and time.monotonic() - self.listed_remove_at < grace:
            # What waits is looked at `grace` after its first listing, not before: the passes
            # between would only list it again (under load, remove/ holds the last `grace` of
            # removals, and each listing cost a few us a file).
            return 0, 0
        self.listed_remove_at = time.monotonic()
        files, unlinked = [], 0
        with os.scandir(remove) as it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        self.disk.remove_tree(entry.path)
                        unlinked += 1
                    else:
                        files.append(entry)
                except FileNotFoundError:
                    continue
        now = time.time()
        seen, self.seen = self.seen, {}
        if not files:
            return 0, unlinked
        room = self.room(limit, len(files), now)
        self.flush({remove})
        recycled, settled_before = 0, now - grace
        for entry in files:
            try:
                if room <= 0:
                    self.disk.unlink(entry.path)
                    unlinked += 1
                    continue
                # A file listed less than `grace` ago is not looked at: under load, remove/
                # holds the last `grace` seconds of removals, and a stat of each at every pass
                # was most of the reaper's work (bench/RESULTS.md, "Wake-ups and system calls
                # per operation").
                first_listed = seen.get(entry.name, now)
                if first_listed > settled_before:
                    self.seen[entry.name] = first_listed
                    continue
                info = entry.stat(follow_symlinks=False)
                if not (entry.is_file(follow_symlinks=False) and info.st_nlink == 1
                        and info.st_blocks * 512 <= SPARE_MAX_BYTES
                        and info.st_uid == os.geteuid()):
                    self.disk.unlink(entry.path)
                    unlinked += 1
                elif info.st_ctime > settled_before:
                    self.seen[entry.name] = first_listed  # Kept at a later pass.
                else:
                    self.disk.rename(entry.path, self.paths.spare_path(new_id()))
                    room -= 1
                    recycled += 1
            except FileNotFoundError:
                continue  # A peer daemon's reaper took it.
        self.spares_at_most += recycled
        return recycled, unlinked

    def room(self, limit: int, wanted: int, now: float) -> int:
        """How many files spare/ may still take: from a count of its files kept since its last
        listing (writers only take files out), listed again when that count might reach the
        limit or is RELIST_SECONDS old (a peer daemon's reaper adds files to the same spare/)."""
        if self.spares_at_most + wanted >= limit or now - self.listed_at >= RELIST_SECONDS:
            self.spares_at_most, self.listed_at = len(os.listdir(self.paths.folder("spare"))), now
        return limit - self.spares_at_most
