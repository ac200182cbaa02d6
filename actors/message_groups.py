"""MessageGroups: which message groups of a fetch actor's fifo queues have a message in flight.

A queue with the property `fifo` hands out one group's messages in order: while a message of
group G is in flight, no younger message of G is handed out, except to the same holder (one
SQS ReceiveMessage that takes several messages of G at once, in order). An older one that came
back (its timer ran out, or it was made visible) may go again: it keeps the group's order. A
group is held by the names of its in-flight files, delay/{q}:{id}.{n}: when that name is gone
(acked, deleted, nacked, or returned by the mover after its timer) the group is free again,
with no notification to miss; but a message returned to its queue as queues/{q}/{id}.{n}
still holds it until claimed again: the mover renames it before it tells this actor, and a
fetch in between must not hand out the group's next message first. The
record is rebuilt from delay/ the first time a queue is used, so a restarted actor keeps
holding the groups that were in flight. Other daemons sharing the root see a group held
through its claim file in groups/ (core/store/group_claims.py), taken before each grouped
message is handed out: a group free here is still passed over while a peer's delivery holds it.
"""

import os
import random

from mq.delivery import group_in_file, holds_back
from mq.store.group_claims import GroupClaims

#: Most message ids whose group is remembered (past it the memory is cleared and re-read), and
#: most held groups before the ones no longer in flight are dropped.
MAX_KNOWN = 100_000
#: Most messages a holder's fetch looks through for the next one of a group it holds.
PREFER_SCAN = 1000


class MessageGroups:
    """The in-flight groups of fifo queues, and the group of each message seen."""

    def __init__(self, store, shared: bool = False) -> None:
        self.store = store
        #: Whether other daemons share the root (--peers): only then are claims kept on it.
        self.shared = shared
        self.held: dict[tuple[str, str], dict[tuple[str, int], str]] = {}
        self.known: dict[tuple[str, str], str] = {}
        self.loaded: set[str] = set()
        self.claims = GroupClaims(store, store.disk)

    def group_of(self, queue: str, message_id: str, path: str) -> str:
        """The message's group ("" for none, or when its file is gone or not a message)."""
        key = (queue, message_id)
        group = self.known.get(key)
        if group is None:
            group = group_in_file(path, queue, message_id)
            if group is None:
                return ""  # The claim finds out what happened to it.
            if len(self.known) >= MAX_KNOWN:
                self.known.clear()
            self.known[key] = group
        return group

    def load(self, queue: str) -> None:
        """Hold the groups of the queue's messages already in flight (once per queue)."""
        if queue in self.loaded:
            return
        self.loaded.add(queue)
        for message_id, delivery in self.store.queues.list_in_flight(queue):
            group = self.group_of(queue, message_id, self.store.delay_path(queue, message_id, delivery))
            if group:
                self.held.setdefault((queue, group), {})[(message_id, delivery)] = ""

    def blocked(self, queue: str, group: str, holder: str | None, message_id: str = "~") -> bool:
        """True while another holder has a message of the group older than message_id in flight
        (or just returned to the queue under the same name)."""
        held = self.held.get((queue, group))
        if not held:
            return False
        for in_flight, delivery in list(held):
            if not self.still_held(queue, in_flight, delivery):
                del held[(in_flight, delivery)]
        if not held:
            del self.held[(queue, group)]
            return False
        return holds_back(((in_flight, other) for (in_flight, _), other in held.items()),
                          message_id, holder)

    def still_held(self, queue: str, message_id: str, delivery: int) -> bool:
        """Whether a held delivery still holds its group: its in-flight name exists, or it is
        back in its queue under the same delivery (the mover renames it before it tells this
        actor, and a fetch in between must not hand out the group's next message first; once
        in the index, it is the oldest of its group and goes first anyway)."""
        return (os.path.exists(self.store.delay_path(queue, message_id, delivery))
                or os.path.exists(self.store.ready_path(queue, message_id, delivery)))

    def take(self, index, spread: int, queue: str, holder: str | None):
        """The oldest (id, deliveries) of the index whose group is free for this holder, or None;
        with spread > 0 (--peers), one at random among the spread+1 oldest such messages.

        A holder first gets the next message of a group it holds (SQS returns as many messages
        of one group together as it can); messages of groups held by others, and every message
        of a group but its oldest ready one, are passed over and stay in the index, in their
        places: a random pick among the oldest few must not hand out a group's second message
        before its first.
        """
        self.load(queue)
        if holder:
            taken = self.take_held(index, queue, holder)
            if taken is not None:
                return taken
        candidates: list[tuple[str, int]] = []
        passed: list[tuple[str, int]] = []
        seen: set[str] = set()
        try:
            while len(candidates) <= spread and (taken := index.take(0)) is not None:
                message_id, attempts = taken
                group = self.group_of(queue, message_id, self.store.ready_path(queue, message_id, attempts))
                if group:
                    if group in seen or self.blocked(queue, group, holder, message_id) \
                            or self.held_by_peer(queue, group, message_id, attempts, holder):
                        # Each younger message of a blocked group is blocked too: looked at once.
                        seen.add(group)
                        passed.append(taken)
                        continue
                    seen.add(group)
                candidates.append(taken)
            if not candidates:
                return None
            chosen = candidates.pop(random.randrange(len(candidates)) if spread else 0)
            passed.extend(candidates)
            return chosen
        finally:
            for message_id, attempts in passed:
                index.add(message_id, attempts)

    def head(self, index, queue: str) -> str | None:
        """The id a fetch without a holder would take now (no spread), left in the index."""
        taken = self.take(index, 0, queue, None)
        if taken is None:
            return None
        index.add(*taken)
        return taken[0]

    def take_held(self, index, queue: str, holder: str):
        """The oldest message of a group this holder holds, among the PREFER_SCAN oldest."""
        groups = {group for (q, group), held in self.held.items()
                  if q == queue and holder in held.values()}
        passed: list[tuple[str, int]] = []
        try:
            while groups and len(passed) < PREFER_SCAN and (taken := index.take(0)) is not None:
                message_id, attempts = taken
                path = self.store.ready_path(queue, message_id, attempts)
                if self.group_of(queue, message_id, path) in groups:
                    return taken
                passed.append(taken)
            return None
        finally:
            for message_id, attempts in passed:
                index.add(message_id, attempts)

    def held_by_peer(self, queue: str, group: str, message_id: str, attempts: int,
                     holder: str | None) -> bool:
        """Whether the group's claim on the root names a delivery of another daemon (or of
        another holder) still in flight, so the message must wait (only with --peers)."""
        return self.shared and not self.claims.free_for(queue, group, message_id, attempts,
                                                        self.mine(queue, group, holder))

    def mine(self, queue: str, group: str, holder: str | None) -> set[str]:
        """The deliveries `{id}.{n}` of the group this holder has in flight."""
        held = self.held.get((queue, group)) if holder else None
        return {f"{message_id}.{n}" for (message_id, n), other in held.items()
                if other == holder} if held else set()

    def claim(self, queue: str, message_id: str, attempts: int, holder: str | None) -> bool:
        """Take the group's claim on the root for the message's next delivery, before its
        rename hands it out; False when a peer's delivery holds the group (try another)."""
        if not self.shared:
            return True
        group = self.group_of(queue, message_id, self.store.ready_path(queue, message_id, attempts))
        if not group:
            return True
        return self.claims.take(queue, group, message_id, attempts, self.mine(queue, group, holder))

    def hold(self, queue: str, group: str, message_id: str, delivery: int, holder: str | None) -> str:
        """Record a delivery of a group's message; return the holder (the receipt when new)."""
        holder = holder or f"{message_id}.{delivery}"
        if group:
            if len(self.held) >= MAX_KNOWN:
                self.prune()
            self.held.setdefault((queue, group), {})[(message_id, delivery)] = holder
        return holder

    def prune(self) -> None:
        """Drop the groups none of whose held messages is still in flight."""
        for queue, group in list(self.held):
            self.blocked(queue, group, None)

    def forget(self, queue: str) -> None:
        """Drop what is known of a queue (deleted or purged)."""
        self.loaded.discard(queue)
        for key in [k for k in self.held if k[0] == queue]:
            del self.held[key]

    def queues(self) -> set[str]:
        """The queues anything is kept about (held groups, the groups of messages seen)."""
        return self.loaded | {queue for queue, _ in self.held} | {queue for queue, _ in self.known}

    def forget_all(self, gone: set[str]) -> None:
        """Drop everything kept about queues that are gone, the groups of their messages too."""
        self.loaded -= gone
        self.held = {key: held for key, held in self.held.items() if key[0] not in gone}
        self.known = {key: group for key, group in self.known.items() if key[0] not in gone}
