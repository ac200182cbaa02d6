"""QueueBytes: the bytes of each queue's message files, as its fetch actor sees them change.

A queue's figure is the size of its message files (header and body, as stored): ready,
in flight, and back from a delivery with a delay. It is scanned once, when the fetch actor
first indexes the queue (its folder and its entries in delay/), then kept without listing:
a message that becomes ready for the first time (a "ready" note, or a re-listing that finds
it) adds its file's size, and an ack, delete, retention expiry or nack into the dead-letter
queue subtracts it (a redrive: `taken`, with the size the redriving actor read). A delayed
add counts from when it falls due. A dead letter that keeps
its delivery count (its dead-letter queue has retry -1) is not told apart from a message
back from a delivery, so it counts from the dead-letter queue's next scan. What no note
reaches this actor about (a message the mover moves to a dead-letter queue, one the reaper's
retention sweep or another daemon sharing the root removed) stays counted until the next
scan. A scan: the queue indexed again (a relist after an actor restart, a purge); and while
its index is empty, at most every HEAL_SECONDS, its figure is set to the bytes of its
deliveries in delay/ (`heal`).
"""

import os
import time
from collections import OrderedDict

from mq.store.names import parse_entry, split_name

#: Seconds between two corrections of the figures of the queues with none ready.
HEAL_SECONDS = 10.0
#: Seconds a listing of delay/, grouped by queue, serves the scans of other queues: the first
#: statistics index every owned queue at once, and delay/ is shared by all of them.
DELAY_LISTING_SECONDS = 1.0
#: Sizes of messages handed out remembered for their ack (newest kept): the ack then needs no
#: stat of the file (a round trip on a network file system).
MAX_HANDED_SIZES = 65536


def file_size(path: str) -> int:
    """A file's size, 0 when it is gone (taken by a peer, or reaped)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class QueueBytes:
    """Per queue, the bytes of its message files; changed only through these methods."""

    def __init__(self, store) -> None:
        self.store = store
        self.totals: dict[str, int] = {}
        self._delayed: dict[str, int] = {}
        self._delayed_at = -DELAY_LISTING_SECONDS
        self._healed_at = time.monotonic()
        self._handed: OrderedDict[tuple[str, str], int] = OrderedDict()

    def __contains__(self, queue: str) -> bool:
        return queue in self.totals

    def of(self, queue: str) -> int:
        """The queue's bytes (0 when it was never scanned)."""
        return self.totals.get(queue, 0)

    def scan(self, queue: str) -> None:
        """Count the queue's files from scratch: its folder and its deliveries in delay/."""
        total = 0
        try:
            with os.scandir(self.store.queue_dir(queue)) as it:
                for entry in it:
                    if parse_entry(entry.name):
                        total += self._size(entry)
        except FileNotFoundError:
            pass
        self.totals[queue] = total + self._delayed_bytes().get(queue, 0)

    def heal(self, empty: list[str]) -> None:
        """Set the figure of each queue whose index is empty to the bytes of its deliveries in
        delay/ (what a dead-lettering or another daemon took stays counted until then); at
        most every HEAL_SECONDS, with one listing of delay/ for them all."""
        empty = [queue for queue in empty if queue in self.totals]
        if not empty or time.monotonic() - self._healed_at < HEAL_SECONDS:
            return
        self._healed_at = time.monotonic()
        found = self._list_delayed(set(empty))
        for queue in empty:
            self.totals[queue] = found.get(queue, 0)

    def _delayed_bytes(self) -> dict[str, int]:
        """queue -> bytes of its entries in delay/ that were delivered (a delayed add, never
        delivered, counts when it falls due), from a listing at most a second old."""
        if time.monotonic() - self._delayed_at >= DELAY_LISTING_SECONDS:
            self._delayed, self._delayed_at = self._list_delayed(None), time.monotonic()
        return self._delayed

    def _list_delayed(self, queues: set[str] | None) -> dict[str, int]:
        """queue -> bytes of its delivered entries in delay/, for these queues (None: all)."""
        found: dict[str, int] = {}
        try:
            with os.scandir(self.store.folder("delay")) as it:
                for entry in it:
                    parts = split_name(entry.name)
                    if parts and parts[2] > 0 and (queues is None or parts[0] in queues):
                        found[parts[0]] = found.get(parts[0], 0) + self._size(entry)
        except FileNotFoundError:
            pass
        return found

    @staticmethod
    def _size(entry: os.DirEntry) -> int:
        """An entry's size, 0 when it went meanwhile."""
        try:
            return entry.stat().st_size
        except OSError:
            return 0

    def became_ready(self, queue: str, message_id: str, attempts: int,
                     size: int | None = None) -> None:
        """A message entered the queue's index: a first-time ready one adds its size (the
        size its writer told, else its file's)."""
        if attempts == 0 and queue in self.totals:
            self.totals[queue] += size if size is not None else \
                file_size(self.store.ready_path(queue, message_id))

    def handed(self, queue: str, message_id: str, size: int) -> None:
        """A message of `size` bytes was handed out: its ack or delete takes that size."""
        self._handed[(queue, message_id)] = size
        if len(self._handed) > MAX_HANDED_SIZES:
            self._handed.popitem(last=False)

    def removed(self, queue: str, message_id: str) -> None:
        """A message of the queue was just renamed into remove/: its size leaves the figure."""
        size = self._handed.pop((queue, message_id), None)
        if size is not None:
            self.taken(queue, size)
        else:
            self.moved_out(queue, self.store.remove_path(queue, message_id))

    def moved_out(self, queue: str, path: str) -> None:
        """A message of the queue was just renamed to path (remove/, a dead-letter queue)."""
        if queue in self.totals:
            self.totals[queue] = max(0, self.totals[queue] - file_size(path))

    def taken(self, queue: str, size: int) -> None:
        """A message of `size` bytes left the queue (a redrive moved it out)."""
        if queue in self.totals:
            self.totals[queue] = max(0, self.totals[queue] - size)

    def forget(self, queue: str) -> None:
        """Drop the queue's figure (deleted, purged, or relisted): the next index scans it."""
        self.totals.pop(queue, None)
        self._delayed_at = -DELAY_LISTING_SECONDS  # Its deliveries may have left delay/.

    def queues(self) -> set[str]:
        """The queues a handed-out message's size is remembered of."""
        return {queue for queue, _ in self._handed}

    def forget_handed(self, gone: set[str]) -> None:
        """Drop the sizes remembered of messages of queues that are gone: one handed out and
        never acked (nacked, dead-lettered by the mover) stays until it is pushed out."""
        for key in [key for key in self._handed if key[0] in gone]:
            del self._handed[key]
