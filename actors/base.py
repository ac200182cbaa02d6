"""The loop every request-serving actor runs: decode, dispatch, translate errors, flush, reply.

Each actor class has a command table, op class -> function. The loop decodes each
payload into its op's request type (mq.operations, checked before any handler runs), applies
a batch's requests in arrival order, one error value per failed request, flushes once for the
whole batch, sends the notifications the batch collected, and only then replies: a change
already made is always flushed and reported, whatever later requests of the batch did.
"""

import signal
import time
from collections.abc import Callable, Collection
from typing import Generic, TypeVar

import zmq

from mq import logs, protocol
from mq.actors.batch import DEFERRED, Batch, Request
from mq.actors.mover_notes import MoverNotes
from mq.actors.pace import Pace
from mq.config import Options
from mq.errors import Invalid, MqError, Unavailable, from_os_error
from mq.operations import Cancel, Operation, Ready, Relist, Rescan, Stats, Taken
from mq.store import Store
from mq.store.gone_queues import GoneQueues
from mq.store.group_flush import GroupFlush, flush_file
from mq.store.root import RootWatch, actor_endpoint, mover_endpoint, socket_path
from mq.supervisor import heartbeat

#: Most requests taken from the socket into one batch (one flush serves them all).
MAX_BATCH_REQUESTS = 256
#: Send high-water mark of the actors' own DEALER sockets (notifications to other actors).
NOTE_HWM = 100_000
#: Ops served while the root is away: they read the actor's memory only.
ROOT_FREE_OPS = frozenset({Stats.op, Cancel.op})
#: Error kinds a vanished root produces in the moment before the supervisor sees it (a queue
#: "not found" in the empty mount point, ENOENT on new/): checked against the root then.
ROOT_SUSPECT_KINDS = frozenset({"not_found", "internal", "storage", "unavailable"})

#: The Batch class of an actor's batches, which its hooks (settle, send_notes, ...) receive.
B = TypeVar("B", bound=Batch)


def _field(request: Request, name: str):
    """A field of a request for a log line: decoded, or as its payload has it."""
    if request.decoded is not None:
        return getattr(request.decoded, name, None)
    return request.payload.get(name)


class Actor(Generic[B]):
    """A single-threaded actor bound to a ROUTER socket, serving the ops of COMMANDS."""

    kind = "actor"
    #: What the actor refuses before any work (actors/pace.py, docs/PROTOCOL.md "Shed before
    #: work"): a fetch actor nothing; a save actor what is already past its deadline.
    refuses = "none"
    #: op class -> function(actor, batch, request, sender) where request is the payload
    #: decoded into that class (mq.operations) and sender the Request it came in (peer and
    #: request id); the function returns a result dict, DEFERRED, or raises.
    COMMANDS: dict[type[Operation], Callable[..., object]] = {}
    #: The Batch class this actor's batches use (each actor class names its own).
    batch_class: type[B]

    def __init__(self, options: Options, index: int, run_dir: str, store: Store | None = None):
        self.options = options
        self.index = index
        self.run_dir = run_dir
        self.store = store or Store(options.root, options.sync, options.auto_create)
        self.log = logs.get().bind(actor=f"{self.kind}-{index}")
        # Made by run(): an actor served in-process (tests) has no sockets.
        self.context: zmq.Context | None = None
        self.sock: zmq.Socket | None = None
        self.mover: zmq.Socket | None = None
        #: Timers and settlements for the mover, sent together (actors/mover_notes.py).
        self.mover_notes = MoverNotes(lambda note: self.send(self.mover, note))
        self.fetchers: list = []
        self.stopping = False
        self._named: tuple[dict, dict] = ({}, {})
        self.root_watch = RootWatch(options.root, options.root_id)
        self.root_was_lost = False
        #: Time per message, whole batches and their settle() alone, by which requests that
        #: cannot finish before their deadline are refused (actors/pace.py).
        self.pace = Pace(commit=Pace(), refuses=self.refuses)
        #: Forgets the queues that went without this actor hearing (actors/gone_queues.py).
        self.gone = GoneQueues(self.store.queues.list_queues, self.store.queues.queue_exists,
                               self.queue_tables, self.forget_queues, self.log)

    # -- sockets --------------------------------------------------------------------------

    def endpoint(self) -> str:
        """The address this actor binds."""
        return actor_endpoint(self.run_dir, self.kind, self.index)

    def socket(self, kind: int) -> zmq.Socket:
        """A new socket of this actor's context."""
        assert self.context is not None, "sockets are made once run() has made the context"
        return self.context.socket(kind)

    def bind(self) -> zmq.Socket:
        """Bind the ROUTER socket, replacing a stale socket file from a dead predecessor."""
        sock = self.socket(zmq.ROUTER)
        sock.linger = 0
        self.store.disk.discard(socket_path(self.endpoint()))
        sock.bind(self.endpoint())
        return sock

    def dealer(self, endpoint: str) -> zmq.Socket:
        """A DEALER for one-way notifications to another actor of this daemon."""
        sock = self.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = NOTE_HWM
        sock.connect(endpoint)
        return sock

    def connect_mover(self) -> None:
        """Connect to the mover and ask it to rescan delay/: a predecessor killed between a
        rename into delay/ and its notification left a message there no timer would release."""
        self.mover = self.dealer(mover_endpoint(self.run_dir))
        self.send(self.mover, Rescan())

    def connect_fetchers(self) -> None:
        """Connect to every fetch actor and ask each to re-list its queues: a predecessor killed
        between a rename into a queue and its "ready" left a message no index holds."""
        self.fetchers = [self.dealer(actor_endpoint(self.run_dir, "fetch", i))
                         for i in range(self.options.workers)]
        for sock in self.fetchers:
            self.send(sock, Relist())

    def send(self, sock: zmq.Socket | None, note: Operation) -> None:
        """A one-way message; dropped if its peer is down or far behind (it re-reads the disk)."""
        if sock is None:
            return
        try:
            sock.send_multipart(protocol.encode_notification(note), zmq.NOBLOCK)
        except zmq.Again:
            pass

    def send_notes(self, batch: B) -> None:
        """After the flush: due times and settlements to the mover (within
        mover_notes.LINGER_SECONDS), ready messages to their fetch actors."""
        self.mover_notes.add(batch.hidden, batch.settled)
        for queue, ids in batch.ready.items():
            self.tell_ready(queue, ids)
        self.post_notices(batch.ready)

    def post_notices(self, queues) -> None:
        """With --peers, replace the notice file of each queue that gained ready messages: the
        other daemons' fetch actors hear no notification from this one, they read the notices
        (docs/CLUSTER.md, "Visibility")."""
        if self.options.peers:
            for queue in queues:
                self.store.notices.post(queue)

    def tell_ready(self, queue: str, ids: list) -> None:
        """Tell the queue's fetch actor about ready [id, deliveries] pairs."""
        if self.fetchers:
            owner = self.fetchers[protocol.fetch_actor_for(queue, len(self.fetchers))]
            self.send(owner, Ready(queue=queue, ids=ids))

    def tell_taken(self, queue: str, ids: list) -> None:
        """Tell the queue's fetch actor about [id, bytes] pairs a redrive moved out of it."""
        if self.fetchers:
            owner = self.fetchers[protocol.fetch_actor_for(queue, len(self.fetchers))]
            self.send(owner, Taken(queue=queue, ids=ids))

    # -- the batch ------------------------------------------------------------------------

    def start(self) -> None:
        """Work done once before serving (connect to peers, load indexes)."""

    def tick(self) -> None:
        """Work done after every batch and on every poll timeout."""

    def poll_timeout_ms(self) -> int:
        """How long to wait for requests before calling tick again."""
        return 500

    def queue_tables(self) -> dict[str, Collection[str]]:
        """Each table of per-queue state this actor keeps, by name: the queues it holds."""
        return {}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop everything kept about queues that are gone."""

    def before_flush(self, batch: B) -> None:
        """Work joined to a batch after its requests, covered by its one flush (the fetch
        actor claims for its long polls here)."""

    def after_flush(self, batch: B) -> None:
        """Work after a batch's flush and notifications, before its requests are answered
        (the fetch actor answers the long polls and watches the batch fed)."""

    def new_batch(self, requests: list[Request]) -> B:
        """The batch the requests will be applied in (of this actor's batch_class)."""
        return self.batch_class(requests)

    def handle(self, requests: list[Request]) -> B:
        """Apply a batch, flush once, send its notifications; return it with one result each."""
        batch = self.new_batch(requests)
        self.pace.begin()
        for request in requests:
            batch.results.append(self.dispatch(batch, request))
        self.before_flush(batch)
        settling = time.monotonic()
        self.settle(batch)
        self.pace.end(settled=time.monotonic() - settling)
        self.send_notes(batch)
        self.after_flush(batch)
        return batch

    def dispatch(self, batch: B, request: Request):
        """One request through the command table: its payload decoded into the op's request
        type (checked: Invalid before any handler runs), then its handler; every failure
        becomes an error value."""
        command = self.by_name().get(request.op or "")
        if command is None:
            return Invalid(f"{self.kind} actor cannot {request.op!r}")
        kind, handler = command
        refusal = self.pace.start(request.payload)
        if refusal is not None:
            return refusal  # Before its handler touches the disk.
        try:
            decoded = request.decoded
            if decoded is None:
                decoded = request.decoded = kind.from_payload(request.payload)
            return handler(self, batch, decoded, request)
        except MqError as err:
            return err
        except OSError as err:
            error = from_os_error(err, f"cannot {request.op}")
            self.log.error("actor.disk_error", op=request.op, queue=_field(request, "queue"),
                           id=_field(request, "id"), error=error.message, kind=error.kind)
            return error
        except Exception:
            self.log.exception("actor.error", op=request.op, queue=_field(request, "queue"),
                               id=_field(request, "id"))
            return MqError(f"internal error in {self.kind} actor")

    def by_name(self) -> dict[str, tuple[type[Operation], Callable[..., object]]]:
        """COMMANDS by op name (the payload's "op"), made again only when COMMANDS is replaced."""
        table = self.COMMANDS
        if self._named[0] is not table:
            self._named = (table, {kind.op: (kind, handler) for kind, handler in table.items()})
        return self._named[1]

    def settle(self, batch: B) -> None:
        """Flush what the batch changed; when that fails, undo what can be undone and turn
        its successes into the error (nothing unflushed is acknowledged)."""
        if not batch.changes:
            return
        try:
            self.store.flush(batch.changes)
        except OSError as err:
            error = from_os_error(err, "cannot flush")
            self.log.error("actor.flush_failed", error=error.message, requests=len(batch.requests))
            for pos, undo in batch.undo.items():
                undo()
                batch.results[pos] = error
            batch.results = [error if isinstance(r, dict) else r for r in batch.results]

    def join_flush_group(self) -> None:
        """With --flush-group and sync=fs, share syncfs calls with the daemon's other actors:
        one that started after this actor's changes covers them (mq.store.group_flush)."""
        if (self.options.flush_group and self.store.disk.sync == "fs"
                and self.store.disk.group is None):
            self.store.disk.share_flushes(GroupFlush(flush_file(self.run_dir)))

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until SIGTERM, then finish the batch in hand and exit."""
        signal.signal(signal.SIGTERM, self._stop)
        # Ctrl-C reaches the whole process group; the supervisor alone turns it into an
        # orderly stop (front drains first), so actors ignore it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.context = zmq.Context()
        self.sock = self.bind()
        self.join_flush_group()
        self.start()
        self.log.info("actor.start", endpoint=self.endpoint())
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stopping:
            # Once a turn: a loop that stops turning (a batch that never ends) stops beating.
            heartbeat.beat()
            try:
                ready = poller.poll(self.mover_notes.wait_ms(self.poll_timeout_ms()))
            except zmq.ZMQError:
                continue
            if ready:
                self.serve()
            if not self.root_lost():
                self.tick()
                self.gone()
            else:  # Its chores would meet an empty folder meanwhile.
                self.root_away()
            self.mover_notes.send_due()
        self.mover_notes.send_all()
        self.log.info("actor.stop")

    # -- the root's file system (docs/OPERATIONS.md, "The root's file system") -------------

    def root_lost(self) -> bool:
        """Whether the supervisor says the root is away (a load from shared memory); on the
        way back, re-list and rescan as at a start: notifications were dropped meanwhile."""
        lost = bool(heartbeat.root_lost_since())
        if self.root_was_lost and not lost:
            for sock in self.fetchers:
                self.send(sock, Relist())
            self.send(self.mover, Rescan())
        self.root_was_lost = lost
        return lost

    def root_away(self) -> None:
        """Instead of tick() while the root is away (the fetch actor answers its long polls)."""

    def root_refusal(self) -> Unavailable:
        """The answer to an op that needs the root while it is away."""
        return Unavailable(f"the root {self.store.root} is not available (its file system is "
                           "not mounted); retry later")

    def recheck_root(self, results: list) -> None:
        """Replace errors the root's loss may have caused in the moment before the supervisor
        saw it (a queue "not found" in the empty mount point) by the refusal: the root checked
        on the file system itself (one stat of FORMAT), on such errors only. The supervisor's
        last verdict can be 0.2 s old, too old to tell a missing queue from a missing root."""
        if any(isinstance(r, MqError) and r.kind in ROOT_SUSPECT_KINDS for r in results):
            if self.root_watch.check():
                for pos, result in enumerate(results):
                    if isinstance(result, MqError) and result.kind in ROOT_SUSPECT_KINDS:
                        results[pos] = self.root_refusal()

    def shed(self, requests: list[Request]) -> list[Request]:
        """The requests this actor can finish before their deadlines; the others are refused
        now, before any work (actors/pace.py)."""
        admitted, refused, refusal = self.pace.admit(requests)
        if refused:
            self.reply_all((r.peer, r.rid, refusal) for r in refused if r.rid)
            self.log.warning("actor.shed", refused=len(refused), admitted=len(admitted))
        return admitted

    def reply(self, peer: bytes, rid: bytes, result) -> None:
        """Send one reply (a result dict or an MqError)."""
        self.send_frames(protocol.encode_reply(peer, rid, result))

    def send_frames(self, frames: list[bytes]) -> None:
        """Send one message of replies on the actor's own socket."""
        assert self.sock is not None, "replies go out once run() has bound the socket"
        self.sock.send_multipart(frames)

    def reply_all(self, answers) -> None:
        """Send (peer, request id, result) answers: one message per peer (a front sends a
        batch's requests over one link), as protocol.encode_replies splits them."""
        by_peer: dict = {}
        for peer, rid, result in answers:
            by_peer.setdefault(peer, []).append((rid, result))
        for peer, replies in by_peer.items():
            for frames in protocol.encode_replies(peer, replies):
                self.send_frames(frames)

    def _stop(self, *_):
        self.stopping = True

    def serve(self) -> None:
        """Take every request waiting (from MAX_BATCH_REQUESTS on, no further message), handle them as
        one batch, reply."""
        assert self.sock is not None, "run() binds the socket before it serves"
        requests: list[Request] = []
        while len(requests) < MAX_BATCH_REQUESTS:
            try:
                frames = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                decoded = protocol.decode_requests(frames)
            except Exception as err:  # A malformed frame is answered "invalid", never fatal.
                self.log.warning("actor.bad_frame", error=str(err))
                if len(frames) == 3 and frames[1]:
                    self.reply(frames[0], frames[1], Invalid(f"bad request frame: {err}"))
                continue
            for peer, rid, payload in decoded:
                if isinstance(payload, dict):
                    requests.append(Request(peer, rid, payload))
                    continue
                self.log.warning("actor.bad_frame", error=str(payload))
                if rid:
                    self.reply(peer, rid, Invalid(f"bad request frame: {payload}"))
        if not requests:
            return
        if self.root_lost():
            # Nothing touches the root meanwhile: notifications are dropped (re-listed when it
            # is back), requests refused unless they read memory only.
            for request in requests:
                if request.rid and request.op not in ROOT_FREE_OPS:
                    self.reply(request.peer, request.rid, self.root_refusal())
            # A front's cancel is a notification (no request id) that reads memory only.
            requests = [r for r in requests if r.op in ROOT_FREE_OPS]
            if not requests:
                return
        requests = self.shed(requests)
        if not requests:
            return
        started = time.monotonic()
        batch = self.handle(requests)
        self.recheck_root(batch.results)
        self.reply_all((request.peer, request.rid, result)
                       for request, result in zip(requests, batch.results)
                       if request.rid and result is not DEFERRED)
        self.log.debug("actor.batch", size=len(requests),
                       ms=round((time.monotonic() - started) * 1000, 2))
