"""ActorLink: the front's asyncio DEALER to one actor, with 503 instead of a hang when it dies."""

import asyncio
import itertools
import time
from typing import cast

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from mq import logs, protocol
from mq.config import Options
from mq.errors import MqError, Unavailable
from mq.operations import Cancel, EndWaits, Operation
from mq.store.root import actor_endpoint, mover_endpoint
from mq.supervisor import heartbeat

POLLIN = int(zmq.POLLIN)  # A plain int: bit tests on zmq's enum flags cost microseconds.
#: The deadline a request carries to its actor comes this share of its timeout (at most
#: MARGIN_SECONDS) before the link stops waiting: room for an add committed at the last
#: moment and its reply's way back, so that a 503 for the timeout means nothing was stored.
MARGIN_SHARE, MARGIN_SECONDS = 0.1, 1.0
#: Requests (long polls not counted) waiting on a queue's own fetch actor from which its
#: fetches go to the next fetch actor too: that actor is behind (docs/DELIVERY.md, "Hot queues").
HOT_WAITING = 16
#: Most queues remembered as served by their own fetch actor alone (fifo); past it, forgotten.
MAX_OWNER_ONLY = 10_000


def _expire(future: asyncio.Future, name: str, timeout: float) -> None:
    """A request's deadline passed: answer it with 503."""
    if not future.done():
        future.set_result(Unavailable(f"{name} did not answer within {timeout:g} s"))


class ActorLink:
    """Requests to one actor; each waits for its own reply, its actor's death, or a deadline."""

    def __init__(self, context: zmq.asyncio.Context, endpoint: str, name: str, timeout: float):
        self.name = name
        self.endpoint = endpoint
        self.timeout = timeout
        self.pending: dict[bytes, asyncio.Future] = {}
        self.weight = 0  # Messages the pending requests carry (a batch add counts each).
        self.outbox: list = []  # (request id, request, deadline) to send at the end of this loop turn
        self.numbers = itertools.count(1)
        sock: zmq.asyncio.Socket = context.socket(zmq.DEALER)
        sock.linger = 0
        # Never queue a request for an actor that is not connected: answer 503 at once.
        sock.immediate = 1
        sock.reconnect_ivl = 50
        sock.reconnect_ivl_max = 500
        sock.sndhwm = sock.rcvhwm = 100_000
        self.connected = False
        # Connected once the handshake is done: with IMMEDIATE, a send between the connection
        # (EVENT_CONNECTED) and the end of the handshake is refused, and its caller got 503.
        self.monitor = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        sock.connect(endpoint)
        # Requests and replies go through the plain socket under the asyncio one, read when
        # the loop sees its descriptor: pyzmq's futures for each send and receive were 5-6 %
        # of the front's CPU per add (bench/RESULTS.md).
        self.sock: zmq.Socket = zmq.Socket.shadow(sock.underlying)
        self.async_sock = sock  # Owns the socket (and the monitor); closed with the link.
        self.fd = self.sock.fileno()  # zmq.FD
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.fd, self._read)
        self.tasks = [asyncio.ensure_future(self._watch())]

    async def call(self, request: Operation, timeout: float | None = None, on_sent=None,
                   weight: int = 1) -> dict:
        """Send a request (mq.operations) and return the actor's result; raise its error, or
        Unavailable.

        on_sent(request_id) is called once the request is posted (to cancel it later); it
        leaves with the other requests of this turn of the event loop (_post);
        weight is how many messages it carries, counted in load until it is answered.
        """
        timeout = self.timeout if timeout is None else timeout
        rid = protocol.request_id(next(self.numbers))
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.pending[rid] = future
        self._post(rid, request,
                   time.monotonic() + timeout - min(MARGIN_SECONDS, timeout * MARGIN_SHARE))
        if on_sent is not None:
            on_sent(rid)
        # A timer on the future itself: cheaper than asyncio.wait_for, which wraps every call
        # in a second future and callbacks (this runs once per request).
        timer = loop.call_later(timeout, _expire, future, self.name, timeout)
        self.weight += weight
        try:
            result = await future
        finally:
            timer.cancel()
            self.pending.pop(rid, None)
            self.weight -= weight
        if isinstance(result, MqError):
            raise result
        result.pop("v", None)
        result.pop("ok", None)
        return result

    def cancel(self, rid: bytes) -> None:
        """Give up on a request (its client went away): the actor drops it if it still waits
        (a long poll), and the caller's await ends now with an empty result."""
        self._post(b"", Cancel(request=rid))  # After the request, if it still waits to go.
        future = self.pending.get(rid)
        if future is not None and not future.done():
            future.set_result({"empty": True, "cancelled": True})

    def end_waits(self) -> None:
        """Have the actor answer every long poll and watch of this link now, as if its time
        were up (the front drains): each caller's await ends with the actor's empty answer."""
        self._post(b"", EndWaits())  # After the requests still waiting to go.

    def _post(self, rid: bytes, request: Operation, deadline: float | None = None) -> None:
        """Send a request at the end of this turn of the event loop, with the others of the
        turn: one message and one ZeroMQ send for them all (protocol.encode_requests)."""
        if not self.outbox:
            self.loop.call_soon(self._flush)
        self.outbox.append((rid, request, deadline))

    def _flush(self) -> None:
        """Send the turn's requests; when the actor is not connected, each caller gets 503 at
        once (IMMEDIATE: nothing waits in a queue for an actor being restarted)."""
        outbox, self.outbox = self.outbox, []
        try:
            self._send(protocol.encode_requests(outbox))
        except zmq.ZMQError:  # Again; or the link closed in this turn (the front stopping)
            if heartbeat.root_lost_since():  # No actor runs while a daemon waits for its root.
                refusal = Unavailable("the root is not available (its file system is not "
                                      "mounted, or it is no mq root yet); retry later")
            else:
                refusal = Unavailable(f"{self.name} is not running; it is being restarted")
            for rid, *_ in outbox:
                future = self.pending.get(rid)
                if future is not None and not future.done():
                    future.set_result(refusal)

    @property
    def load(self) -> int:
        """Messages waiting for a reply (a request carries one, a batch add each of its own)."""
        return self.weight

    def _send(self, frames: list[bytes]) -> None:
        """Send without waiting (zmq.Again when the actor is not connected)."""
        try:
            self.sock.send_multipart(frames, flags=zmq.NOBLOCK)
        finally:
            # ZeroMQ's descriptor signals a change of state once: a send (even a refused one)
            # that took in replies on the way leaves them unsignalled, so look for them now.
            # cast: pyzmq types every option's value int | bytes; zmq.EVENTS is an int.
            if cast(int, self.sock.get(zmq.EVENTS)) & POLLIN:
                self.loop.call_soon(self._read)

    def _read(self) -> None:
        """Deliver every reply there is (a save batch answers all its requests at once)."""
        while True:
            try:
                frames = self.sock.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return  # Read until empty: only then does the descriptor signal again.
            self._deliver(frames)

    def _deliver(self, frames: list[bytes]) -> None:
        try:
            replies = protocol.decode_replies(frames)
        except Exception as err:
            logs.get().warning("front.bad_reply", actor=self.name, error=str(err))
            return
        pending = self.pending
        for rid, result in replies:
            future = pending.get(rid)
            if future is not None and not future.done():
                future.set_result(result)

    async def _watch(self) -> None:
        while True:
            # parse_, not recv_monitor_message: that one takes a socket, and raised here on the
            # first event, silently ending this task (a dead actor's requests waited the timeout).
            event = parse_monitor_message(await self.monitor.recv_multipart())
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.connected = True
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self.connected = False
                self._fail_pending()

    def _fail_pending(self) -> None:
        """The actor died: its replies will never come, so answer 503 now, not at the deadline."""
        if self.pending:
            logs.get().warning("front.actor_lost", actor=self.name, pending=len(self.pending))
        for future in self.pending.values():
            if not future.done():
                future.set_result(Unavailable(f"{self.name} stopped; it is being restarted"))

    def close(self) -> None:
        """Stop the link's tasks and sockets."""
        for task in self.tasks:
            task.cancel()
        self.loop.remove_reader(self.fd)
        self.async_sock.disable_monitor()
        self.monitor.close()
        self.async_sock.close()


class ActorPool:
    """The links to every actor, and which one a request goes to."""

    def __init__(self, options: Options, run_dir: str, front: int = 0):
        self.context = zmq.asyncio.Context()
        self.front = front  # This front's number.
        self.workers = options.workers
        self.save_batch = min(options.save_batch, options.max_waiting_adds)
        self.max_waiting = options.max_waiting_adds

        def link(kind, i):
            return ActorLink(self.context, actor_endpoint(run_dir, kind, i),
                             f"{kind} actor {i}", options.actor_timeout)

        self.savers = [link("save", i) for i in range(self.workers)]
        # Front i looks first at save actor i (mod W): with several fronts, each keeps its
        # adds on an actor of its own, whose batches stay big, instead of every front
        # crowding actor 0 (it saturated a core, bench/RESULTS.md "Many cores"); their
        # flushes are shared through the flush group (mq.store.group_flush).
        start = front % self.workers
        self.save_order = self.savers[start:] + self.savers[:start]
        self.fetchers = [link("fetch", i) for i in range(self.workers)]
        #: Queues whose fetches their own fetch actor alone serves (fifo: its message groups).
        self.owned_only: set[str] = set()
        # Asked only for statistics (its delayed and in-flight counts).
        self.mover = ActorLink(self.context, mover_endpoint(run_dir), "mover", options.actor_timeout)

    def saver(self) -> ActorLink:
        """The first connected save actor with fewer than --save-batch adds waiting, from this
        front's own (front i: actor i mod W), else the least busy; Unavailable when even that
        one has --max-waiting-adds.

        Concentrating adds on one actor makes its batches, and so the flushes they share,
        bigger: fewer syncfs calls per message (bench/RESULTS.md). A dead actor is skipped
        while it restarts, so one dead actor does not turn every other add into 503. An
        overloaded daemon refuses at once, rather than letting adds wait for --actor-timeout.
        """
        for link in self.save_order:
            if link.connected and link.load < self.save_batch:
                return link
        least = min(self.savers, key=lambda s: (not s.connected, s.load))
        if least.connected and least.load >= self.max_waiting:
            raise Unavailable(f"overloaded: {least.load} adds are waiting on every save actor; "
                              "retry later")
        return least

    def fetcher(self, queue: str) -> ActorLink:
        """The fetch actor that owns this queue."""
        return self.fetchers[protocol.fetch_actor_for(queue, self.workers)]

    def taker(self, queue: str) -> ActorLink:
        """The fetch actor a fetch of this queue goes to: its own while that one has fewer
        than HOT_WAITING requests waiting, else the first of the next ones (in turn after it)
        that has, else the least busy; a dead one is passed over while it restarts.

        Any fetch actor can claim a queue's messages, as a peer daemon does: each claim is an
        exclusive rename, so none goes out twice (docs/DELIVERY.md, "Hot queues").
        """
        first = protocol.fetch_actor_for(queue, self.workers)
        owner = self.fetchers[first]
        if owner.load < HOT_WAITING and owner.connected or self.workers == 1 \
                or queue in self.owned_only:
            return owner
        order = self.fetchers[first + 1:] + self.fetchers[:first]
        for link in order:
            if link.connected and link.load < HOT_WAITING:
                return link
        return min([owner, *order], key=lambda link: (not link.connected, link.load))

    def owner_only(self, queue: str) -> None:
        """Send the queue's fetches to its own fetch actor alone from now on (another one
        answered that it does not serve them: a fifo queue)."""
        if len(self.owned_only) >= MAX_OWNER_ONLY:
            self.owned_only.clear()  # Relearned, one refused fetch per queue.
        self.owned_only.add(queue)

    def close(self) -> None:
        """Close every link."""
        for link in self.savers + self.fetchers + [self.mover]:
            link.close()
        self.context.term()
