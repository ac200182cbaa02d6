"""The loop every request-serving actor runs: receive a batch, handle it, flush once, reply."""

import os
import signal
import time

import zmq

from mq import logs, protocol
from mq.errors import Invalid, MqError
from mq.store import Store

#: Most requests taken from the socket into one batch (one flush serves them all).
MAX_BATCH = 256
#: A result meaning "no reply now": the actor answers later (a long poll).
DEFERRED = object()


class Actor:
    """A single-threaded actor bound to a ROUTER socket; subclasses implement handle_batch."""

    kind = "actor"

    def __init__(self, options, index: int, run_dir: str):
        self.options = options
        self.index = index
        self.run_dir = run_dir
        self.store = Store(options.root, options.sync, options.auto_create)
        self.log = logs.get().bind(actor=f"{self.kind}-{index}")
        self.context = zmq.Context()
        self.stopping = False

    def endpoint(self) -> str:
        """The address this actor binds."""
        return protocol.actor_endpoint(self.run_dir, self.kind, self.index)

    def bind(self) -> zmq.Socket:
        """Bind the ROUTER socket, replacing a stale socket file from a dead predecessor."""
        sock = self.context.socket(zmq.ROUTER)
        sock.linger = 0
        path = self.endpoint()[len("ipc://"):]
        if os.path.exists(path):
            os.unlink(path)
        sock.bind(self.endpoint())
        return sock

    def start(self) -> None:
        """Work done once before serving (load indexes, connect to peers)."""

    def connect_mover(self) -> zmq.Socket:
        """A socket for telling the mover about messages placed in delay/.

        It first asks the mover to rescan delay/: a predecessor killed between a rename into
        delay/ and its notification left a message there that no timer would ever release.
        """
        sock = self.context.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = 100_000
        sock.connect(protocol.mover_endpoint(self.run_dir))
        try:
            sock.send_multipart(protocol.encode_notification("rescan"), zmq.NOBLOCK)
        except zmq.Again:
            pass  # The mover is down: it scans delay/ when it starts.
        return sock

    def tell_mover(self, hidden: list[tuple[str, str, int, float]]) -> None:
        """Notify the mover of (queue, id, deliveries, due) in delay/; it rescans if one is lost."""
        for queue, message_id, attempts, due in hidden:
            self.send_mover("delayed", queue=queue, id=message_id, attempts=attempts, due=due)

    def send_mover(self, op: str, **fields) -> None:
        """A one-way message to the mover; dropped if it is down (it rescans delay/ at start)."""
        try:
            self.mover.send_multipart(protocol.encode_notification(op, **fields), zmq.NOBLOCK)
        except zmq.Again:
            pass

    def tick(self) -> None:
        """Work done after every batch and on every poll timeout."""

    def poll_timeout_ms(self) -> int:
        """How long to wait for requests before calling tick again."""
        return 500

    def handle_batch(self, requests: list[tuple[bytes, bytes, dict]]) -> list:
        """Handle a batch of (peer, request_id, payload); return one result per request."""
        raise NotImplementedError

    def run(self) -> None:
        """Serve until SIGTERM, then finish the batch in hand and exit."""
        signal.signal(signal.SIGTERM, self._stop)
        # Ctrl-C reaches the whole process group; the supervisor alone turns it into an
        # orderly stop (front drains first), so actors ignore it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sock = self.sock = self.bind()
        self.start()
        self.log.info("actor.start", endpoint=self.endpoint())
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        while not self.stopping:
            try:
                ready = poller.poll(self.poll_timeout_ms())
            except zmq.ZMQError:
                continue
            if ready:
                self._serve(sock)
            self.tick()
        self.log.info("actor.stop")

    def reply(self, peer: bytes, rid: bytes, result) -> None:
        """Send one reply (a result dict or an MqError)."""
        self.sock.send_multipart(protocol.encode_reply(peer, rid, result))

    def _stop(self, *_):
        self.stopping = True

    def _serve(self, sock: zmq.Socket) -> None:
        batch = []
        while len(batch) < MAX_BATCH:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                batch.append(protocol.decode_request(frames))
            except Exception as err:  # A malformed frame is answered "invalid", never fatal.
                self.log.warning("actor.bad_frame", error=str(err))
                if len(frames) == 3 and frames[1]:
                    self.reply(frames[0], frames[1], Invalid(f"bad request frame: {err}"))
        if not batch:
            return
        started = time.monotonic()
        try:
            results = self.handle_batch(batch)
        except Exception:
            self.log.exception("actor.error")
            results = [MqError("internal error in actor")] * len(batch)
        for (peer, rid, _), result in zip(batch, results):
            if rid and result is not DEFERRED:
                self.reply(peer, rid, result)
        self.log.debug("actor.batch", size=len(batch), ms=round((time.monotonic() - started) * 1000, 2))
