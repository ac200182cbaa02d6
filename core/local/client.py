"""LocalClient: the HTTP client's methods, straight on a root folder through mq.store, no daemon."""

import math
import time

from mq import delivery as rules
from mq import properties, trace_context
from mq.client.message import Message
from mq.errors import Invalid, NotFound
from mq.local import consume, produce, receipts
from mq.local.errors import translated
from mq.operations import (
    Fetch,
    Move,
    Peek,
    PropsGet,
    PropsPatch,
    Purge,
    QueueDelete,
    QueueGet,
    QueuePut,
    Redrive,
)
from mq.store import Changes, Root, Store

#: Seconds between looks at an empty queue while get(wait=...) waits.
POLL_SECONDS = 0.02
#: How a user of LocalClient makes a root, in the error for a folder that is none.
CREATE_HINT = "mq --create-root, or LocalClient(root, create_root=True) alone on it"


class LocalClient:
    """Producer and consumer of the queues under one root, safe beside other processes and
    daemons started with --peers >= 1 on the same root (docs/CLIENTS.md, "Broker-less library").

    sync: the flush policy, "fs" (syncfs), "file" (fsync each file and folder) or "auto" (file
    on network and FUSE file systems, else fs), as mq --sync.
    timeout: seconds a message stays hidden after get, for queues without a timeout property.
    strict_fifo: every get takes the oldest ready message of a fresh listing (Taker).
    create_root: make the root when the folder is missing or empty, for a process alone on
    its root; by default only an existing root is opened, and a folder without FORMAT (a
    shared file system's empty mount point, perhaps) is refused with UnavailableError, as a
    daemon with --peers waits for its root rather than make a second one.
    root_id: refuse (UnavailableError) a root whose ID is another (mq --create-root prints it).
    """

    @translated
    def __init__(self, root, *, sync: str = "auto", timeout: float = 30.0,
                 strict_fifo: bool = False, create_root: bool = False, root_id: str = ""):
        if sync not in ("auto", "fs", "file"):
            raise Invalid(f"sync must be 'auto', 'fs' or 'file', not {sync!r}")
        system = properties.validate({"timeout": timeout})
        # Checked before the Store even reads the file system's type: nothing is written
        # into a folder that is not a root unless asked to make one.
        if create_root:
            Root(str(root)).require_creatable()
        else:
            Root(str(root)).require_format(CREATE_HINT)
        self.store = Store(str(root), sync=sync)
        self.store.init(make=create_root, expect_id=root_id)
        self.props = properties.PropertyFiles(self.store, system)
        self.taker = consume.Taker(self.store, self.props, strict_fifo)

    # -- queues ---------------------------------------------------------------------------

    @translated
    def create_queue(self, queue: str) -> bool:
        """Create a queue durably; True when it was created, False when it existed."""
        return self.store.queues.create_queue(QueuePut.from_payload({"queue": queue}).queue)

    @translated
    def delete_queue(self, queue: str) -> None:
        """Delete a queue with its messages in every state, its keys and properties."""
        self.store.queues.delete_queue(QueueDelete.from_payload({"queue": queue}).queue)
        self.taker.forget(queue)

    @translated
    def queue_exists(self, queue: str) -> bool:
        """True when the queue exists."""
        return self.store.queues.queue_exists(QueueGet.from_payload({"queue": queue}).queue)

    @translated
    def stat(self, queue: str) -> dict:
        """{"queue", "ready", "properties"}: how many messages are ready (none past the
        queue's retention, as a get never hands those out), and the settings."""
        self.must_exist(queue)
        effective = self.props.effective(queue)
        cutoff = rules.expiry_cutoff_ms(effective["retention"], time.time())
        ready = sum(1 for message_id, _ in self.store.states.list_ready(queue)
                    if not rules.expired(message_id, cutoff))
        return {"queue": queue, "ready": ready, "properties": effective}

    @translated
    def properties(self, queue: str) -> dict:
        """The queue's effective properties (its own, the first matching rule, the system's)."""
        return self.props.effective(PropsGet.from_payload({"queue": queue}).queue)

    @translated
    def set_properties(self, queue: str, **props) -> dict:
        """Patch the queue's own properties durably; return the effective ones."""
        request = PropsPatch.from_payload({"queue": queue, "properties": props})
        self.store.write_json(self.store.props_path(request.queue),
                              {**self.props.own(queue), **request.properties})
        return self.props.effective(queue)

    @translated
    def peek(self, queue: str, max: int = 10, after: str | None = None) -> list[Message]:
        """Up to `max` of the oldest ready messages (ids after `after`, none past the queue's
        retention), their bodies within the daemon's byte cap of one answer (8 MiB together,
        the first whatever its size: mq.delivery.joins_answer), none claimed."""
        request = Peek.from_payload({"queue": queue, "max": max, "after": after})
        self.must_exist(queue)
        cutoff = rules.expiry_cutoff_ms(self.props.effective(queue)["retention"], time.time())
        candidates = ((message_id, attempts)
                      for message_id, attempts in sorted(self.store.states.list_ready(queue))
                      if (request.after is None or message_id > request.after)
                      and not rules.expired(message_id, cutoff))
        return [Message(queue, message_id, message.body, message.content_type, None, attempts,
                        message.created_ms, **trace_context.of_message(message.attributes))
                for message_id, attempts, message in
                rules.peeked(self.store, queue, candidates, request.max)]

    @translated
    def purge(self, queue: str) -> int:
        """Remove every message of the queue in every state; keep the queue and its settings."""
        purged = self.store.queues.purge_queue(Purge.from_payload({"queue": queue}).queue)
        self.taker.forget(queue)
        return purged

    @translated
    def redrive(self, queue: str) -> dict:
        """Move the ready messages of the queue's dead-letter queue back into it, as new;
        {"queue", "dead_letter_queue", "moved"}."""
        request = Redrive.from_payload({"queue": queue})
        dead = request.source or self.props.effective(queue)["dead_letter_queue"]
        moved: list[str] = []
        if self.store.queues.queue_exists(dead):
            changes = Changes()
            moved = self.store.states.redrive(dead, queue, changes)
            self.store.flush(changes)
            self.store.notices.post(queue)  # Daemons' fetch actors list the queue again.
            self.taker.forget(dead)
        return {"queue": queue, "dead_letter_queue": dead, "moved": len(moved)}

    @translated
    def move(self, queue: str, message_id: str, target: str) -> dict:
        """Move a ready message into the target queue, ready there as new; {"id", "queue"}."""
        request = Move.from_payload({"queue": queue, "id": message_id, "target": target})
        found = self.store.states.locate(queue, message_id, rules.MAX_DELIVERIES)
        if found is None or found[0] != "ready":
            raise NotFound(f"no ready message {message_id} in queue {queue!r}")
        changes = Changes()
        self.store.queues.move_ready(queue, message_id, found[1], request.target, changes)
        self.store.flush(changes)
        self.store.notices.post(request.target)  # Daemons' fetch actors list the target again.
        self.taker.forget(queue)
        return {"id": message_id, "queue": request.target}

    def must_exist(self, queue: str) -> None:
        """Raise NotFound unless the queue exists (the name checked first)."""
        if not self.store.queues.queue_exists(QueueGet.from_payload({"queue": queue}).queue):
            raise NotFound(f"queue {queue!r} does not exist")

    # -- messages -------------------------------------------------------------------------

    @translated
    def put(self, queue: str, body: bytes | str, *, delay=None, at=None, dedup_id=None,
            content_type=None, group=None, traceparent: str | None = None,
            tracestate: str | None = None) -> str:
        """Add a message durably and return its id (a str body is stored as UTF-8 text;
        `group`: its message group, which a fifo queue hands out in order; `traceparent` and
        `tracestate`: its W3C trace context, by default the current OpenTelemetry one)."""
        return produce.put(self.store, self.props, queue, body, delay, at, dedup_id,
                           content_type, group, traceparent, tracestate)

    @translated
    def get(self, queue: str, *, wait: float = 0.0) -> Message | None:
        """Claim the oldest ready message the queue's rules let out (none past its retention;
        in a fifo queue, none whose group has an older one in flight), waiting up to `wait`
        seconds for one; None if none."""
        Fetch.from_payload({"queue": queue})  # Its wait: any time here (README.md).
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or \
                not (math.isfinite(wait) and wait >= 0):
            raise Invalid("wait must be a finite number of seconds, at least 0")
        deadline = time.monotonic() + wait
        while (message := self.taker.take(queue)) is None:
            self.must_exist(queue)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(POLL_SECONDS, left))
        return message

    @translated
    def ack(self, message: Message) -> None:
        """Remove the delivered message (its receipt must be current: else ConflictError)."""
        receipts.ack(self.store, self.props, message)

    @translated
    def nack(self, message: Message) -> None:
        """Make the message ready again now (a dead letter once its retries are used up)."""
        receipts.nack(self.store, self.props, message)
        self.taker.forget(message.queue)  # Its next get lists it again, in its place.

    @translated
    def extend(self, message: Message, seconds: float | None = None) -> float:
        """Keep the message hidden `seconds` more (default: its queue's timeout); return the due time."""
        return receipts.extend(self.store, self.props, message, seconds)

    @translated
    def revoke(self, queue: str, message_id: str) -> None:
        """Remove a message from any state (ready, delayed, in flight) by its id."""
        receipts.revoke(self.store, self.props, queue, message_id)

    # -- life -----------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the listings this client keeps; it holds no descriptor between calls."""
        self.taker.listings.clear()

    def __enter__(self) -> "LocalClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
