"""Fetching without a daemon: list a queue's ready messages, claim the oldest, flush, notice.

A claim is the fetch actor's rename into delay/ (store.states.claim), so local consumers, other
processes and daemons on the root race for a message by one rename and exactly one wins.
"""

import math
import time
from collections import deque

from mq import delivery as rules
from mq import properties, trace_context
from mq.client.message import Message
from mq.store import Changes, CorruptMessage, decode_message

#: Seconds a listing of a queue is used before it is listed again (it is also listed again
#: when it runs out): a message that came back (nack, timer) is served in its place by then.
RELIST_SECONDS = 0.5
#: Longest time, in seconds, between two passes that return a queue's due messages from
#: delay/ (a pass also comes at the earliest due time it saw).
RELEASE_SECONDS = 0.5
#: Most message ids whose group is remembered; past it the memory is cleared and re-read.
MAX_KNOWN_GROUPS = 100_000


class Taker:
    """Claims a queue's ready messages for one LocalClient, oldest first, by the daemon's
    delivery rules (mq.delivery): a message past its queue's retention is removed, never
    handed out; in a fifo queue a message whose group has an older one in flight waits.

    strict: list the queue before every claim and take its oldest message, never one from an
    older listing, so one consumer receives messages in creation order. Otherwise a listing
    is reused for RELIST_SECONDS, which keeps a get on a deep queue from listing it each time.
    A fifo queue is listed at every get (Groups).
    """

    def __init__(self, store, props, strict: bool = False):
        self.store = store
        self.props = props
        self.strict = strict
        self.listings: dict[str, tuple[float, deque]] = {}  # queue -> (listed at, oldest first)
        self.release_at: dict[str, float] = {}  # queue -> when to look in delay/ again
        self.groups = Groups(store)

    def take(self, queue: str) -> Message | None:
        """Claim the oldest ready message of a queue and return it; None when none is ready."""
        if time.time() >= self.release_at.get(queue, 0.0):
            # Again at the next due time seen, or sooner for messages claimed meanwhile.
            self.release_at[queue] = min(release_due(self.store, self.props, queue),
                                         time.time() + RELEASE_SECONDS)
        props = self.props.effective(queue)
        changes = Changes()
        try:
            if props["fifo"]:
                return self.take_first(queue, props, self.groups.candidates(queue), changes)
            return self.take_first(queue, props, iter(lambda: self.next_candidate(queue), None),
                                   changes)
        finally:
            # One flush for the claim and any expired message removed or corrupt file moved
            # on the way, before the message is returned (or the error raised).
            if changes:
                self.store.flush(changes)
            if self.store.folder("delay") in changes:
                # A daemon's mover learns of the claim from the notice and times it (FORMAT.md).
                self.store.notices.post()

    def take_first(self, queue: str, props: dict, candidates, changes: Changes) -> Message | None:
        """Claim the first of the (id, deliveries, group) candidates the rules let out; its
        claim and the removals of expired messages on the way are recorded on `changes`."""
        cutoff = rules.expiry_cutoff_ms(props["retention"], time.time())
        for message_id, attempts, group in candidates:
            if rules.expired(message_id, cutoff):
                self.store.states.remove(queue, message_id, known=("ready", attempts), changes=changes)
                continue
            due = time.time() + props["timeout"]
            data = self.store.states.claim(queue, message_id, due, attempts, changes)
            if data is None:
                # Taken by another consumer or removed: the next one. A message of its group
                # may be in flight now: its group waits until the next get looks again.
                self.groups.lost(group)
                continue
            delivery = attempts + 1
            try:
                message = decode_message(queue, message_id, data)
            except CorruptMessage:
                self.store.states.quarantine(queue, message_id, delivery, changes)
                continue
            return Message(queue, message_id, message.body, message.content_type,
                           f"{message_id}.{delivery}", delivery, message.created_ms,
                           **trace_context.of_message(message.attributes))
        return None

    def next_candidate(self, queue: str) -> tuple[str, int, str] | None:
        """(id, deliveries, "") of the next message to try; None when a fresh listing is empty."""
        if self.strict:
            # Ids are v7 UUIDs: the smallest is the oldest message.
            oldest = min(self.store.states.list_ready(queue), default=None)
            return None if oldest is None else (*oldest, "")
        listed_at, pending = self.listings.get(queue, (float("-inf"), deque()))
        if not pending or time.monotonic() - listed_at >= RELIST_SECONDS:
            pending = deque(sorted(self.store.states.list_ready(queue)))
            self.listings[queue] = (time.monotonic(), pending)
        return (*pending.popleft(), "") if pending else None

    def forget(self, queue: str) -> None:
        """Drop the listing of a queue (purged or deleted)."""
        self.listings.pop(queue, None)


class Groups:
    """The message groups of fifo queues as one get sees them (docs/DELIVERY.md, "Message
    groups"), from the names in delay/: no record is kept between gets, so a group in flight
    with any consumer of the root (another process, a daemon) holds its younger messages back.
    """

    def __init__(self, store) -> None:
        self.store = store
        self.known: dict[tuple[str, str], str] = {}  # (queue, id) -> group; groups never change
        self.blocked: set[str] = set()  # groups of this get that wait

    def candidates(self, queue: str):
        """(id, deliveries, group) of the queue's ready messages, oldest first, whose group no
        older message in flight holds back.

        delay/ is listed before and after the queue: a claim by another consumer between the
        listings is in the second, a message returned to the queue between them in the first
        (still held, at worst, for this get).
        """
        self.blocked = set()
        before = self.store.queues.list_in_flight(queue)
        ready = sorted(self.store.states.list_ready(queue))
        in_flight: dict[str, list] = {}
        for message_id, delivery in set(before) | set(self.store.queues.list_in_flight(queue)):
            group = self.group_of(queue, message_id, self.store.delay_path(queue, message_id, delivery))
            if group:
                in_flight.setdefault(group, []).append((message_id, None))
        for message_id, attempts in ready:
            group = self.group_of(queue, message_id, self.store.ready_path(queue, message_id, attempts))
            if group is None:
                # Claimed by another consumer since the listing (or removed): if it is in
                # flight now, its group waits.
                self.lost(self.group_of(queue, message_id,
                                        self.store.delay_path(queue, message_id, attempts + 1)))
                continue
            if group and (group in self.blocked
                          or rules.holds_back(in_flight.get(group, ()), message_id)):
                self.blocked.add(group)  # So are its younger messages.
                continue
            yield message_id, attempts, group

    def lost(self, group: str | None) -> None:
        """A message of the group was claimed by another consumer: hold the group back."""
        if group:
            self.blocked.add(group)

    def group_of(self, queue: str, message_id: str, path: str) -> str | None:
        """A message's group ("" for none, and for a file that is not a message: its claim
        puts it aside); None when its file is gone."""
        key = (queue, message_id)
        group = self.known.get(key)
        if group is None:
            group = rules.group_in_file(path, queue, message_id)
            if group is None:
                return None
            if len(self.known) >= MAX_KNOWN_GROUPS:
                self.known.clear()
            self.known[key] = group
        return group


def release_due(store, props, queue: str) -> float:
    """Return the queue's messages whose due time passed from delay/ to it; return the
    earliest due time of those left (infinity when none).

    This is what a daemon's mover does, for one queue: with no daemon on the root, a message
    whose consumer died comes back here. Beside a daemon both may try; store.states.release re-reads
    the due time and moves a message once, so the loser finds it gone or back in delay/.
    A message delivered more than the queue's retry allows goes to its dead-letter queue; one
    past the queue's retention is removed, delayed or in flight, as the daemon's reaper does.
    """
    now, later, changes, noticed = time.time(), math.inf, Changes(), set()
    effective = props.effective(queue)
    cutoff = rules.expiry_cutoff_ms(effective["retention"], now)
    for due, owner, message_id, attempts in store.states.list_delayed():
        if owner != queue:
            continue
        if rules.expired(message_id, cutoff):
            store.states.remove(queue, message_id, known=("in_flight", attempts), changes=changes)
            continue
        if due > now:
            later = min(later, due)
            continue
        dead, dead_count = properties.dead_letter(effective, attempts, props.effective)
        outcome, due = store.states.release(queue, message_id, now, attempts, dead, dead_count=dead_count,
                                     changes=changes)
        if outcome in ("ready", "dead"):
            noticed.add(dead if outcome == "dead" else queue)
        elif outcome == "not_due":
            later = min(later, due)
    if changes:
        store.flush(changes)
        for target in noticed:
            store.notices.post(target)  # So that daemons' fetch actors list it again.
    return later
