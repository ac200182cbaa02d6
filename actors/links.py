"""An actor's ZeroMQ links: the ROUTER it serves and replies on, and the DEALERs that carry
its one-way notifications to the mover and to the fetch actors of its daemon.

Mixed into every actor (actors/base.py, `Actor`), whose run() makes the context and binds
the ROUTER; an actor served in-process (tests) has no sockets, and its notifications go
nowhere. A notification is dropped rather than queued when its peer is down or far behind:
the peer re-reads the disk (docs/PROTOCOL.md). With --peers, the other daemons hear none of
them and read the notice files instead (`post_notices`).
"""

import zmq

from mq import protocol
from mq.config import Options
from mq.operations import Operation, Ready, Relist, Rescan, Taken
from mq.store import Store
from mq.store.root import actor_endpoint, mover_endpoint, socket_path

#: Send high-water mark of the actors' own DEALER sockets (notifications to other actors).
NOTE_HWM = 100_000


class Links:
    """The sockets of an actor: its ROUTER (`sock`), its DEALERs to the mover (`mover`) and
    to every fetch actor (`fetchers`, by index), within the ZeroMQ `context` run() makes."""

    kind: str
    index: int
    run_dir: str
    options: Options
    store: Store
    context: zmq.Context | None
    sock: zmq.Socket | None
    mover: zmq.Socket | None
    fetchers: list

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
