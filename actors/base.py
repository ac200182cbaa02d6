"""The loop every request-serving actor runs: decode, dispatch, translate errors, flush, reply.

Each actor class has a command table, op class -> function. The loop decodes each
payload into its op's request type (mq.operations, checked before any handler runs), applies
a batch's requests in arrival order, one error value per failed request, flushes once for the
whole batch, sends the notifications the batch collected, and only then replies: a change
already made is always flushed and reported, whatever later requests of the batch did.

An actor's sockets and notifications are its `Links` (actors/links.py); what it does while
its root is away, `RootAway` (actors/root_away.py); the requests it refuses before any work,
its `Pace` (actors/pace.py).
"""

import inspect
import signal
import time
from collections.abc import Callable, Collection
from typing import Generic, TypeVar

import zmq

from mq import logs, protocol
from mq.actors.batch import DEFERRED, Batch, Request
from mq.actors.links import Links
from mq.actors.mover_notes import MoverNotes
from mq.actors.pace import Pace
from mq.actors.root_away import RootAway
from mq.config import Options
from mq.errors import Invalid, MqError, from_os_error
from mq.operations import Operation
from mq.store import Store
from mq.store.gone_queues import GoneQueues
from mq.store.group_flush import GroupFlush, flush_file
from mq.store.root import RootWatch
from mq.supervisor import heartbeat

#: Most requests taken from the socket into one batch (one flush serves them all).
MAX_BATCH_REQUESTS = 256

#: The Batch class of an actor's batches, which its hooks (settle, send_notes, ...) receive.
B = TypeVar("B", bound=Batch)


def _field(request: Request, name: str):
    """A field of a request for a log line: decoded, or as its payload has it."""
    if request.decoded is not None:
        return getattr(request.decoded, name, None)
    return request.payload.get(name)


def taking_fields(kind: type[Operation], function: Callable[..., object]) -> Callable[..., object]:
    """function, once its parameters after (actor, batch, sender) are found to be the op's
    fields in their declared order (the loop passes them by position); TypeError if not."""
    parameters = list(inspect.signature(function).parameters)[3:]
    if parameters != list(kind.names):
        raise TypeError(f"{function.__qualname__} takes {parameters}, {kind.op} has {kind.names}")
    return function


class Actor(Links, RootAway, Generic[B]):
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
        self._fields: tuple[dict, dict] = ({}, {})
        self.root_watch = RootWatch(options.root, options.root_id)
        self.root_was_lost = False
        #: Time per message, whole batches and their settle() alone: it refuses what is past
        #: its deadline, names the Retry-After, and times a save batch's commit (actors/pace.py).
        self.pace = Pace(commit=Pace(), refuses=self.refuses)
        #: Forgets the queues that went without this actor hearing (actors/gone_queues.py).
        self.gone = GoneQueues(self.store.queues.list_queues, self.store.queues.queue_exists,
                               self.queue_tables, self.forget_queues, self.log)

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

    def send_notes(self, batch: B) -> None:
        """After the flush: due times and settlements to the mover (within
        mover_notes.LINGER_SECONDS), ready messages to their fetch actors."""
        self.mover_notes.add(batch.hidden, batch.settled)
        for queue, ids in batch.ready.items():
            self.tell_ready(queue, ids)
        self.post_notices(batch.ready)

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
        self.dispatch_all(batch, requests)
        self.before_flush(batch)
        settling = time.monotonic()
        self.settle(batch)
        self.pace.end(settled=time.monotonic() - settling)
        self.send_notes(batch)
        self.after_flush(batch)
        return batch

    def dispatch_all(self, batch: B, requests: list[Request]) -> None:
        """Each request's result into the batch, in order: a command taking its op's fields
        (commands.by_fields) is called with them as the op's checks give them, in this one
        loop (no op object, no dispatch() per request); any other through dispatch()."""
        results, fields, start = batch.results, self.by_fields(), self.pace.start
        for request in requests:
            payload = request.payload
            command = fields.get(payload.get("op") or "") if request.decoded is None else None
            if command is None:
                results.append(self.dispatch(batch, request))
                continue
            refusal = start(payload)
            if refusal is not None:
                results.append(refusal)  # Before its handler touches the disk.
                continue
            kind, function = command
            try:
                results.append(function(self, batch, request,
                                        *kind.checked(payload, kind.spec).values()))
            except MqError as err:
                results.append(err)
            except Exception as err:
                results.append(self.failure(request, err))

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
        except Exception as err:
            return self.failure(request, err)

    def failure(self, request: Request, err: Exception) -> MqError:
        """The error value of a request whose handler raised other than an MqError, logged:
        a disk error as its kind (503), anything else as an internal error."""
        if isinstance(err, OSError):
            error = from_os_error(err, f"cannot {request.op}")
            self.log.error("actor.disk_error", op=request.op, queue=_field(request, "queue"),
                           id=_field(request, "id"), error=error.message, kind=error.kind)
            return error
        # Called in the except clause: the traceback logged is the handler's.
        self.log.exception("actor.error", op=request.op, queue=_field(request, "queue"),
                           id=_field(request, "id"))
        return MqError(f"internal error in {self.kind} actor")

    def by_name(self) -> dict[str, tuple[type[Operation], Callable[..., object]]]:
        """COMMANDS by op name (the payload's "op"), made again only when COMMANDS is replaced."""
        table = self.COMMANDS
        if self._named[0] is not table:
            self._named = (table, {kind.op: (kind, handler) for kind, handler in table.items()})
        return self._named[1]

    def by_fields(self) -> dict[str, tuple[type[Operation], Callable[..., object]]]:
        """(op class, function) by op name of the commands that take their op's fields
        (commands.by_fields), made again only when COMMANDS is replaced."""
        table = self.COMMANDS
        if self._fields[0] is not table:
            self._fields = (table, {kind.op: (kind, taking_fields(kind, handler.by_fields))
                                    for kind, handler in table.items()
                                    if hasattr(handler, "by_fields")})
        return self._fields[1]

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

    def shed(self, requests: list[Request]) -> list[Request]:
        """The requests this actor takes on: those past their deadline (for an actor that
        refuses them) are refused now, before any work (actors/pace.py)."""
        admitted, refused, refusal = self.pace.admit(requests)
        if refused:
            self.reply_all((r.peer, r.rid, refusal) for r in refused if r.rid)
            self.log.warning("actor.shed", refused=len(refused), admitted=len(admitted))
        return admitted

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
            requests = self.serve_while_away(requests)
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
