"""Deliveries: the fetch actor's memory of the messages it handed out lately.

A DELETE of a message in flight tries the name of its last delivery first instead of probing
every name it may have. It is a hint, never the truth: the files are (docs/FORMAT.md).

A lookup by id probes the names of up to MAX_DELIVERIES deliveries; a message of a queue that
redelivers forever (retry -1) can have more. Those few are remembered apart, never dropped for
room: from the claims this actor made, and from a listing of delay/ (names only) when a lookup
missed and none was made for FAR_LIST_SECONDS (at most one per actor start, as a rule: the
daemon's own claims are recorded; a claim by another writer is listed).
"""

import time
from collections import OrderedDict

from mq.delivery import MAX_DELIVERIES

#: Deliveries remembered, newest kept.
MAX_HANDED = 65536
#: Least seconds between two listings of delay/ for the messages past MAX_DELIVERIES.
FAR_LIST_SECONDS = 10.0


class Deliveries:
    """(queue, id) -> the delivery number handed out last, at most MAX_HANDED of them, and
    every one past MAX_DELIVERIES."""

    def __init__(self, limit: int = MAX_HANDED):
        self._limit = limit
        self._handed: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._far: dict[tuple[str, str], int] = {}
        self._far_listed_at: float | None = None

    def __len__(self) -> int:
        return len(self._handed)

    def handed(self, queue: str, message_id: str, delivery: int) -> None:
        """Record a delivery just handed out; the oldest record goes past the limit."""
        self._handed[(queue, message_id)] = delivery
        if delivery > MAX_DELIVERIES:
            self._far[(queue, message_id)] = delivery
        if len(self._handed) > self._limit:
            self._handed.popitem(last=False)

    def settled(self, queue: str, message_id: str) -> int | None:
        """Forget a message that was acked or deleted; the delivery handed out last, if known."""
        self._far.pop((queue, message_id), None)
        return self._handed.pop((queue, message_id), None)

    def far(self, store, queue: str, message_id: str) -> int | None:
        """A delivery count past MAX_DELIVERIES the message had (its names are probed from
        it on), or None; delay/ is listed for them first when it was not lately."""
        key = (queue, message_id)
        if key not in self._far and (self._far_listed_at is None or
                                     time.monotonic() - self._far_listed_at >= FAR_LIST_SECONDS):
            self._far_listed_at = time.monotonic()
            self._far.update(store.queues.list_delivered_past(MAX_DELIVERIES))
        return self._far.get(key)

    def queues(self) -> set[str]:
        """The queues a delivery is remembered of."""
        return {queue for queue, _ in self._handed} | {queue for queue, _ in self._far}

    def forget(self, gone: set[str]) -> None:
        """Drop the deliveries of queues that are gone."""
        for key in [key for key in self._handed if key[0] in gone]:
            del self._handed[key]
        for key in [key for key in self._far if key[0] in gone]:
            del self._far[key]
