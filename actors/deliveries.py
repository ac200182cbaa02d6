"""Deliveries: the fetch actor's memory of the messages it handed out lately.

A DELETE of a message in flight tries the name of its last delivery first instead of probing
every name it may have. It is a hint, never the truth: the files are (docs/FORMAT.md).
"""

from collections import OrderedDict

#: Deliveries remembered, newest kept.
MAX_HANDED = 65536


class Deliveries:
    """(queue, id) -> the delivery number handed out last, at most MAX_HANDED of them."""

    def __init__(self, limit: int = MAX_HANDED):
        self._limit = limit
        self._handed: OrderedDict[tuple[str, str], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._handed)

    def handed(self, queue: str, message_id: str, delivery: int) -> None:
        """Record a delivery just handed out; the oldest record goes past the limit."""
        self._handed[(queue, message_id)] = delivery
        if len(self._handed) > self._limit:
            self._handed.popitem(last=False)

    def settled(self, queue: str, message_id: str) -> int | None:
        """Forget a message that was acked or deleted; the delivery handed out last, if known."""
        return self._handed.pop((queue, message_id), None)


    def queues(self) -> set[str]:
        """The queues a delivery is remembered of."""
        return {queue for queue, _ in self._handed}

    def forget(self, gone: set[str]) -> None:
        """Drop the deliveries of queues that are gone."""
        for key in [key for key in self._handed if key[0] in gone]:
            del self._handed[key]
