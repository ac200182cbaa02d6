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
