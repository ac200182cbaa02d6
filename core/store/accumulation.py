"""Accumulation windows: parts added to a queue with `accum` > 0, combined into one compound.

A window is a folder accum/{queue}/{name} (docs/FORMAT.md, "Accumulation"). Its name says its
stage: `{close_ms}` (open: parts are renamed into it until that Unix millisecond),
`{cid}.closing` (closed: no part can enter; being combined into compound `cid`) and `{cid}.done`
(combined: holds the compound file `{cid}` beside its parts). Each step is one rename, so a
window left at any stage by a crash is finished by settle_window without losing or repeating a
part: the rename to `.done` is the commit point, and only a `.done` window's compound is
published.
"""

import os
import time

import msgpack

from mq.errors import Unavailable
from mq.ids import is_id, new_id
from mq.store.changes import Changes, Flush, tracked
from mq.store.disk import Disk
from mq.store.message import CorruptMessage, Message, decode_message, encode_message
from mq.store.names import is_queue
from mq.store.queues import Queues
from mq.store.root import Root
from mq.store.windows import CLOSING, DONE, window_name, window_stage

#: The content type a compound message is stored with: its body is the msgpack rendering.
COMPOUND_CONTENT_TYPE = "application/msgpack"
#: Attempts of an add to rename its part into an open window before it answers 503.
PART_ATTEMPTS = 3


def encode_compound(parts: list[Message], compound_id: str, created_ms: int) -> bytes:
    """The file of a compound message: header `p` = number of parts, body a msgpack array of
    [content type, body] pairs in the order the parts were added."""
    body = msgpack.packb([[p.content_type, p.body] for p in parts], use_bin_type=True)
    return encode_message(body, COMPOUND_CONTENT_TYPE, created_ms, compound_id, parts=len(parts))


def decode_compound(body: bytes) -> list[tuple[str, bytes]]:
    """The (content type, body) parts of a compound message's body."""
    return [(ct, data) for ct, data in msgpack.unpackb(body, raw=False)]


class Accumulation:
    """Adding parts to windows and turning closed windows into compounds: a member of Store
    (store.accumulation), given the root's paths, its Disk, its timed flush and its queues."""

    def __init__(self, paths: Root, disk: Disk, flush: Flush, queues: Queues):
        self.paths = paths
        self.disk = disk
        self.flush = flush
        self.queues = queues

    def add_part(self, queue: str, part_id: str, accum: float,
                 changes: Changes | None = None) -> tuple[str, bool]:
        """Rename a part written into new/ into the queue's open window; return (window name,
        True when this add opened the window).

        A window the mover closed between the choice and the rename is gone by then (closing
        renames it), so the rename fails and the add chooses again: a part never enters a
        window that is being combined.
        """
        source = self.paths.new_path(queue, part_id)
        self.queues.admit(queue, source)
        for _ in range(PART_ATTEMPTS):
            name = window_name(accum, time.time())
            if not os.path.isdir(self.paths.accum_dir(queue)):
                self.disk.mkdir(self.paths.accum_dir(queue))
            opened = self.disk.mkdir(self.paths.window_dir(queue, name))
            try:
                self.disk.rename(source, self.paths.part_path(queue, name, part_id))
                tracked(changes).renamed(source, self.paths.part_path(queue, name, part_id))
                return name, opened
            except FileNotFoundError:
                if not os.path.exists(source):
                    raise
        raise Unavailable(f"accumulation windows of queue {queue!r} keep closing; retry")

    def unlink_part(self, queue: str, window: str, part_id: str,
                    changes: Changes | None = None) -> None:
        """Unlink a part of a failed batch from its open window, before the batch's flush.

        An unlink, not a rename to remove/, so that a disk refusing renames (the usual reason
        a batch fails) can still take it back. FileNotFoundError when the mover closed the
        window meanwhile: the part is then in its compound (at least once).
        """
        self.disk.unlink(self.paths.part_path(queue, window, part_id))
        tracked(changes).changed(self.paths.part_path(queue, window, part_id))

    def remove_part(self, queue: str, window: str, part_id: str,
                    changes: Changes | None = None) -> None:
        """Move a part whose add was not acknowledged from its window to remove/."""
        source, target = self.paths.part_path(queue, window, part_id), self.paths.remove_path(queue, part_id)
        try:
            self.disk.rename(source, target)
        except FileNotFoundError:
            return  # Its window closed meanwhile: the part is delivered (at least once).
        tracked(changes).renamed(source, target)

    def list_windows(self) -> list[tuple[str, str]]:
        """(queue, window name) of every window in accum/ (the mover's start and rescans)."""
        found: list[tuple[str, str]] = []
        for queue in os.listdir(self.paths.folder("accum")):
            if not is_queue(queue):
                continue
            try:
                found.extend((queue, name) for name in os.listdir(self.paths.accum_dir(queue))
                             if window_stage(name))
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def window_changed_at(self, queue: str, name: str) -> float:
        """When a window's folder last changed (renamed, or a file made in it); 0 when gone."""
        try:
            info = os.stat(self.paths.window_dir(queue, name))
        except FileNotFoundError:
            return 0.0
        return max(info.st_mtime, info.st_ctime)

    def settle_window(self, queue: str, name: str) -> tuple[str, int | None] | None:
        """Close, combine and publish a due window, from whatever stage it is at; return
        (compound id, parts; None when combined before a crash) once the compound is ready in
        its queue, None when there was nothing to publish (an empty window, or one settled
        before)."""
        found = window_stage(name)
        if found is None:
            return None
        stage, value = found
        if stage == "open":
            value = new_id()
            try:
                self.disk.rename(self.paths.window_dir(queue, name),
                                 self.paths.window_dir(queue, value + CLOSING))
            except FileNotFoundError:
                return None
            stage = "closing"
        parts = self.combine(queue, value) if stage == "closing" else None
        if parts == 0:
            return None
        return (value, parts) if self.publish_compound(queue, value) else None

    def combine(self, queue: str, compound_id: str) -> int:
        """Write a closing window's parts as one compound into its folder, durably, then rename
        the folder to `.done` (the commit); return the number of parts (0: nothing to combine,
        the empty window is removed)."""
        folder = self.paths.window_dir(queue, compound_id + CLOSING)
        try:
            names = sorted(n for n in os.listdir(folder) if is_id(n) and n != compound_id)
        except FileNotFoundError:
            return 0  # A peer's mover got here first.
        compound = self.paths.part_path(queue, compound_id + CLOSING, compound_id)
        if os.path.exists(compound):
            self.disk.unlink(compound)  # Half written before a crash: never committed.
        parts = []
        for part_id in names:
            path = os.path.join(folder, part_id)
            with open(path, "rb") as f:
                data = f.read()
            try:
                parts.append(decode_message(queue, part_id, data))
            except CorruptMessage:
                self.disk.rename(path, self.paths.corrupt_path(queue, part_id, 0))
        if not parts:
            self.disk.rename(folder, self.paths.trash_path(queue, "accum"))
            self.flush({self.paths.accum_dir(queue), self.paths.folder("remove"),
                        self.paths.folder("corrupt")})
            return 0
        self.disk.create(compound, encode_compound(parts, compound_id, int(time.time() * 1000)))
        self.flush({folder, self.paths.accum_dir(queue), self.paths.folder("corrupt")})
        self.disk.rename(folder, self.paths.window_dir(queue, compound_id + DONE))
        self.flush({self.paths.accum_dir(queue)})
        return len(parts)

    def publish_compound(self, queue: str, compound_id: str) -> bool:
        """Rename a combined window's compound into its queue (made if missing), flush, then
        move the window with its parts to remove/; False when the compound was published
        before (a crash came before the window's removal)."""
        folder = self.paths.window_dir(queue, compound_id + DONE)
        published = False
        try:
            if not self.queues.queue_exists(queue):
                self.queues.create_queue(queue)
            self.disk.rename(self.paths.part_path(queue, compound_id + DONE, compound_id),
                             self.paths.ready_path(queue, compound_id))
            published = True
            self.flush({folder, self.paths.queue_dir(queue)})
        except FileNotFoundError:
            pass
        try:
            self.disk.rename(folder, self.paths.trash_path(queue, "accum"))
        except FileNotFoundError:
            pass
        # Not flushed: a window found again after a crash has no compound left to publish.
        return published
