"""Queues: a folder each under queues/, with their keys, properties and notice beside them."""

import os
import stat
import time
from collections.abc import Iterable

from mq.errors import NotFound
from mq.ids import id_time_ms, is_id
from mq.store.changes import Changes, Flush, tracked
from mq.store.disk import Disk
from mq.store.names import is_queue, parse_entry, split_name
from mq.store.root import Root
from mq.store.windows import window_stage

#: Seconds queues/'s mtime must be old for a listing to be kept: a change in the same tick of
#: the file system's clock would leave it as it was.
SETTLED_SECONDS = 1.0


class Queues:
    """Creating, listing, purging and deleting queues: a member of Store (store.queues), given
    the root's paths, its Disk, its timed flush and whether an add creates its queue."""

    def __init__(self, paths: Root, disk: Disk, flush: Flush, auto_create: bool):
        self.paths = paths
        self.disk = disk
        self.flush = flush
        #: Whether an add to a missing queue creates it (admit), or is refused.
        self.auto_create = auto_create
        #: queues/'s (inode, mtime) when last listed settled, and the names listed then.
        self._listed: tuple = ()

    def queue_changed_ns(self, queue: str) -> int | None:
        """The queue folder's mtime in ns (a message entering or leaving changes it), or None
        when there is no such queue."""
        try:
            return os.stat(self.paths.queue_dir(queue)).st_mtime_ns
        except FileNotFoundError:
            return None

    def queue_exists(self, queue: str) -> bool:
        """True when the queue's folder exists. Any error but its absence (a network file
        system away: ENOTCONN, EIO) is raised, to be answered 503: os.path.isdir would take
        it for a missing queue, a 404 to the consumers of a queue that exists."""
        try:
            return stat.S_ISDIR(os.stat(self.paths.queue_dir(queue)).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def create_queue(self, queue: str) -> bool:
        """Create a queue durably; False when it already existed."""
        return self.disk.mkdir(self.paths.queue_dir(queue))

    def admit(self, queue: str, source: str) -> None:
        """Make sure the queue a message written at `source` (in new/) is to enter exists:
        create it (auto-create), or, without auto-create, discard the file and raise NotFound."""
        if not self.queue_exists(queue):
            if not self.auto_create:
                self.disk.discard(source)
                raise NotFound(f"queue {queue!r} does not exist")
            self.create_queue(queue)

    def move_ready(self, queue: str, message_id: str, attempts: int, target: str,
                   changes: Changes | None = None) -> str:
        """Move a ready message (after `attempts` deliveries) into another queue's folder,
        ready there as new with its id; its new path. The target is created when missing, as
        an add's would be (NotFound without auto-create)."""
        if not self.queue_exists(target):
            if not self.auto_create:
                raise NotFound(f"queue {target!r} does not exist")
            self.create_queue(target)
        source = self.paths.ready_path(queue, message_id, attempts)
        moved = self.paths.ready_path(target, message_id)
        self.disk.rename(source, moved)
        tracked(changes).renamed(source, moved)
        return moved

    def list_queues(self) -> list[str]:
        """Names of all queues, in order. Kept while queues/ holds still (a queue made or
        removed changes its mtime) and was already SETTLED_SECONDS old when seen, so that a
        pass over 10,000 queues every second costs a stat, not a listing and a sort."""
        folder = self.paths.folder("queues")
        info = os.stat(folder)
        stamp = (info.st_ino, info.st_mtime_ns)
        if self._listed and self._listed[0] == stamp:
            return list(self._listed[1])
        names = sorted(n for n in os.listdir(folder) if is_queue(n))
        settled = time.time() - info.st_mtime >= SETTLED_SECONDS
        self._listed = (stamp, names) if settled else ()
        return list(names)

    def delete_queue(self, queue: str) -> int:
        """Remove a queue and its messages in every state; return how many were in flight.

        Its keys, properties and notice go first and its folder last, so a failure half-way
        leaves a queue that exists and a retry that finishes the work: a queue re-created
        later never inherits old properties or keys.
        """
        if not self.queue_exists(queue):
            raise NotFound(f"queue {queue!r} does not exist")
        paths = self.paths
        for leftover, what in ((paths.dedup_dir(queue), "dedup"), (paths.props_path(queue), "props"),
                               (paths.notice_path(queue), "notice"), (paths.accum_dir(queue), "accum")):
            try:
                self.disk.rename(leftover, self.paths.trash_path(queue, what))
            except FileNotFoundError:
                pass
        try:
            self.disk.rename(self.paths.queue_dir(queue), self.paths.trash_path(queue, "queue"))
        except FileNotFoundError:
            raise NotFound(f"queue {queue!r} does not exist") from None
        moved = self.remove_entries(queue, ("new", "delay"))
        self.flush({self.paths.folder(name) for name in
                    ("queues", "remove", "new", "delay", "props", "dedup", "notices", "accum")})
        return moved

    def purge_queue(self, queue: str, keys: bool = False) -> int:
        """Remove every message of a queue, ready, delayed or in flight; keep the queue, its
        properties and (unless `keys`) its de-duplication keys. Returns how many messages went
        (the ready ones and the parts of open windows are counted)."""
        if not self.queue_exists(queue):
            raise NotFound(f"queue {queue!r} does not exist")
        ready = len(os.listdir(self.paths.queue_dir(queue))) + self.purge_windows(queue)
        try:
            # One rename takes every ready message at once, however deep the queue.
            self.disk.rename(self.paths.queue_dir(queue), self.paths.trash_path(queue, "queue"))
        except FileNotFoundError:
            raise NotFound(f"queue {queue!r} does not exist") from None
        self.create_queue(queue)
        moved = self.remove_entries(queue, ("delay",))
        if keys:
            try:
                self.disk.rename(self.paths.dedup_dir(queue), self.paths.trash_path(queue, "dedup"))
            except FileNotFoundError:
                pass
        self.flush({self.paths.folder(name) for name in ("queues", "remove", "delay", "accum", "dedup")})
        return ready + moved

    def purge_windows(self, queue: str) -> int:
        """Move a queue's accumulation windows, with every part waiting in them, to remove/;
        return how many parts went."""
        parts = 0
        try:
            for name in os.listdir(self.paths.accum_dir(queue)):
                if window_stage(name):
                    parts += len([n for n in os.listdir(self.paths.window_dir(queue, name)) if is_id(n)])
            self.disk.rename(self.paths.accum_dir(queue), self.paths.trash_path(queue, "accum"))
        except FileNotFoundError:
            pass
        return parts

    def count_hidden(self, queue: str) -> tuple[int, int]:
        """(in flight, delayed) messages of a queue: its entries in delay/, by name alone."""
        in_flight = delayed = 0
        prefix = queue + ":"
        for name in os.listdir(self.paths.folder("delay")):
            if name.startswith(prefix) and (parts := split_name(name)) and parts[0] == queue:
                if parts[2]:
                    in_flight += 1
                else:
                    delayed += 1
        return in_flight, delayed

    def list_in_flight(self, queue: str) -> list[tuple[str, int]]:
        """(id, delivery) of a queue's in-flight messages, by the names in delay/."""
        prefix = queue + ":"
        return [(parts[1], parts[2]) for name in os.listdir(self.paths.folder("delay"))
                if name.startswith(prefix) and (parts := split_name(name))
                and parts[0] == queue and parts[2]]

    def list_delivered_past(self, count: int) -> dict[tuple[str, str], int]:
        """(queue, id) -> delivery of the messages in delay/ delivered more than `count` times,
        by name alone (what a lookup by id of such a message starts its probes from)."""
        return {(parts[0], parts[1]): parts[2] for name in os.listdir(self.paths.folder("delay"))
                if (parts := split_name(name)) and parts[2] > count}

    def listed_delivery(self, queue: str, message_id: str) -> int | None:
        """The delivery count in the name of a message in delay/ or in its queue's folder, by
        listing both (a lookup by id of a message past the probed counts, never per request
        of a daemon); None when neither holds it."""
        counts = [parts[2] for name in os.listdir(self.paths.folder("delay"))
                  if name.startswith(f"{queue}:{message_id}") and (parts := split_name(name))
                  and parts[:2] == (queue, message_id)]
        try:
            names = os.listdir(self.paths.queue_dir(queue))
        except FileNotFoundError:
            names = []
        counts += [parsed[1] for name in names
                   if name.startswith(message_id) and (parsed := parse_entry(name))
                   and parsed[0] == message_id]
        return max(counts, default=None)

    def remove_entries(self, queue: str, folders: Iterable[str]) -> int:
        """Move a queue's entries in shared folders (new/, delay/) to remove/; return how many."""
        moved = 0
        prefix = queue + ":"
        for folder in folders:
            for name in os.listdir(self.paths.folder(folder)):
                if name.startswith(prefix) and (parts := split_name(name)) and parts[0] == queue:
                    try:
                        self.disk.rename(os.path.join(self.paths.folder(folder), name),
                                         os.path.join(self.paths.folder("remove"), name))
                        moved += 1
                    except (FileNotFoundError, FileExistsError):
                        pass  # Moved by a peer deleting the same queue (EEXIST: same name).
        return moved

    def remove_expired(self, cutoffs: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """Move to remove/ every message, ready, delayed or in flight, whose id says it was
        created before its queue's cutoff (Unix ms); flush once.

        Returns (messages removed per queue, creation time in ms of the oldest message kept
        per queue). A message that moves meanwhile (claimed, acked, released) is left to the
        next pass, or to the fetch actor, which never hands out an expired message.
        """
        removed: dict[str, int] = {}
        oldest: dict[str, int] = {}
        changes = Changes()

        def consider(queue: str, message_id: str, source: str) -> None:
            created = id_time_ms(message_id)
            if created >= cutoffs[queue]:
                oldest[queue] = min(oldest.get(queue, created), created)
                return
            target = self.paths.remove_path(queue, message_id)
            try:
                self.disk.rename(source, target)
            except (FileNotFoundError, FileExistsError):
                return
            changes.renamed(source, target)
            removed[queue] = removed.get(queue, 0) + 1

        for queue in cutoffs:
            folder = self.paths.queue_dir(queue)
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            for name in names:
                if parsed := parse_entry(name):
                    consider(queue, parsed[0], os.path.join(folder, name))
        delay = self.paths.folder("delay")
        for name in os.listdir(delay):
            if (parts := split_name(name)) and parts[0] in cutoffs:
                consider(parts[0], parts[1], os.path.join(delay, name))
        if changes:
            self.flush(changes)
        return removed, oldest
