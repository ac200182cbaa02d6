"""FetchActor: owns a set of queues and serves everything for them in order; fetching.

Its state changes only through its objects' methods: the ready indexes (queue_index.py), long
polls (long_polls.py), pull-any watches (fetch_any.py), deliveries handed out (deliveries.py),
held message groups (message_groups.py). replies.py holds ack, nack, extend and delete;
fetch_batch.py the batch fetch and ack; queue_admin.py queues, redrive and properties.
"""

import time

from mq import delivery as rules
from mq import operations as ops
from mq import properties
from mq import store as fmt
from mq.actors import fetch_any, fetch_batch, queue_admin, replies
from mq.actors.base import Actor
from mq.actors.batch import DEFERRED, Batch, Request
from mq.actors.commands import by_fields, served
from mq.actors.counters import Counters, counters_file
from mq.actors.deliveries import Deliveries
from mq.actors.long_polls import FetchActorBatch, Waiters
from mq.actors.message_groups import MessageGroups
from mq.actors.queue_index import RELIST_EMPTY_SECONDS, ReadyIndexes
from mq.config import Options
from mq.errors import MqError, NotFound, from_os_error
from mq.ids import id_floor, id_time_ms
from mq.operations.fields import FETCH
from mq.protocol import fetch_actor_for

#: Most group claims one fetch may lose to peers before it answers that nothing is ready.
MAX_REFUSED = 8
#: Claiming from another actor's queue, pick among this many more of the oldest (as peers do).
HELPER_SPREAD = 2


class FetchActor(Actor[FetchActorBatch]):
    """Everything for one queue lands on one fetch actor, so it is serialized and FIFO."""

    kind = "fetch"
    batch_class = FetchActorBatch

    def __init__(self, options: Options, index: int, run_dir: str, store=None):
        super().__init__(options, index, run_dir, store)
        self.indexes = ReadyIndexes(self.store, self.log)
        self.waiters = Waiters(self.log)  # long polls of fetch and fetch_batch
        self.watches = fetch_any.Watches(self.log)  # pull-any long polls (no claim)
        self.deliveries = Deliveries()  # the delivery handed out last, per message
        self.props = properties.PropertyFiles(
            self.store, {"timeout": options.timeout, "max_body_bytes": options.max_body_bytes})
        self.counters = Counters(path=counters_file(run_dir, f"{self.kind}-{index}"))
        self.groups = MessageGroups(self.store, shared=self.options.peers > 0)
        #: Queue -> [id, 0, deliveries] claimed from another actor's queue (ready after that
        #: many deliveries): told to it through the mover after the batch, for its index.
        self.claimed_elsewhere: dict[str, list] = {}

    def start(self) -> None:
        """Connect to the mover, which times the messages this actor hides."""
        self.connect_mover()

    def owns(self, queue: str) -> bool:
        """Whether the queue is this actor's own (crc32(q) % W): it holds every operation on
        it but the fetches a busy owner's front sends to the next actors (ActorPool.taker)."""
        return fetch_actor_for(queue, self.options.workers) == self.index

    def serves_only_owner(self, batch: Batch, queue: str) -> bool:
        """Whether a fetch of the queue is refused here, for its own actor: a fifo queue of
        another actor's (its message groups are held in that actor's memory)."""
        return not self.owns(queue) and batch.properties(queue, self.props)["fifo"]

    def head(self, queue: str, batch: Batch | None = None) -> str | None:
        """The id of the message a fetch of the queue would take now, left in place: in a fifo
        queue the oldest whose group is free (an index's head may be held back by its group)."""
        index = self.indexes.of(queue)
        if not index:
            return None
        props = batch.properties(queue, self.props) if batch else self.props.effective(queue)
        return self.groups.head(index, queue) if props["fifo"] else index.head()

    def forget_queue(self, queue: str) -> None:
        """Drop what this actor keeps about a queue (deleted, or asked for but missing)."""
        self.indexes.forget(queue)
        self.groups.forget(queue)

    def queue_tables(self) -> dict:
        """The queues each of its per-queue tables holds, by table (docs/PROTOCOL.md, "Statistics")."""
        return {"indexes": self.indexes.remembered(), "groups": self.groups.queues(),
                "counters": self.counters.queues(), "properties": self.props.queues(),
                "deliveries": self.deliveries.queues(), "sizes": self.indexes.sizes.queues()}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop everything kept about queues that are gone (deleted by another daemon, ...)."""
        for queue in gone:
            self.indexes.forget(queue)
            self.counters.forget(queue)
            self.props.forget(queue)
        self.groups.forget_all(gone)
        self.deliveries.forget(gone)
        self.indexes.sizes.forget_handed(gone)

    # -- commands ---------------------------------------------------------------------------

    def ready(self, batch: Batch, request: ops.Ready, sender: Request) -> dict:
        """Notification: [id, deliveries] pairs became ready in a queue."""
        queue = request.queue
        index = self.indexes.watched(queue)
        if index is not None:
            for message_id, attempts, *size in request.ids:
                if index.attempts(message_id) == attempts:
                    continue  # A listing found it first.
                if (index.may_have_listed(message_id)
                        and not self.store.states.is_ready(queue, message_id, attempts)):
                    # Late: a listing found it first, and it was taken (handed out, acked,
                    # deleted) since. Added, it would count as ready until a fetch tried it.
                    continue
                index.add(message_id, attempts)
                self.indexes.sizes.became_ready(queue, message_id, attempts, *size[:1])
        return {}

    def relist_all(self, batch: Batch, request: ops.Relist, sender: Request) -> dict:
        """Notification from a restarted save actor or mover: a "ready" may have been lost."""
        found = self.indexes.relist_all()
        # At start every actor asks every fetch actor: most re-listings find nothing to say.
        (self.log.info if found else self.log.debug)("fetch.relist", found=found)
        return {}

    @by_fields
    def fetch(self, batch: Batch, sender: Request, queue: str, wait: float, holder: str | None):
        """Hide the oldest ready message for the queue's timeout and return it; or wait for one."""
        if self.serves_only_owner(batch, queue):
            return {"owner_only": True}  # Its groups are held by its own actor alone.
        result = self.take(batch, queue, holder)
        if result is not None:
            return result
        if not self.store.queues.queue_exists(queue):
            self.forget_queue(queue)
            raise NotFound(f"queue {queue!r} does not exist")
        if wait <= 0:
            return {"empty": True}
        self.waiters.park(queue, sender.peer, sender.rid, wait)
        return DEFERRED

    def cancel(self, batch: Batch, request: ops.Cancel, sender: Request) -> dict:
        """Notification: the client of a long poll or watch went away; drop it."""
        self.waiters.cancel(sender.peer, request.request)
        self.watches.cancel(sender.peer, request.request)
        return {}

    def end_waits(self, batch: Batch, request: ops.EndWaits, sender: Request) -> dict:
        """Notification: the front of this link drains; answer its long polls and watches now,
        as if their time were up, so that it answers their clients and exits without waiting."""
        polls, watches = self.waiters.end(sender.peer), self.watches.end(sender.peer)
        self.log.info("fetch.waits_ended", polls=polls, watches=watches)
        return {}

    def stats(self, batch: Batch, request: ops.Stats, sender: Request) -> dict:
        """Per queue it owns: ready messages, their files' bytes, the oldest one's age, the long
        polls and pull-any watches parked on it, and the event counters."""
        self.indexes.index_owned(lambda queue: fetch_actor_for(queue, self.options.workers) == self.index)
        counted = self.counters.report()
        now_ms = time.time() * 1000
        queues = {}
        waiting, watching = self.waiters.counts(), self.watches.counts()
        self.indexes.sizes.heal([queue for queue, index in self.indexes if not index])
        for queue, entry in counted.items():
            if not self.owns(queue):  # Its fetches and acks here, with or without an index of
                queues[queue] = entry  # it; its other figures are its own actor's.
        owned = {queue: index for queue, index in self.indexes if self.owns(queue)}
        for queue, props in self.props.effective_each(owned):
            index = owned[queue]
            oldest = index.oldest()
            entry = counted.get(queue) or {"totals": {}, "rates": {}}
            entry.update(ready=len(index), bytes=self.indexes.sizes.of(queue),
                         waiting=waiting.get(queue, 0) + watching.get(queue, 0),
                         dead_letter_queue=props["dead_letter_queue"],
                         oldest_ready_age_s=round(max(0.0, now_ms - id_time_ms(oldest)) / 1000, 3)
                         if oldest else None)
            queues[queue] = entry
        return {"actor": f"{self.kind}-{self.index}", "queues": queues,
                "flush": self.store.flush_times.snapshot(), **self.gone.figures(request.heap)}

    COMMANDS = {
        ops.Fetch: fetch, ops.FetchBatch: fetch_batch.fetch_batch,
        ops.AckBatch: fetch_batch.ack_batch,
        ops.Ready: ready, ops.Relist: relist_all, ops.Cancel: cancel, ops.EndWaits: end_waits,
        ops.Stats: stats,
        ops.Ack: replies.ack, ops.Nack: replies.nack, ops.Extend: replies.extend,
        ops.Delete: replies.delete,
        ops.QueueGet: queue_admin.queue_get, ops.QueuePut: queue_admin.queue_put,
        ops.QueueDelete: queue_admin.queue_delete,
        ops.Redrive: queue_admin.redrive,
        ops.Taken: queue_admin.taken,
        ops.Peek: queue_admin.peek,
        ops.PropsGet: queue_admin.props, ops.PropsPut: queue_admin.props,
        ops.PropsPatch: queue_admin.props, ops.PropsDelete: queue_admin.props,
        ops.RulesGet: queue_admin.rules, ops.RulesPut: queue_admin.rules,
        ops.RulesDelete: queue_admin.rules,
        ops.FetchAny: fetch_any.fetch_any, ops.Watch: fetch_any.watch,
        # The commands that name their ops (`@serves`, actors/commands.py).
        **served(FETCH),
    }

    def take(self, batch: Batch, queue: str, holder: str | None = None,
             max_bytes: int | None = None) -> ops.Fetched | None:
        """Claim the next ready message of the queue, or None when there is none (or, with
        max_bytes, when its file is larger: it stays ready, unclaimed).

        A claim that fails puts the message back in the index before the error goes up, so
        it is served once the disk recovers; a corrupt file is quarantined and skipped. In a
        fifo queue, messages of a group with an older message in flight (with another holder)
        are passed over (actors/message_groups.py).
        """
        owned = self.owns(queue)
        index = self.indexes.of(queue, sized=owned)
        props = batch.properties(queue, self.props)
        timeout, fifo = props["timeout"], props["fifo"]
        if fifo and not owned:
            # Its groups are held in its own actor's memory: a long poll parked here before
            # the queue was made fifo takes nothing (a fetch is answered owner_only first).
            return None
        expired_before = rules.expiry_cutoff_ms(props["retention"], time.time())
        refused = 0
        spread = self.options.peers or (0 if owned else HELPER_SPREAD)
        lost = relisted = False
        while True:
            taken = self.groups.take(index, self.options.peers, queue, holder) if fifo \
                else index.take(spread)
            if taken is None:
                if lost and not relisted:
                    # Every entry left was claimed by another actor or a peer: the folder
                    # changed since its listing, so list it again once (ReadyIndexes.of).
                    relisted, index = True, self.indexes.of(queue, sized=owned)
                    continue
                return None
            message_id, attempts = taken
            if rules.expired(message_id, expired_before):
                self.expire(batch, queue, message_id, attempts)
                continue
            if max_bytes is not None and fetch_batch.larger_than(
                    self.store.ready_path(queue, message_id, attempts), max_bytes):
                index.add(message_id, attempts)
                return None
            if fifo and not self.groups.claim(queue, message_id, attempts, holder):
                # A peer took the group first: the next look passes over it, held.
                index.add(message_id, attempts)
                refused += 1
                if refused > MAX_REFUSED:
                    return None
                continue
            due = time.time() + timeout
            try:
                data = self.store.states.claim(queue, message_id, due, attempts, batch.changes)
            except OSError:
                index.add(message_id, attempts)
                # If the claim could not undo its rename, the mover finds the file and returns it.
                batch.hidden.append((queue, message_id, attempts + 1, time.time()))
                raise
            if data is None:
                lost = True
                continue  # Removed, or taken by a peer or another actor: try the next one.
            delivery = attempts + 1
            try:
                message = fmt.decode_message(queue, message_id, data)
            except fmt.CorruptMessage as err:
                self.quarantine(batch, queue, message_id, delivery, due, err)
                continue
            batch.hidden.append((queue, message_id, delivery, due))
            self.deliveries.handed(queue, message_id, delivery)
            self.indexes.sizes.handed(queue, message_id, len(data))
            if not owned:
                # With the deliveries it was ready after: a nack may make it ready again (to
                # its owner) before this note arrives, and that entry stays.
                self.claimed_elsewhere.setdefault(queue, []).append([message_id, 0, attempts])
            self.counters.count(queue, "fetches")
            if delivery > 1:
                self.counters.count(queue, "redeliveries")
            result: ops.Fetched = {
                "id": message_id, "body": message.body, "content_type": message.content_type,
                "receipt": f"{message_id}.{delivery}", "attempts": delivery, "due": due,
                "created_ms": message.created_ms, "parts": message.parts}
            if message.group or message.attributes:
                result.update({"group": message.group, "attributes": message.attributes})
            if fifo:
                result["holder"] = self.groups.hold(queue, message.group, message_id, delivery, holder)
            return result

    def drop_expired(self, batch: Batch, queue: str) -> None:
        """Remove the ready messages of the index older than the queue's retention (its oldest),
        so its count is right and none of them is handed out."""
        retention = self.props.effective(queue)["retention"]
        index = self.indexes.known(queue)
        if retention and index:
            floor = id_floor(rules.expiry_cutoff_ms(retention, time.time()))
            for message_id, attempts in index.drop_before(floor):
                self.expire(batch, queue, message_id, attempts)

    def expire(self, batch: Batch, queue: str, message_id: str, attempts: int) -> None:
        """Remove a ready message older than its queue's retention instead of handing it out."""
        left = self.store.states.remove(queue, message_id, known=("ready", attempts), changes=batch.changes)
        if left is not None:
            self.indexes.sizes.removed(queue, message_id)
            self.log.info("fetch.expired", queue=queue, id=message_id)

    def quarantine(self, batch: Batch, queue: str, message_id: str, delivery: int, due: float,
                   err: Exception) -> None:
        """Keep a claimed file that is not a message in corrupt/, for an operator."""
        try:
            self.store.states.quarantine(queue, message_id, delivery, batch.changes)
            self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err),
                           moved_to="corrupt")
        except OSError as move_err:
            batch.hidden.append((queue, message_id, delivery, due))  # Back to the queue later.
            self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err),
                           move_error=str(move_err))

    def send_notes(self, batch: FetchActorBatch) -> None:
        """After the flush: the actor's notes, and to the owner of each queue this actor
        claimed from (through the mover, which relays to fetch actors) the ids it took."""
        super().send_notes(batch)
        if self.claimed_elsewhere:
            for queue, ids in self.claimed_elsewhere.items():
                self.send(self.mover, ops.Relay(queue=queue, ids=ids, taken=True))
            self.claimed_elsewhere = {}

    # -- long polls: hooks of the batch loop ------------------------------------------------

    def before_flush(self, batch: FetchActorBatch) -> None:
        """Claim for the long polls the batch's own changes (or time) can answer, so that the
        batch's one flush covers them too: a separate flush would double the syncfs calls of
        a busy queue whose consumers long poll."""
        if self.sock is not None:  # In-process (tests) there is no one to answer.
            self.waiters.feed(batch, lambda queue, limit: self.take_or_error(batch, queue, limit))

    def after_flush(self, batch: FetchActorBatch) -> None:
        """Answer the long polls the batch fed, then the pull-any watches (after the claims:
        a watch claims nothing)."""
        if self.sock is None:
            return
        self.reply_answered(batch)
        self.watches.serve(self)

    def reply_answered(self, batch: FetchActorBatch) -> None:
        """Reply to each long poll the batch answered, with its result (after the requests'
        own in batch.results), and leave the batch only its requests' results."""
        first = len(batch.requests)
        self.reply_all((peer, rid, result)
                       for (peer, rid), result in zip(batch.answered, batch.results[first:]))
        del batch.results[first:]

    def serve_waiters(self) -> None:
        """Answer long polls between batches: a message for each waiter that can have one,
        204 when time is up; then the pull-any watches."""
        batch = self.batch_class([])
        if self.waiters:
            self.waiters.feed(batch, lambda queue, limit: self.take_or_error(batch, queue, limit))
            self.settle(batch)
            self.send_notes(batch)
        self.reply_answered(batch)
        self.watches.serve(self)

    def take_or_error(self, batch: Batch, queue: str, limit: int | None = None):
        """take() (take_many() for a batch fetch of `limit`), with any failure ending the wait
        as an answer, never the actor; None when there is nothing to take."""
        try:
            if limit is None:
                return self.take(batch, queue)
            return {"messages": messages} if (messages := fetch_batch.take_many(
                self, batch, queue, limit)) else None
        except OSError as err:
            error = from_os_error(err, "cannot fetch")
            self.log.error("actor.disk_error", op="fetch", queue=queue, id=None,
                           error=error.message, kind=error.kind)
            return error
        except Exception:
            self.log.exception("actor.error", op="fetch", queue=queue)
            return MqError("internal error in fetch actor")

    def tick(self) -> None:
        """Take in noticed messages; expire long polls and serve ones whose queue gained messages."""
        try:
            self.indexes.merge_noticed()
        except OSError as err:
            self.log.warning("fetch.notice_failed", error=str(err))
        self.serve_waiters()

    def root_away(self) -> None:
        """While the root is away, answer every parked long poll and pull-any watch with the
        refusal (503): none is left to time out, so the loop has no deadline to spin on."""
        batch = self.batch_class([])
        self.waiters.feed(batch, lambda queue, limit: self.root_refusal())
        self.reply_answered(batch)
        self.watches.refuse_all(self, self.root_refusal())

    def poll_timeout_ms(self) -> int:
        """Wake for the nearest long-poll deadline, or to re-list queues someone waits on."""
        deadlines = [d for d in (self.waiters.nearest_deadline(), self.watches.nearest_deadline())
                     if d is not None]
        if not deadlines:
            return 500
        return max(0, min(int(RELIST_EMPTY_SECONDS * 1000),
                          int((min(deadlines) - time.monotonic()) * 1000) + 1))
