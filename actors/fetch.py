"""FetchActor: owns a set of queues and serves everything for them in order.

This module holds the actor, its indexes of ready messages and fetching (with long polls);
actors/replies.py holds ack, nack, extend and delete; actors/queue_admin.py queues, redrive
and properties. COMMANDS joins them.
"""

import time
from collections import OrderedDict, deque

from mq import delivery as rules
from mq import properties
from mq.ids import id_floor, id_time_ms
from mq import store as fmt
from mq.actors import fetch_any, fetch_batch, queue_admin, replies
from mq.actors.base import Actor
from mq.actors.batch import DEFERRED, Batch, Request
from mq.actors.counters import Counters
from mq.actors.message_groups import MessageGroups
from mq.actors.queue_index import QueueIndex
from mq.errors import Invalid, MqError, NotFound, from_os_error
from mq.ids import id_time_ms
from mq.protocol import fetch_actor_for

#: Seconds between re-listings of a queue whose index ran empty (lost notifications, peers,
#: other writers on the root such as the Spark data source).
RELIST_EMPTY_SECONDS = 0.5
#: Seconds between reads of the notice files of the queues this actor has indexed: a writer
#: no daemon hears (a Spark driver on another host) posts one after each commit.
NOTICE_SECONDS = 0.5
#: A folder whose mtime is this recent (ns) may have changed again unseen: directory times
#: move in clock ticks, so a rename in the tick of a listing leaves the listed mtime as it was.
COARSE_MTIME_NS = 50_000_000
#: Longest long poll, in seconds.
MAX_WAIT_SECONDS = 20.0
#: Seconds between listings of queues/ for the stats op, which indexes the queues it owns.
STATS_LIST_SECONDS = 5.0
#: Deliveries handed out that the actor remembers, newest kept, so that a DELETE of a
#: message in flight tries its name first instead of probing the names it may have.
MAX_HANDED = 65536


class FetchActor(Actor):
    """Everything for one queue lands on one fetch actor, so it is serialized and FIFO."""

    kind = "fetch"
    max_wait = MAX_WAIT_SECONDS

    def __init__(self, options, index: int, run_dir: str, store=None):
        super().__init__(options, index, run_dir, store)
        self.indexes: dict[str, QueueIndex] = {}
        self.notices: dict[str, str] = {}  # queue -> notice token its index has seen
        self.noticed_at = time.monotonic()
        self.waiters: dict[str, deque] = {}
        self.watchers: list[fetch_any.Watcher] = []  # pull-any long polls (no claim)
        self.handed: OrderedDict = OrderedDict()  # (queue, id) -> delivery handed out last
        self.props = properties.PropertyFiles(
            self.store, {"timeout": options.timeout, "max_body_bytes": options.max_body_bytes})
        self.counters = Counters()
        self.queues_listed_at: float | None = None  # set by the first stats op
        self.groups = MessageGroups(self.store)

    def start(self) -> None:
        """Connect to the mover, which times the messages this actor hides."""
        self.connect_mover()

    # -- indexes ----------------------------------------------------------------------------

    def ready_index(self, queue: str) -> QueueIndex:
        """The queue's index, built from its folder on first use or when empty and stale."""
        index = self.indexes.get(queue)
        if index is None or (not index and self.may_have_more(queue, index)):
            # The notice is read before the listing, so one posted meanwhile is seen as new;
            # the folder's mtime likewise, so a change meanwhile is seen on the next fetch.
            self.notices[queue] = self.store.read_notice(queue)
            changed = self.store.queue_changed_ns(queue)
            index = self.indexes[queue] = QueueIndex(self.store.list_ready(queue))
            index.changed_ns = changed
        return index

    def may_have_more(self, queue: str, index: QueueIndex) -> bool:
        """Whether an empty index is listed again: RELIST_EMPTY_SECONDS after its listing, or
        at once when the folder changed since. A save actor's "ready" travels on another
        socket than the fetch a client sends once its add is answered, and may be read after
        that fetch; the folder's mtime has changed by then (one stat per such fetch)."""
        if time.monotonic() - index.listed_at > RELIST_EMPTY_SECONDS:
            return True
        changed = self.store.queue_changed_ns(queue)
        return changed is not None and (changed != index.changed_ns
                                        or time.time_ns() - changed < COARSE_MTIME_NS)

    def head(self, queue: str, batch: Batch | None = None) -> str | None:
        """The id of the message a fetch of the queue would take now, left in place: in a fifo
        queue the oldest whose group is free (an index's head may be held back by its group)."""
        index = self.ready_index(queue)
        if not index:
            return None
        props = batch.properties(queue, self.props) if batch else self.props.effective(queue)
        return self.groups.head(index, queue) if props["fifo"] else index.head()

    def forget_queue(self, queue: str) -> None:
        """Drop what this actor keeps about a queue (deleted, or asked for but missing)."""
        self.indexes.pop(queue, None)
        self.notices.pop(queue, None)
        self.groups.forget(queue)

    def relist(self, queue: str) -> None:
        """Add to a queue's index the ready messages its folder has and the index lacks."""
        index = self.indexes.get(queue)
        if index is not None:
            for message_id, attempts in self.store.list_ready(queue, known=index.members):
                index.add(message_id, attempts)

    def merge_noticed(self) -> None:
        """Re-list each indexed queue whose notice changed since it was listed."""
        if time.monotonic() - self.noticed_at < NOTICE_SECONDS:
            return
        self.noticed_at = time.monotonic()
        for queue in list(self.indexes):
            token = self.store.read_notice(queue)
            if token is not None and token != self.notices.get(queue):
                self.notices[queue] = token
                self.relist(queue)
                self.log.debug("fetch.noticed", queue=queue, ready=len(self.indexes[queue]))

    # -- commands ---------------------------------------------------------------------------

    def ready(self, batch: Batch, request: Request) -> dict:
        """Notification: [id, deliveries] pairs became ready in a queue."""
        queue = fmt.validate_queue(request.payload.get("queue"))
        index = self.indexes.get(queue)
        if index is None and self.queues_listed_at is not None:
            index = self.ready_index(queue)  # Stats are watched: index every queue it owns.
        if index is not None:
            for message_id, attempts in request.payload.get("ids", ()):
                if self.handed.get((queue, message_id), 0) > attempts:
                    # Late: a listing found it first and it was handed out since.
                    continue
                index.add(message_id, attempts)
        return {}

    def relist_all(self, batch: Batch, request: Request) -> dict:
        """Notification from a restarted save actor or mover: a "ready" may have been lost."""
        for queue in list(self.indexes):
            self.relist(queue)
        return {}

    def fetch(self, batch: Batch, request: Request):
        """Hide the oldest ready message for the queue's timeout and return it; or wait for one."""
        queue = fmt.validate_queue(request.payload.get("queue"))
        wait = request.payload.get("wait") or 0
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= MAX_WAIT_SECONDS:
            raise Invalid(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds")
        result = self.take(batch, queue, request.payload.get("holder"))
        if result is not None:
            return result
        if not self.store.queue_exists(queue):
            self.forget_queue(queue)
            raise NotFound(f"queue {queue!r} does not exist")
        if wait <= 0:
            return {"empty": True}
        self.waiters.setdefault(queue, deque()).append((request.peer, request.rid,
                                                        time.monotonic() + wait, None))
        self.log.debug("fetch.wait", queue=queue, seconds=wait)
        return DEFERRED

    def cancel(self, batch: Batch, request: Request) -> dict:
        """Notification: the client of a long poll went away; drop its waiter."""
        rid = request.payload.get("request")
        for queue, waiting in list(self.waiters.items()):
            kept = deque(w for w in waiting if (w[0], w[1]) != (request.peer, rid))
            if len(kept) != len(waiting):
                self.log.debug("fetch.cancelled", queue=queue)
                if kept:
                    self.waiters[queue] = kept
                else:
                    del self.waiters[queue]
        fetch_any.cancel_watchers(self, request.peer, rid)
        return {}

    def stats(self, batch: Batch, request: Request) -> dict:
        """Per queue it owns: ready messages, the oldest one's age, and the event counters."""
        self.index_owned_queues()
        counted = self.counters.snapshot()
        now_ms = time.time() * 1000
        queues = {}
        for queue, index in self.indexes.items():
            oldest = index.oldest()
            entry = counted.get(queue) or {"totals": {}, "rates": {}}
            entry.update(ready=len(index), dead_letter_queue=self.props.effective(queue)["dead_letter_queue"],
                         oldest_ready_age_s=round(max(0.0, now_ms - id_time_ms(oldest)) / 1000, 3)
                         if oldest else None)
            queues[queue] = entry
        return {"actor": f"{self.kind}-{self.index}", "queues": queues,
                "flush": self.store.flush_times.snapshot()}

    def index_owned_queues(self) -> None:
        """Index every queue this actor owns that it has no index for: each is listed once,
        then kept current by notifications; queues/ itself is listed every few seconds."""
        now = time.monotonic()
        if self.queues_listed_at is not None and now - self.queues_listed_at < STATS_LIST_SECONDS:
            return
        self.queues_listed_at = now
        for queue in self.store.list_queues():
            if queue not in self.indexes and \
                    fetch_actor_for(queue, self.options.workers) == self.index:
                self.ready_index(queue)

    COMMANDS = {
        "fetch": fetch, "fetch_batch": fetch_batch.fetch_batch, "ack_batch": fetch_batch.ack_batch,
        "ready": ready, "relist": relist_all, "cancel": cancel, "stats": stats,
        "ack": replies.ack, "nack": replies.nack, "extend": replies.extend, "delete": replies.delete,
        "queue_get": queue_admin.queue_get, "queue_put": queue_admin.queue_put,
        "queue_delete": queue_admin.queue_delete, "redrive": queue_admin.redrive,
        "peek": queue_admin.peek, "purge": queue_admin.purge,
        "props_get": queue_admin.props, "props_put": queue_admin.props,
        "props_patch": queue_admin.props, "props_delete": queue_admin.props,
        "rules_get": queue_admin.rules, "rules_put": queue_admin.rules,
        "rules_delete": queue_admin.rules,
        "fetch_any": fetch_any.fetch_any, "watch": fetch_any.watch,
    }

    def take(self, batch: Batch, queue: str, holder: str | None = None,
             max_bytes: int | None = None) -> dict | None:
        """Claim the next ready message of the queue, or None when there is none (or, with
        max_bytes, when its file is larger: it stays ready, unclaimed).

        A claim that fails puts the message back in the index before the error goes up, so
        it is served once the disk recovers; a corrupt file is quarantined and skipped. In a
        fifo queue, messages of a group with an older message in flight (with another holder)
        are passed over (actors/message_groups.py).
        """
        index = self.ready_index(queue)
        props = batch.properties(queue, self.props)
        timeout, fifo = props["timeout"], props["fifo"]
        expired_before = rules.expiry_cutoff_ms(props["retention"], time.time())
        while True:
            taken = self.groups.take(index, self.options.peers, queue, holder) if fifo \
                else index.take(self.options.peers)
            if taken is None:
                return None
            message_id, attempts = taken
            if rules.expired(message_id, expired_before):
                self.expire(batch, queue, message_id, attempts)
                continue
            if max_bytes is not None and fetch_batch.larger_than(
                    self.store.ready_path(queue, message_id, attempts), max_bytes):
                index.add(message_id, attempts)
                return None
            due = time.time() + timeout
            try:
                data = self.store.claim(queue, message_id, due, attempts)
            except OSError:
                index.add(message_id, attempts)
                # If the claim could not undo its rename, the mover finds the file and returns it.
                batch.hidden.append((queue, message_id, attempts + 1, time.time()))
                raise
            if data is None:
                continue  # Removed, or taken by a peer: try the next one.
            delivery = attempts + 1
            batch.dirs.update({self.store.queue_dir(queue), self.store.folder("delay")})
            try:
                message = fmt.decode_message(queue, message_id, data)
            except fmt.CorruptMessage as err:
                self.quarantine(batch, queue, message_id, delivery, due, err)
                continue
            batch.hidden.append((queue, message_id, delivery, due))
            self.handed[(queue, message_id)] = delivery
            if len(self.handed) > MAX_HANDED:
                self.handed.popitem(last=False)
            self.counters.count(queue, "fetches")
            if delivery > 1:
                self.counters.count(queue, "redeliveries")
            result = {"id": message_id, "body": message.body, "content_type": message.content_type,
                      "receipt": f"{message_id}.{delivery}", "attempts": delivery, "due": due,
                      "created_ms": message.created_ms, "parts": message.parts}
            if message.group or message.attributes:
                result.update(group=message.group, attributes=message.attributes)
            if fifo:
                result["holder"] = self.groups.hold(queue, message.group, message_id, delivery, holder)
            return result

    def drop_expired(self, batch: Batch, queue: str) -> None:
        """Remove the ready messages of the index older than the queue's retention (its oldest),
        so its count is right and none of them is handed out."""
        retention = self.props.effective(queue)["retention"]
        index = self.indexes.get(queue)
        if retention and index:
            floor = id_floor(rules.expiry_cutoff_ms(retention, time.time()))
            for message_id, attempts in index.drop_before(floor):
                self.expire(batch, queue, message_id, attempts)

    def expire(self, batch: Batch, queue: str, message_id: str, attempts: int) -> None:
        """Remove a ready message older than its queue's retention instead of handing it out."""
        left = self.store.remove(queue, message_id, known=("ready", attempts))
        if left is not None:
            batch.dirs.update({left, self.store.folder("remove")})
            self.log.info("fetch.expired", queue=queue, id=message_id)

    def quarantine(self, batch: Batch, queue: str, message_id: str, delivery: int, due: float,
                   err: Exception) -> None:
        """Keep a claimed file that is not a message in corrupt/, for an operator."""
        try:
            batch.dirs.add(self.store.quarantine(queue, message_id, delivery))
            self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err),
                           moved_to="corrupt")
        except OSError as move_err:
            batch.hidden.append((queue, message_id, delivery, due))  # Back to the queue later.
            self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err),
                           move_error=str(move_err))

    # -- long polls -------------------------------------------------------------------------

    def serve_waiters(self) -> None:
        """Answer long polls between batches: a message for each waiter that can have one,
        204 when time is up; then the pull-any watches, which claim nothing (so they come
        after the fetches)."""
        if not self.waiters:
            fetch_any.serve_watchers(self)
            return
        batch = Batch([])
        answered = self.feed_waiters(batch)
        self.settle(batch)
        self.send_notes(batch)
        for (peer, rid), result in zip(answered, batch.results):
            self.reply(peer, rid, result)
        fetch_any.serve_watchers(self)

    def feed_waiters(self, batch: Batch) -> list[tuple[bytes, bytes]]:
        """Claim for each waiter that can have a message (or whose time is up), appending its
        answer to the batch's results; return (peer, request id) of each, in that order."""
        now = time.monotonic()
        answered = []
        for queue in list(self.waiters):
            waiting = self.waiters[queue]
            while waiting:
                peer, rid, deadline, limit = waiting[0]
                result = None if deadline <= now else self.take_or_error(batch, queue, limit)
                if result is None and deadline > now:
                    break
                waiting.popleft()
                answered.append((peer, rid))
                batch.results.append(result or ({"empty": True} if limit is None
                                                else {"messages": []}))
            if not waiting:
                del self.waiters[queue]
        return answered

    def take_or_error(self, batch: Batch, queue: str, limit: int | None = None):
        """take() (take_many() for a batch fetch of `limit`), with any failure ending the wait
        as an answer, never the actor; None when there is nothing to take."""
        try:
            if limit is None:
                return self.take(batch, queue)
            return {"messages": messages} if (messages := fetch_batch.take_many(
                self, batch, queue, limit)) else None
        except OSError as err:
            return from_os_error(err, "cannot fetch")
        except Exception:
            self.log.exception("actor.error", op="fetch", queue=queue)
            return MqError("internal error in fetch actor")

    def handle(self, requests):
        """Apply a batch and answer the long polls it fed, with one flush for both (the
        claims for waiters join the batch's own changes: a separate flush would double the
        syncfs calls of a busy queue whose consumers long poll), then the pull-any watches."""
        if self.sock is None:
            return super().handle(requests)
        batch = self.batch_class(requests)
        for request in requests:
            batch.results.append(self.dispatch(batch, request))
        answered = self.feed_waiters(batch)
        self.settle(batch)
        self.send_notes(batch)
        for (peer, rid), result in zip(answered, batch.results[len(requests):]):
            self.reply(peer, rid, result)
        del batch.results[len(requests):]
        fetch_any.serve_watchers(self)  # After the claims: a watch claims nothing.
        return batch

    def tick(self) -> None:
        """Take in noticed messages; expire long polls and serve ones whose queue gained messages."""
        try:
            self.merge_noticed()
        except OSError as err:
            self.log.warning("fetch.notice_failed", error=str(err))
        self.serve_waiters()

    def poll_timeout_ms(self) -> int:
        """Wake for the nearest long-poll deadline, or to re-list queues someone waits on."""
        watched = fetch_any.nearest_deadline(self)
        if not self.waiters and watched is None:
            return 500
        nearest = min([w[0][2] for w in self.waiters.values()] + [watched or float("inf")])
        return max(0, min(int(RELIST_EMPTY_SECONDS * 1000), int((nearest - time.monotonic()) * 1000) + 1))
