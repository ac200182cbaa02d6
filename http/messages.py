"""The routes of messages: add and fetch (with long polls), and the replies to a delivery."""

import asyncio
import select
import socket
import ssl
import time
from typing import Any, overload

import tornado.web

from mq import store as fmt
from mq import trace_context
from mq.errors import Invalid, TooLarge
from mq.http import batches, compound
from mq.http.api import ApiHandler, accepts
from mq.numbers import parse_number
from mq.operations import (
    Ack,
    Add,
    Added,
    Delete,
    Extend,
    Fetch,
    FetchBatch,
    Fetched,
    Nack,
    Operation,
    accumulated_of,
)
from mq.schedule import due_time

#: Seconds between checks that the client of a waiting long poll is still connected.
CLIENT_CHECK_SECONDS = 0.5

#: The connection's own body limit for a chunked add: MessagesHandler enforces the real one.
UNLIMITED_CHUNKED_BODY = 1 << 62


def utf8_header(value: str | None, name: str) -> str | None:
    """A request header's value as the UTF-8 text its bytes are (Tornado reads header bytes as
    latin-1), as a batch part's header is read; Invalid when they are not UTF-8."""
    if value is None or value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise Invalid(f"the {name} header is not UTF-8") from None


def wire_header(value: str) -> str:
    """A reply header's value as Tornado sends it (latin-1 code points), so that its bytes on
    the wire are the UTF-8 of the text; a content type stored from JSON lines may hold any."""
    return value if value.isascii() else value.encode().decode("latin-1")


def connection_closed(sock) -> bool:
    """True when the client of a request has closed its connection (or it failed)."""
    if isinstance(sock, ssl.SSLSocket):
        # A TLS socket refuses recv flags, and a peek would see the client's encrypted
        # close_notify, not the end: ask the kernel whether the client shut its side.
        if sock.fileno() < 0:
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLRDHUP)
        return bool(poller.poll(0))
    try:
        return sock is None or sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # Open, nothing sent: still waiting.
    except OSError:
        return True


@tornado.web.stream_request_body
class StreamedBodyHandler(ApiHandler):
    """A route of messages whose body is streamed in, so that one over --max-body-bytes gets a
    JSON 413 from here rather than the bare 400 Tornado's connection gives a body over its own
    limit; it answers a fetch with the message."""

    def prepare(self) -> None:
        """Refuse a declared Content-Length over the limit before reading the body."""
        super().prepare()
        self.chunks: list[bytes] = []
        self.received = 0
        #: The request's Content-Type, read once, and whether it makes a POST a batch add.
        self.content_type = self.header("Content-Type")
        self.batch_add = self.request.method == "POST" and batches.is_batch(self.content_type)
        # A batch add has its own, larger limit; each message in it still has the message's.
        self.body_limit = self.config.max_batch_bytes if self.batch_add else self.config.max_body_bytes
        length = self.header("Content-Length") or ""
        if length.isdigit() and int(length) > self.body_limit:
            # Let the connection take in (and drop) the rest, then close after the 413.
            self.http_connection().set_max_body_size(int(length))
            raise TooLarge(f"body of {length} bytes is over the limit of "
                           f"{self.body_limit} bytes")
        if length.isdigit() and int(length) > self.config.max_body_bytes:
            self.http_connection().set_max_body_size(int(length))  # A batch under its limit.
        if not length:
            # A chunked body declares no length: data_received counts it, so that one over
            # the limit gets this JSON 413, not the bare 400 of the connection's own limit.
            self.http_connection().set_max_body_size(UNLIMITED_CHUNKED_BODY)

    def data_received(self, chunk: bytes) -> None:
        """Collect the body; answer 413 as soon as a chunked one passes the limit."""
        if self._finished:
            return
        self.received += len(chunk)
        if self.received > self.body_limit:
            self.chunks = []
            error = TooLarge(f"chunked body over the limit of {self.body_limit} bytes")
            # Tornado stops passing the body on once the reply is finished, and closes the
            # connection after it.
            self.send_error(413, exc_info=(TooLarge, error, None))
            return
        self.chunks.append(chunk)

    def received_body(self) -> bytes:
        """The request's body, streamed in; TooLarge when over its limit (--max-body-bytes,
        or --max-batch-bytes for a batch)."""
        body = b"".join(self.chunks)
        if len(body) > self.body_limit:
            raise TooLarge(f"body of {len(body)} bytes is over the limit of "
                           f"{self.body_limit} bytes")
        return body

    def send_message(self, result: Fetched, cf: str = compound.FORMATS[0]) -> None:
        """Answer with a fetched message: its body, with its id, receipt and attempts; a
        compound in the format cf (http/compound.py)."""
        self.log_fields["id"] = result["id"]
        headers, body = compound.delivery(result, cf)
        for name, value in headers.items():
            self.set_header(name, wire_header(value))
        if "traceparent" in headers:
            self.log_fields["traceparent"] = headers["traceparent"]
        self.set_header("Cache-Control", "no-store")
        self.finish(body)


@tornado.web.stream_request_body
class MessagesHandler(StreamedBodyHandler):
    """GET and POST /{queue}/messages."""

    @accepts("delay", "at", "dedup_id")
    async def post(self, name: str) -> None:
        """Add a message: 201 with X-Message-Id once durable; 200 for a duplicate's first id."""
        queue = self.queue_name(name)
        body = self.received_body()
        if self.batch_add:
            await batches.post_batch(self, queue, body)
            return
        now = time.time()
        dedup_id = self.get_query_argument("dedup_id", None) if self.request.query else None
        if dedup_id is None:  # In the query, text is UTF-8 already; as a header, made so.
            dedup_id = utf8_header(self.header("X-Dedup-Id"), "X-Dedup-Id")
        due = due_time(self.param("delay", "X-Delay"), self.param("at", "X-At"), now)
        context = trace_context.parse(self.header("traceparent"), self.header("tracestate"))
        # Checked once, by the save actor as it decodes the add (its fields' checks).
        result: Added = await self.service.run(self.token, Add(
            queue=queue, body=body,
            content_type=utf8_header(self.content_type, "Content-Type") or "",
            due=due, dedup_id=dedup_id, attributes=context or None))
        message_id = result["id"]
        self.log_fields["id"] = message_id
        if context:
            self.log_fields["traceparent"] = context["tp"]
        self.set_header("X-Message-Id", message_id)
        self.set_header("Location", f"/{queue}/messages/{message_id}")
        reply: dict[str, object] = {"id": message_id, "queue": queue}
        if result.get("due"):
            reply["due"] = result["due"]
        accumulated = accumulated_of(result)
        self.set_header("X-Accumulated", accumulated)
        if accumulated != "no":
            reply["accumulated"] = accumulated
        if result.get("duplicate"):
            self.set_header("X-Duplicate", "true")
            reply["duplicate"] = True
        self.write_json(200 if result.get("duplicate") else 201, reply)

    @accepts("wait", "cf", "max")
    async def get(self, name: str) -> None:
        """Fetch the oldest ready message, waiting up to ?wait=N seconds; 204 when there is none."""
        queue = self.queue_name(name)
        wait = parse_number("wait", self.param("wait", "X-Wait"), 0.0)
        # Checked before the fetch: a bad format must not claim a message.
        cf = compound.compound_format(self.param("cf", "X-Compound-Format"))
        limit = self.get_query_argument("max", None)
        if limit is not None:
            await batches.get_batch(self, queue, limit, wait, cf, self.poll_fetch)
            return
        result = await self.poll_fetch(Fetch(queue=queue, wait=wait))
        if result.get("cancelled"):
            return  # The client went away while waiting: there is no one to answer.
        if result.get("empty"):
            self.set_status(204)
            self.finish()
            return
        self.send_message(result, cf)

    def client_address(self) -> str:
        """The client's connection, host:port (the consumers the statistics count)."""
        address = self.request.connection.context.address  # type: ignore[union-attr]
        return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)

    @overload
    async def poll_fetch(self, request: Fetch) -> Fetched: ...

    @overload
    async def poll_fetch(self, request: FetchBatch) -> dict: ...

    async def poll_fetch(self, request: Fetch | FetchBatch) -> Fetched | dict:
        """Send a fetch to the queue's actor and wait for it, cancelling it when the client of
        a long poll hangs up."""
        self.poll = None
        wait = request.wait
        watch = asyncio.ensure_future(self.watch_client(wait)) if wait > 0 else None
        try:
            # Only a long poll's watch cancels: a fetch that does not wait takes no canceller.
            return await self.service.run(
                self.token, request,
                on_sent=None if watch is None else lambda cancel: setattr(self, "poll", cancel),
                client=self.client_address())
        finally:
            if watch is not None:
                watch.cancel()

    async def watch_client(self, wait: float) -> None:
        """While a long poll waits, look every CLIENT_CHECK_SECONDS whether its client hung up
        (Tornado reads nothing during a request, so it would not notice), and cancel the poll:
        its fetch actor then claims no message for nobody (hidden for a whole timer)."""
        sock = self.http_connection().stream.socket
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            await asyncio.sleep(CLIENT_CHECK_SECONDS)
            if connection_closed(sock) and self.poll is not None:
                self.poll()
                return


class MessageHandler(ApiHandler):
    """DELETE /{queue}/messages/{id}, and POST /{queue}/messages/{id}?reply=ack|nack|ext."""

    REPLIES: dict[str, type[Operation]] = {"ack": Ack, "nack": Nack, "ext": Extend, "extend": Extend}

    @accepts("receipt")
    async def delete(self, name: str, message_id: str) -> None:
        """Remove the message from whatever state it is in: 204; 404 unknown; 409 stale receipt."""
        queue = self.queue_name(name)
        self.log_fields["id"] = message_id
        fmt.validate_id(message_id)
        receipt = self.param("receipt", "X-Receipt")
        await self.service.run(
            self.token, Ack(queue=queue, id=message_id, receipt=receipt) if receipt else
            Delete(queue=queue, id=message_id))
        self.set_status(204)
        self.finish()

    @accepts("reply", "seconds", "receipt")
    async def post(self, name: str, message_id: str) -> None:
        """Reply to a delivery: ack deletes, nack makes it ready now, ext extends its timer."""
        queue = self.queue_name(name)
        self.log_fields["id"] = message_id
        fmt.validate_id(message_id)
        reply = self.get_query_argument("reply", None)
        if reply not in self.REPLIES:
            raise Invalid("reply must be one of ack, nack, ext")
        seconds = parse_number("seconds", self.get_query_argument("seconds", None), None)
        # A missing receipt goes as None: the actor's check of the op answers that it is required.
        fields: dict[str, Any] = {"queue": queue, "id": message_id,
                                  "receipt": self.param("receipt", "X-Receipt")}
        if self.REPLIES[reply] is Extend:
            fields["seconds"] = seconds
        request = self.REPLIES[reply](**fields)
        result = await self.service.run(self.token, request)
        if reply in ("ext", "extend"):
            self.set_header("X-Receipt", result["receipt"])
            self.write_json(200, {"id": message_id, "due": result["due"]})
            return
        if result.get("dead_letter"):
            self.write_json(200, {"id": message_id, "dead_letter_queue": result["dead_letter"]})
            return
        self.set_status(204)
        self.finish()
