"""QueueIndex: the fetch actor's ordered in-memory view of one queue's ready messages."""

import heapq
import random
import time


class QueueIndex:
    """Ready ids of one queue, oldest first; ids are v7 UUIDs, so string order is time order.

    Entries may be stale (removed or taken by a peer): the claim's rename then fails with
    ENOENT and the caller asks for the next one.
    """

    def __init__(self, ids: list[str]):
        self.heap = list(set(ids))
        heapq.heapify(self.heap)
        self.members = set(self.heap)
        self.listed_at = time.monotonic()

    def __len__(self) -> int:
        return len(self.heap)

    def add(self, message_id: str) -> None:
        """Add a ready id (a new message, or one back from delay/)."""
        if message_id not in self.members:
            self.members.add(message_id)
            heapq.heappush(self.heap, message_id)

    def discard(self, message_id: str) -> None:
        """Forget an id; its heap entry is dropped lazily when it reaches the top."""
        self.members.discard(message_id)

    def take(self, spread: int = 0) -> str | None:
        """Remove and return the oldest id, or with spread > 0 one of the spread+1 oldest.

        The spread is the seed's peer fuzziness: daemons sharing a root rarely race for the
        same file when each picks at random among the oldest few.
        """
        candidates = []
        while self.heap and len(candidates) <= spread:
            message_id = heapq.heappop(self.heap)
            if message_id in self.members:
                candidates.append(message_id)
        if not candidates:
            return None
        chosen = candidates.pop(random.randrange(len(candidates))) if spread else candidates.pop(0)
        for other in candidates:
            heapq.heappush(self.heap, other)
        self.members.discard(chosen)
        return chosen
