"""QueueIndex: the fetch actor's ordered in-memory view of one queue's ready messages."""

import heapq
import random
import time


class QueueIndex:
    """Ready messages of one queue, oldest first, as id -> deliveries so far.

    Ids are v7 UUIDs, so string order is creation order. Entries may be stale (removed or
    taken by a peer): the claim's rename then fails with ENOENT and the caller asks again.
    """

    def __init__(self, entries: list[tuple[str, int]]):
        self.members: dict[str, int] = dict(entries)
        self.heap = list(self.members)
        heapq.heapify(self.heap)
        self.listed_at = time.monotonic()
        self.changed_ns: int | None = None  # The folder's mtime when listed (FetchActor).

    def __len__(self) -> int:
        return len(self.members)

    def add(self, message_id: str, attempts: int = 0) -> None:
        """Add a ready message (a new one, or one back from delay/)."""
        if message_id not in self.members:
            heapq.heappush(self.heap, message_id)
        self.members[message_id] = attempts

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
        candidates = []
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
