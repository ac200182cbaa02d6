"""Fetching without a daemon: list a queue's ready messages, claim the oldest, flush, notice.

A claim is the fetch actor's rename into delay/ (Store.claim), so local consumers, other
processes and daemons on the root race for a message by one rename and exactly one wins.
"""

import math
import time
from collections import deque

from mq import properties
from mq.client.message import Message
from mq.store import CorruptMessage, decode_message

#: Seconds a listing of a queue is used before it is listed again (it is also listed again
#: when it runs out): a message that came back (nack, timer) is served in its place by then.
RELIST_SECONDS = 0.5
#: Longest time, in seconds, between two passes that return a queue's due messages from
#: delay/ (a pass also comes at the earliest due time it saw).
RELEASE_SECONDS = 0.5


class Taker:
    """Claims a queue's ready messages for one LocalClient, oldest first.

    strict: list the queue before every claim and take its oldest message, never one from an
    older listing, so one consumer receives messages in creation order. Otherwise a listing
    is reused for RELIST_SECONDS, which keeps a get on a deep queue from listing it each time.
    """

    def __init__(self, store, props, strict: bool = False):
        self.store = store
        self.props = props
        self.strict = strict
        self.listings: dict[str, tuple[float, deque]] = {}  # queue -> (listed at, oldest first)
        self.release_at: dict[str, float] = {}  # queue -> when to look in delay/ again

    def take(self, queue: str) -> Message | None:
        """Claim the oldest ready message of a queue and return it; None when none is ready."""
        if time.time() >= self.release_at.get(queue, 0.0):
            # Again at the next due time seen, or sooner for messages claimed meanwhile.
            self.release_at[queue] = min(release_due(self.store, self.props, queue),
                                         time.time() + RELEASE_SECONDS)
        timeout = self.props.effective(queue)["timeout"]
        while (candidate := self.next_candidate(queue)) is not None:
            message_id, attempts = candidate
            due = time.time() + timeout
            data = self.store.claim(queue, message_id, due, attempts)
            if data is None:
                continue  # Taken by another consumer or removed: the next one.
            delivery = attempts + 1
            self.store.flush({self.store.queue_dir(queue), self.store.folder("delay")})
            # A daemon's mover learns of the claim from the notice and times it (FORMAT.md).
            self.store.post_notice()
            try:
                message = decode_message(queue, message_id, data)
            except CorruptMessage:
                self.store.flush({self.store.quarantine(queue, message_id, delivery),
                                  self.store.folder("delay")})
                continue
            return Message(queue, message_id, message.body, message.content_type,
                           f"{message_id}.{delivery}", delivery, message.created_ms)
        return None

    def next_candidate(self, queue: str) -> tuple[str, int] | None:
        """(id, deliveries) of the next message to try; None when a fresh listing is empty."""
        if self.strict:
            # Ids are v7 UUIDs: the smallest is the oldest message.
            return min(self.store.list_ready(queue), default=None)
        listed_at, pending = self.listings.get(queue, (float("-inf"), deque()))
        if pending and time.monotonic() - listed_at < RELIST_SECONDS:
            return pending.popleft()
        pending = deque(sorted(self.store.list_ready(queue)))
        self.listings[queue] = (time.monotonic(), pending)
        return pending.popleft() if pending else None

    def forget(self, queue: str) -> None:
        """Drop the listing of a queue (purged or deleted)."""
        self.listings.pop(queue, None)


def release_due(store, props, queue: str) -> float:
    """Return the queue's messages whose due time passed from delay/ to it; return the
    earliest due time of those left (infinity when none).

    This is what a daemon's mover does, for one queue: with no daemon on the root, a message
    whose consumer died comes back here. Beside a daemon both may try; Store.release re-reads
    the due time and moves a message once, so the loser finds it gone or back in delay/.
    A message delivered more than the queue's retry allows goes to its dead-letter queue.
    """
    now, later, dirs, noticed = time.time(), math.inf, set(), set()
    effective = props.effective(queue)
    for due, owner, message_id, attempts in store.list_delayed():
        if owner != queue:
            continue
        if due > now:
            later = min(later, due)
            continue
        dead = effective["dead_letter_queue"] if properties.exhausted(effective, attempts) else None
        dead_count = properties.dead_letter_count(props.effective(dead), attempts) if dead else 0
        outcome, due = store.release(queue, message_id, now, attempts, dead, dead_count=dead_count)
        if outcome in ("ready", "dead"):
            target = dead if outcome == "dead" else queue
            dirs.add(store.queue_dir(target))
            noticed.add(target)
        elif outcome == "removed":
            dirs.add(store.folder("remove"))
        elif outcome == "not_due":
            later = min(later, due)
    if dirs:
        store.flush(dirs | {store.folder("delay")})
        for target in noticed:
            store.post_notice(target)  # So that daemons' fetch actors list it again.
    return later
