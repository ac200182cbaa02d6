"""Batch: what one batch of requests did, so the loop can flush once, then notify and reply."""

from dataclasses import dataclass, field

from mq.store import Changes

#: A result meaning "no reply now": the actor answers later (a long poll).
DEFERRED = object()


@dataclass
class Request:
    """One request of a batch: who asked (peer and request id, empty for a notification)."""

    peer: bytes
    rid: bytes
    payload: dict
    #: The payload decoded into its op's request type (mq.operations), once it is dispatched;
    #: set beforehand for a request an actor makes itself (a fan-out's copies).
    decoded: object = None

    @property
    def op(self) -> str | None:
        """The operation asked for (None in a payload without one, which no actor serves)."""
        return self.payload.get("op")


@dataclass
class Batch:
    """The requests of one batch and their effects, collected while they are applied.

    changes: the folders the store operations of the batch changed (they record them), to
    flush once before any reply. hidden: (queue, id, deliveries, due) put in
    delay/, for the mover. ready: queue -> [id, deliveries] made ready, for its fetch actor.
    undo: what to call, per request position, when the flush fails (the change is not kept).
    settled: (queue, id, deliveries) taken out of delay/ (id or deliveries None: every one),
    for the mover's counts of delayed and in-flight messages and its timers.
    props: queue -> its effective properties, read once per batch (a batch is applied at one
    moment, and a fetch actor's batch often holds many fetches of one queue).
    """

    requests: list[Request]
    results: list = field(default_factory=list)
    changes: Changes = field(default_factory=Changes)
    hidden: list = field(default_factory=list)
    ready: dict = field(default_factory=dict)
    undo: dict = field(default_factory=dict)
    settled: list = field(default_factory=list)
    props: dict = field(default_factory=dict)

    def properties(self, queue: str, files) -> dict:
        """The queue's effective properties, read from its PropertyFiles once per batch."""
        found = self.props.get(queue)
        if found is None:
            found = self.props[queue] = files.effective(queue)
        return found

    def add_ready(self, queue: str, message_id: str, attempts: int = 0,
                  size: int | None = None) -> None:
        """Record a message made ready, to tell its queue's fetch actor after the flush (with
        its file's size when known: the fetch actor's statistics then need no stat)."""
        self.ready.setdefault(queue, []).append(
            [message_id, attempts] if size is None else [message_id, attempts, size])
