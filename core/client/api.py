"""The methods Client and AsyncClient share: each one describes its call (calls.py) and hands
it to the client's _perform, which sends it (blocking, or as a coroutine)."""

import math
import ssl
from abc import ABC, abstractmethod

from mq.client import batch_calls, calls
from mq.client.errors import InvalidError
from mq.client.message import Message
from mq.client.retry import RetryPolicy
from mq.operations import Move, Operation

#: Where `mq` listens unless told otherwise (`make run`).
DEFAULT_URL = "http://127.0.0.1:8080"


def verifier(ca: str | None) -> ssl.SSLContext | bool:
    """What httpx checks a server's certificate with: the system's authorities, or those of the
    PEM file ca (ValueError when it cannot be read)."""
    if ca is None:
        return True
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"ca {ca}: cannot load the certificates: "
                         f"{getattr(err, 'strerror', None) or err}") from None


class Operations(ABC):
    """The API of the daemon as methods; a subclass supplies _http_class and _perform."""

    _http_class: type

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 30.0, retries: int = 5,
                 backoff: float = 0.1, max_backoff: float = 5.0, token: str | None = None,
                 ca: str | None = None):
        """Talk to the daemon at url, over kept-alive connections; with token, as its bearer;
        with ca (a PEM file), trusting the certificates it signs for an https:// url."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, not {url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.policy = RetryPolicy(retries, backoff, max_backoff)
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValueError("token must be a non-empty string")
        headers = {"Authorization": f"Bearer {token.strip()}"} if token else {}
        # Loading the system's authorities costs a CPU tenth at each start of a short-lived
        # client (mqctl); a plain http:// daemon never needs them (no redirect is followed).
        verify = verifier(ca) if ca is not None or self.url.startswith("https://") else False
        self._http = self._http_class(base_url=self.url, headers=headers, verify=verify)

    def __repr__(self) -> str:
        """The class and the daemon's URL."""
        return f"{type(self).__name__}({self.url!r})"

    def create_queue(self, queue: str) -> bool:
        """Create a queue; True when it was created, False when it already existed."""
        return self._perform(calls.create_queue(queue))

    def delete_queue(self, queue: str) -> None:
        """Delete a queue with all its messages in every state."""
        return self._perform(calls.delete_queue(queue))

    def queue_exists(self, queue: str) -> bool:
        """True when the queue exists."""
        return self._perform(calls.queue_exists(queue))

    def stat(self, queue: str) -> dict:
        """{"queue", "ready", "properties"}: how many messages are ready, and the settings."""
        return self._perform(calls.stat(queue))

    def properties(self, queue: str) -> dict:
        """The queue's effective properties (its own, else the default rules', else the system's)."""
        return self._perform(calls.properties(queue))

    def set_properties(self, queue: str, **props) -> dict:
        """Change some of the queue's own properties; return the effective ones."""
        return self._perform(calls.set_properties(queue, props))

    def put(self, queue: str, body: bytes | str, *, delay: float | None = None, at=None,
            dedup_id: str | None = None, content_type: str | None = None) -> str:
        """Add a message (hidden for delay seconds or until at); return its id."""
        return self._perform(calls.put(queue, body, delay=delay, at=at, dedup_id=dedup_id,
                                       content_type=content_type))

    def get(self, queue: str, *, wait: float = 0.0) -> Message | None:
        """The oldest ready message, waiting up to wait seconds for one; None when none came."""
        return self._perform(calls.get(queue, wait))

    def ack(self, message: Message) -> None:
        """Delete a fetched message: its work is done."""
        return self._perform(calls.reply(message, "ack"))

    def nack(self, message: Message) -> None:
        """Give a fetched message back now, for another delivery (or its dead-letter queue)."""
        return self._perform(calls.reply(message, "nack"))

    def extend(self, message: Message, seconds: float | None = None) -> float:
        """Keep a fetched message hidden seconds more (default: the queue's timeout); the new due time."""
        return self._perform(calls.reply(message, "ext", seconds))

    def revoke(self, queue: str, message_id: str) -> None:
        """Delete a message in whatever state it is (ready, delayed, in flight)."""
        return self._perform(calls.revoke(queue, message_id))

    def run(self, op: type[Operation], **fields):
        """Run an op that declares its REST route (mq.operations.wire) with these fields; its
        reply. InvalidError, before any request, for a field the op's checks refuse or its
        route does not carry (but at its default)."""
        return self._perform(calls.declared(op, **fields))

    def move(self, queue: str, message_id: str, target: str) -> dict:
        """Move a ready message into the target queue, ready there as new; {"id", "queue"}."""
        return self._perform(calls.declared(Move, queue=queue, id=message_id, target=target))

    def peek(self, queue: str, max: int = 10, after: str | None = None) -> list[Message]:
        """Up to max of the oldest ready messages (ids after `after`), without claiming them."""
        return self._perform(calls.peek(queue, max, after))

    def purge(self, queue: str) -> int:
        """Remove every message of the queue, in every state; return how many went."""
        return self._perform(calls.purge(queue))

    def redrive(self, queue: str) -> dict:
        """Move the dead letters of the queue (its dead-letter queue's messages) back into it;
        {"queue", "dead_letter_queue", "moved"}."""
        return self._perform(calls.redrive(queue))

    def stats(self) -> dict:
        """The daemon's statistics: {"complete", "actors", "queues": {name: depths, ...}, ...}."""
        return self._perform(calls.stats())

    def add_many(self, queue: str, messages, *, delay: float | None = None, at=None) -> list[str]:
        """Add many messages in one request, all or none (bytes, str, or dicts with "body",
        "content_type", "delay", "at", "dedup_id"); return their ids in order."""
        return self._perform(batch_calls.add_many(queue, messages, delay=delay, at=at))

    def fetch_many(self, queue: str, max: int = 10, *, wait: float = 0.0) -> list[Message]:
        """Up to max of the oldest ready messages in one request, waiting up to wait seconds
        for the first; [] when none came."""
        return self._perform(batch_calls.fetch_many(queue, max, wait))

    def ack_many(self, messages: list[Message]) -> list[dict]:
        """Ack many fetched messages of one queue in one request; each one's outcome in order
        ({"receipt", "status": "acked" or why not, ...}): a stale one does not fail the rest."""
        queues = {m.queue for m in messages}
        if len(queues) != 1:
            raise InvalidError("ack_many takes fetched messages of one queue")
        receipts = [m.receipt for m in messages if m.receipt]
        if len(receipts) != len(messages):
            raise InvalidError("only fetched messages (with a receipt) can be acked")
        return self._perform(batch_calls.ack_many(queues.pop(), receipts))

    @abstractmethod
    def _perform(self, call: calls.Call):
        """Send the call, retrying as the policy says, and return its result."""


#: The names of the methods above that talk to the daemon (AsyncClient makes them coroutines).
OPERATIONS = tuple(name for name, value in vars(Operations).items()
                   if callable(value) and not name.startswith("_"))
