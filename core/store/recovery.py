"""Recovery: clean-up after a crash (files left in new/) and reaping what reaches remove/."""

import os
import time
from collections.abc import Callable

from mq.store.changes import Changes, Flush
from mq.store.dedup import DedupKeys
from mq.store.disk import Disk
from mq.store.message import CorruptMessage, decode_header
from mq.store.names import split_name
from mq.store.root import Root

#: Bytes of a file in new/ read to find its header (writer and de-duplication key).
HEADER_BYTES = 65536
#: Seconds after which the reaper moves a file of new/ that has no header of its own (its
#: writer died between taking or creating it and writing it) to remove/.
ABANDONED_SECONDS = 60.0
#: How much older than the stat that saw it a folder's mtime must be for an unchanged mtime
#: to mean that nothing entered it since: some file systems' mtimes are coarse, and JuiceFS
#: leaves a folder's mtime alone when it moved less than 100 ms before (--skip-dir-mtime).
SETTLED_MTIME_NS = 1_000_000_000
#: Seconds after which a folder found empty is listed again whatever its mtime says (a
#: network file system's client may answer a stat from attributes cached that long).
RELIST_EMPTY_SECONDS = 10.0


class Recovery:
    """Crash clean-up and reaping: a member of Store (store.recovery), given the root's paths,
    its Disk, its timed flush and its de-duplication keys (a leftover's key is dropped)."""

    def __init__(self, paths: Root, disk: Disk, flush: Flush, dedup: DedupKeys):
        self.paths = paths
        self.disk = disk
        self.flush = flush
        self.dedup = dedup

    def clean_new(self, min_age: float = 0.0, writer: str = "",
                  dead: Callable[[str], bool] | None = None) -> int:
        """Move files left in new/ by a crash to remove/; return how many.

        min_age: only files older than that many seconds (another daemon's adds in progress
        are younger). writer: only files that save actor wrote (its predecessor's, when it
        restarts). dead: only files whose writer dead(writer) says is gone, and files with no
        header of their own (empty, or a spare still holding another message's) untouched for
        ABANDONED_SECONDS: a writer writes right after it creates or takes a file. They were
        never acknowledged; a de-duplication key recorded for one is dropped so that a retry
        of that add is stored.
        """
        moved, changes = 0, Changes()
        now = time.time()
        with os.scandir(self.paths.folder("new")) as it:
            for entry in it:
                try:
                    info = entry.stat()
                    # ctime too: a spare taken from spare/ keeps its old message's mtime.
                    changed = max(info.st_mtime, info.st_ctime)
                    if min_age and changed > now - min_age:
                        continue
                    parts = split_name(entry.name)
                    header = new_header(entry.path, parts) if parts else {}
                    if writer and header.get("w") != writer:
                        continue
                    abandoned = not header and changed < now - ABANDONED_SECONDS
                    if dead is not None and not (abandoned or dead(header.get("w", ""))):
                        continue
                    if parts and header.get("dk"):
                        self.dedup.forget(parts[0], header["dk"], parts[1], changes)
                    target = os.path.join(self.paths.folder("remove"), entry.name)
                    self.disk.rename(entry.path, target)
                    changes.renamed(entry.path, target)
                    moved += 1
                except (FileNotFoundError, FileExistsError):
                    continue  # Moved by a peer's clean-up first (EEXIST: to the same name).
        if changes:
            self.flush(changes)
        return moved

    def reap(self) -> int:
        """Unlink everything in remove/."""
        return reap_folder(self.paths.folder("remove"), self.disk)


def new_header(path: str, parts: tuple[str, str, int]) -> dict:
    """The header of a file in new/, {} when it has none yet (a crash mid-write)."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    try:
        return decode_header(parts[0], parts[1], head)[0]
    except CorruptMessage:
        return {}


def reap_folder(path: str, disk: Disk) -> int:
    """Unlink every file in a folder, and remove its sub-folders (deleted queues) whole."""
    count = 0
    with os.scandir(path) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    disk.remove_tree(entry.path)
                else:
                    disk.unlink(entry.path)
                count += 1
            except FileNotFoundError:
                continue
    return count


class QuietFolders:
    """Folders the reaper found empty, with the mtime each had then: one whose mtime has not
    moved since is not listed again (one stat, often answered from the kernel's cache, where a
    listing is an open, two reads and a close, round trips on a network file system)."""

    def __init__(self) -> None:
        self._empty: dict[str, tuple[int, float]] = {}  # folder -> (mtime ns, listed at)

    def reap(self, path: str, disk: Disk) -> int:
        """reap_folder(path), unless it was found empty and has not changed since."""
        seen = self._empty.get(path)
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            mtime = None
        if seen is not None and mtime == seen[0] and time.monotonic() - seen[1] < RELIST_EMPTY_SECONDS:
            return 0
        count = reap_folder(path, disk)
        if count == 0 and mtime is not None and time.time_ns() - mtime >= SETTLED_MTIME_NS:
            self._empty[path] = (mtime, time.monotonic())
        else:
            self._empty.pop(path, None)
        return count
