"""Reading a queue without consuming it: peek pages, each asking for ids after the last one seen."""

import time

from mq.ids import id_time_ms

#: The most messages one peek returns (the daemon's limit).
PAGE = 1000
#: How far behind the newest id a follower looks again, in milliseconds (see Follower).
LOOKBACK_MS = 2000


def ready_after(client, queue: str, after: str | None = None, page: int = PAGE):
    """Yield every message ready now whose id is above `after`, oldest first.

    Nothing is claimed: consumers may take any of them meanwhile. A page shorter than asked
    is not the end (a peek stops early at its byte cap, docs/DELIVERY.md "Batches"): the scan
    ends at an empty page, or at a short one that reached messages added LOOKBACK_MS after it
    began (a margin for the clocks of client and daemon), so a steady producer cannot keep it
    going.
    """
    horizon = time.time() * 1000 + LOOKBACK_MS
    while True:
        batch = client.peek(queue, max=page, after=after)
        yield from batch
        if not batch or (len(batch) < page and id_time_ms(batch[-1].id) > horizon):
            return
        after = batch[-1].id


def floor_id(ms: int) -> str:
    """The smallest id of a millisecond (ids start with their add time: mq.ids)."""
    digits = f"{max(ms, 0):012x}" + "0" * 20
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class Follower:
    """The new ready messages of a queue, each once, poll after poll.

    An id is given when an add starts, but the message becomes ready when its save actor's
    batch is flushed; with several save actors a later id can be ready first. So each poll
    peeks after the newest id seen minus LOOKBACK_MS, not after the newest id itself, and
    drops the ids it has already shown. A message ready later than that (a delayed one, or one
    that comes back after a failed delivery) is not shown.
    """

    def __init__(self, client, queue: str, lookback_ms: int = LOOKBACK_MS):
        self.client, self.queue, self.lookback_ms = client, queue, lookback_ms
        self.seen: dict[str, int] = {}  # id -> its milliseconds, for ids within the look-back
        self.newest_ms: int | None = None

    def poll(self):
        """Yield the messages ready now that no earlier poll yielded, oldest first."""
        after = None if self.newest_ms is None else floor_id(self.newest_ms - self.lookback_ms)
        for message in ready_after(self.client, self.queue, after):
            if message.id in self.seen:
                continue
            ms = id_time_ms(message.id)
            self.seen[message.id] = ms
            self.newest_ms = ms if self.newest_ms is None else max(self.newest_ms, ms)
            yield message
        if self.newest_ms is not None:
            horizon = self.newest_ms - self.lookback_ms
            self.seen = {key: ms for key, ms in self.seen.items() if ms >= horizon}
