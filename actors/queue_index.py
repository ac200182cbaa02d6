"""The fetch actor's in-memory view of the ready messages of its queues.

`QueueIndex` is one queue's, oldest first; `ReadyIndexes` holds them, lists a queue's folder
when its index is missing or empty and stale, and merges what the notices of other writers
announce. Both change only through their own methods.
"""

import heapq
import random
import time
from collections.abc import Callable

from mq.actors.queue_bytes import QueueBytes
from mq.ids import id_floor
from mq.supervisor import heartbeat

#: Seconds between re-listings of a queue whose index ran empty (lost notifications, peers,
#: other writers on the root such as the Spark data source).
RELIST_EMPTY_SECONDS = 0.5
#: Seconds between reads of the notice files of the queues indexed: a writer no daemon hears
#: (a Spark driver on another host) posts one after each commit.
NOTICE_SECONDS = 0.5
#: A folder whose mtime is this recent (ns) may have changed again unseen: directory times
#: move in clock ticks, so a rename in the tick of a listing leaves the listed mtime as it was.
COARSE_MTIME_NS = 50_000_000
#: Seconds between listings of queues/ once every owned queue is indexed (for statistics).
STATS_LIST_SECONDS = 5.0


def listing_floor() -> str:
    """What every id made after now sorts after (ids carry their Unix millisecond): taken at
    the end of a listing, which found none of them."""
    return id_floor(time.time_ns() // 1_000_000 + 1)


class QueueIndex:
    """Ready messages of one queue, oldest first, as id -> deliveries so far.

    Ids are v7 UUIDs, so string order is creation order. Entries may be stale (removed or
    taken by a peer): the claim's rename then fails with ENOENT and the caller asks again.
    """

    def __init__(self, entries: list[tuple[str, int]], changed_ns: int | None = None):
        self.members: dict[str, int] = dict(entries)
        self.heap = list(self.members)
        heapq.heapify(self.heap)
        self.listed_at = time.monotonic()
        self.changed_ns = changed_ns  # The folder's mtime when listed.
        #: Every id made after the last listing of the folder ended sorts after this.
        self.listed_floor = listing_floor()

    def __len__(self) -> int:
        return len(self.members)

    def add(self, message_id: str, attempts: int = 0) -> None:
        """Add a ready message (a new one, or one back from delay/)."""
        if message_id not in self.members:
            heapq.heappush(self.heap, message_id)
        self.members[message_id] = attempts

    def listed(self) -> None:
        """Record that a listing of the folder just ended (added to the index already)."""
        self.listed_floor = listing_floor()

    def may_have_listed(self, message_id: str) -> bool:
        """Whether a listing may have found this message (made before the last one ended): its
        "ready" may then come after it was taken, or removed, from the index."""
        return message_id < self.listed_floor

    def oldest_ready(self, count: int, after: str | None = None) -> list[tuple[str, int]]:
        """Up to count of the oldest (id, deliveries), with ids after `after` when given."""
        ids = heapq.nsmallest(count, (i for i in self.members if after is None or i > after))
        return [(message_id, self.members[message_id]) for message_id in ids]

    def attempts(self, message_id: str) -> int | None:
        """Deliveries so far of a message the index holds, else None."""
        return self.members.get(message_id)

    def oldest(self) -> str | None:
        """The oldest ready id, or None; stale heap entries on top are dropped on the way."""
        while self.heap and self.heap[0] not in self.members:
            heapq.heappop(self.heap)
        return self.heap[0] if self.heap else None

    def discard(self, message_id: str) -> None:
        """Forget a message; its heap entry is dropped lazily when it reaches the top."""
        self.members.pop(message_id, None)

    def head(self) -> str | None:
        """The id of the oldest ready message, without taking it; None when there is none."""
        while self.heap and self.heap[0] not in self.members:
            heapq.heappop(self.heap)  # A discarded or taken entry, dropped lazily.
        return self.heap[0] if self.heap else None

    def drop_before(self, floor: str) -> list[tuple[str, int]]:
        """Forget and return the (id, deliveries) whose id sorts before `floor` (the oldest)."""
        dropped = []
        while self.heap and self.heap[0] < floor:
            message_id = heapq.heappop(self.heap)
            if message_id in self.members:
                dropped.append((message_id, self.members.pop(message_id)))
        return dropped

    def take(self, spread: int = 0) -> tuple[str, int] | None:
        """Remove and return the oldest (id, deliveries), or with spread > 0 one of the
        spread+1 oldest.

        The spread is the peers' fuzziness: daemons sharing a root rarely race for the
        same file when each picks at random among the oldest few.
        """
        candidates: list[str] = []
        while self.heap and len(candidates) <= spread:
            message_id = heapq.heappop(self.heap)
            if message_id in self.members and message_id not in candidates:
                candidates.append(message_id)
        if not candidates:
            return None
        chosen = candidates.pop(random.randrange(len(candidates))) if spread else candidates.pop(0)
        for other in candidates:
            heapq.heappush(self.heap, other)
        return chosen, self.members.pop(chosen)


class ReadyIndexes:
    """The QueueIndex of each queue a fetch actor has used, and the notice token each has seen.

    Once every owned queue is to be indexed (the statistics are watched), a queue created or
    purged is indexed at once and queues/ is listed every STATS_LIST_SECONDS.
    """

    def __init__(self, store, log) -> None:
        self.store = store
        self.log = log
        self._indexes: dict[str, QueueIndex] = {}
        self._notices: dict[str, str] = {}  # queue -> notice token its index has seen
        self._noticed_at = time.monotonic()
        self._owned_listed_at: float | None = None  # Set by the first index_owned().
        self.sizes = QueueBytes(store)  # Each indexed queue's bytes.

    def __len__(self) -> int:
        return len(self._indexes)

    def __iter__(self):
        return iter(list(self._indexes.items()))

    def remembered(self) -> set[str]:
        """The queues anything is kept about (an index or a notice token)."""
        return set(self._indexes) | set(self._notices)

    @property
    def every_owned(self) -> bool:
        """Whether every queue the actor owns is indexed (since the first statistics asked)."""
        return self._owned_listed_at is not None

    def known(self, queue: str) -> QueueIndex | None:
        """The queue's index if it has one, without listing."""
        return self._indexes.get(queue)

    def of(self, queue: str, sized: bool = True, posted: set[str] | None = None) -> QueueIndex:
        """The queue's index, built from its folder on first use or when empty and stale;
        with sized false its bytes are not counted (another fetch actor's queue); posted:
        the queues notices/ had a file of when listed before this (Notices.posted)."""
        index = self._indexes.get(queue)
        if index is None or (not index and self.may_have_more(queue, index)):
            # The notice is read before the listing, so one posted meanwhile is seen as new;
            # the folder's mtime likewise, so a change meanwhile is seen on the next fetch.
            self._notices[queue] = "" if posted is not None and queue not in posted else \
                self.store.notices.read(queue)
            changed = self.store.queues.queue_changed_ns(queue)
            if sized and queue not in self.sizes:
                self.sizes.scan(queue)  # Before the listing: an add between them counts once.
            listed = self.store.states.list_ready(queue)
            if index is not None:
                for message_id, attempts in listed:
                    self.sizes.became_ready(queue, message_id, attempts)
            index = self._indexes[queue] = QueueIndex(listed, changed)
        return index

    def may_have_more(self, queue: str, index: QueueIndex) -> bool:
        """Whether an empty index is listed again: RELIST_EMPTY_SECONDS after its listing, or
        at once when the folder changed since. A save actor's "ready" travels on another
        socket than the fetch a client sends once its add is answered, and may be read after
        that fetch; the folder's mtime has changed by then (one stat per such fetch)."""
        if time.monotonic() - index.listed_at > RELIST_EMPTY_SECONDS:
            return True
        changed = self.store.queues.queue_changed_ns(queue)
        return changed is not None and (changed != index.changed_ns
                                        or time.time_ns() - changed < COARSE_MTIME_NS)

    def watched(self, queue: str) -> QueueIndex | None:
        """The queue's index; listed first when it has none and every owned queue is indexed."""
        index = self._indexes.get(queue)
        if index is None and self.every_owned:
            index = self.of(queue)
        return index

    def forget(self, queue: str) -> None:
        """Drop the queue's index (deleted, purged, or asked for but missing)."""
        self._indexes.pop(queue, None)
        self._notices.pop(queue, None)
        self.sizes.forget(queue)

    def relist(self, queue: str, rescan: bool = False) -> int:
        """Add to a queue's index the ready messages its folder has and the index lacks; return
        how many names the listing did not skip. With `rescan`, its bytes are counted afresh."""
        index = self._indexes.get(queue)
        if index is None:
            return 0
        if rescan:
            self.sizes.scan(queue)  # Before the listing, which then adds no size of its own.
        found = self.store.states.list_ready(queue, known=index.members)
        for message_id, attempts in found:
            index.add(message_id, attempts)
            if not rescan:
                self.sizes.became_ready(queue, message_id, attempts)
        index.listed()
        return len(found)

    def relist_all(self) -> int:
        """relist() every indexed queue (a "ready" may have been lost); return what they found."""
        found = 0
        for queue in list(self._indexes):
            heartbeat.beat()  # A listing each: thousands of queues outlast --hang-timeout.
            found += self.relist(queue, rescan=True)
        return found

    def merge_noticed(self) -> None:
        """Re-list each indexed queue whose notice changed since it was listed."""
        if time.monotonic() - self._noticed_at < NOTICE_SECONDS:
            return
        self._noticed_at = time.monotonic()
        posted = self.store.notices.posted()
        for queue in list(self._indexes):
            heartbeat.beat()  # Working, not stuck, however many queues there are.
            # Most queues never get a notice: one listing instead of an open each.
            token = "" if posted is not None and queue not in posted else \
                self.store.notices.read(queue)
            if token is not None and token != self._notices.get(queue):
                self._notices[queue] = token
                self.relist(queue)
                self.log.debug("fetch.noticed", queue=queue, ready=len(self._indexes[queue]))

    def index_owned(self, owns: Callable[[str], bool]) -> None:
        """Index every queue the actor owns that has no index: each is listed once, then kept
        current by notifications; queues/ itself is listed every STATS_LIST_SECONDS."""
        now = time.monotonic()
        listed_at = self._owned_listed_at  # Not None once every owned queue is indexed.
        if listed_at is not None and now - listed_at < STATS_LIST_SECONDS:
            return
        self._owned_listed_at = now
        posted = self.store.notices.posted()  # One listing, not an open of each queue's.
        for queue in self.store.queues.list_queues():
            heartbeat.beat()  # Working, not stuck, however many queues there are.
            if queue not in self._indexes and owns(queue):
                self.of(queue, posted=posted)
