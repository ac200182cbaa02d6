"""The batch routes: many messages in one request (add, fetch, ack), and their body formats.

A batch add is a POST /{queue}/messages whose Content-Type is application/x-ndjson (one
JSON object per line) or multipart/mixed (one part per message, bodies kept binary); a batch
fetch is a GET /{queue}/messages with ?max=N; a batch ack is POST /{queue}/messages/ack
with {"receipts": [...]}. docs/HTTP.md, "Batches", and docs/DELIVERY.md describe them.
"""

import base64
import binascii
import time
import uuid
from collections.abc import Mapping
from typing import Any, TypedDict

import orjson

from mq import trace_context
from mq.errors import Invalid
from mq.http import compound
from mq.http.api import ApiHandler
from mq.numbers import parse_number
from mq.operations import (
    MAX_BATCH_MESSAGES,
    MAX_FETCH,
    AckBatch,
    AddBatch,
    FetchBatch,
    Fetched,
    accumulated_of,
)
from mq.schedule import due_time

#: The Content-Types that make a POST /{queue}/messages a batch.
NDJSON = "application/x-ndjson"
MULTIPART = "multipart/mixed"
#: The per-message headers of a multipart part, as in a single add.
PART_HEADERS = ("content-type", "x-delay", "x-at", "x-dedup-id")


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type value, lower-case, without parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_batch(content_type: str | None) -> bool:
    """Whether an add with this Content-Type is a batch."""
    return media_type(content_type) in (NDJSON, MULTIPART)


def boundary_of(content_type: str) -> bytes:
    """The boundary parameter of a multipart Content-Type; Invalid when missing."""
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "boundary":
            value = value.strip().strip('"')
            if 1 <= len(value) <= 70:
                return value.encode("latin-1", "replace")
    raise Invalid("a multipart/mixed batch needs a boundary parameter of 1 to 70 characters")


def parse_multipart(body: bytes, boundary: bytes) -> list[tuple[dict[str, str], bytes]]:
    """(headers, content) of each part of a multipart body (RFC 2046), content untouched.

    By hand, in bytes.split: `multipart` (2.x) parses form-data only (it refuses a part with
    no Content-Disposition), and python-multipart's callbacks took 4 to 5 times as long for a
    batch of 1,000 small messages, the batch adds are for.
    """
    delimiter = b"\r\n--" + boundary
    chunks = (b"\r\n" + body).split(delimiter)
    if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
        raise Invalid("multipart body: no closing boundary (--boundary--)")
    parts = []
    for chunk in chunks[1:-1]:
        line_end = chunk.find(b"\r\n")
        if line_end < 0 or chunk[:line_end].strip(b" \t"):
            raise Invalid("multipart body: a boundary line is followed by more than blanks")
        head_end = chunk.find(b"\r\n\r\n", line_end)
        if head_end == line_end:  # No headers at all: the blank line follows the boundary.
            headers, content = {}, chunk[line_end + 4:]
        elif head_end < 0:
            raise Invalid("multipart body: a part has no blank line after its headers")
        else:
            headers = parse_headers(chunk[line_end + 2:head_end])
            content = chunk[head_end + 4:]
        parts.append((headers, content))
    return parts


def parse_headers(block: bytes) -> dict[str, str]:
    """A part's header lines as lower-case name -> value, read as UTF-8 (as mq.client writes
    them, and as a batch fetch's parts are written)."""
    headers: dict[str, str] = {}
    for line in block.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep or not name.strip():
            raise Invalid(f"multipart body: bad part header line {line[:80]!r}")
        try:
            headers[name.strip().decode("utf-8").lower()] = value.strip().decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid(f"multipart body: a part header is not UTF-8: {line[:80]!r}") from None
    return headers


class Record(TypedDict):
    """One message of a batch add body as its JSON line or multipart part gives it (None:
    not given)."""

    body: bytes
    content_type: str | None
    dedup_id: str | None
    delay: str | int | float | None
    at: str | int | float | None
    traceparent: str | None
    tracestate: str | None


def messages_of(content_type: str | None, body: bytes, defaults: dict[str, str | None],
                now: float, traced: dict[str, str | None] | None = None) -> list[dict]:
    """The messages of a batch add body, each as the save actor's add_batch takes it; traced:
    the request's traceparent and tracestate, for the messages without their own."""
    traced = traced or {}
    if media_type(content_type) == MULTIPART:
        # A multipart media type: content_type is set.
        records: list[Record] = [
            {"body": content, "content_type": headers.get("content-type"),
             "delay": headers.get("x-delay"), "at": headers.get("x-at"),
             "dedup_id": headers.get("x-dedup-id"), "traceparent": headers.get("traceparent"),
             "tracestate": headers.get("tracestate")}
            for headers, content in parse_multipart(body, boundary_of(content_type or ""))]
    else:
        records = [ndjson_record(number, line)
                   for number, line in enumerate(body.splitlines(), 1) if line.strip()]
    if not 1 <= len(records) <= MAX_BATCH_MESSAGES:
        raise Invalid(f"a batch holds 1 to {MAX_BATCH_MESSAGES} messages, not {len(records)}")
    messages = []
    for number, record in enumerate(records):
        try:
            if record["delay"] is None and record["at"] is None:
                record["delay"], record["at"] = defaults["delay"], defaults["at"]
            due = due_time(record["delay"], record["at"], now)
        except Invalid as err:
            raise Invalid(f"message {number}: {err.message}") from None
        # A message's own trace context, else the request's (as the request's delay).
        context = trace_context.parse(record.get("traceparent"), record.get("tracestate")) or \
            trace_context.parse(traced.get("traceparent"), traced.get("tracestate"))
        messages.append({"body": record["body"], "content_type": record["content_type"],
                         "due": due, "dedup_id": record["dedup_id"] or None,
                         "attributes": context or None})
    return messages


#: Fields of a JSON lines record this route ignores: the rest of mqctl export's record, so
#: that an export's lines can be posted back as they are.
EXPORT_FIELDS = {"id", "queue", "attempts", "created_ms", "receipt", "due", "kind"}
#: Fields of a JSON lines record that say what to add.
RECORD_FIELDS = {"body", "encoding", "content_type", "delay", "at", "dedup_id", "traceparent",
                 "tracestate"}


def ndjson_record(number: int, line: bytes) -> Record:
    """One line of a JSON lines batch: "body" as text, or base64 with "encoding": "base64"
    (mqctl export's record), and the add's options."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as err:
        raise Invalid(f"line {number}: not JSON: {err}") from None
    if not isinstance(value, dict):
        raise Invalid(f"line {number}: expected a JSON object")
    unknown = set(value) - RECORD_FIELDS - EXPORT_FIELDS
    if unknown:
        raise Invalid(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
    if not isinstance(value.get("body"), str):
        raise Invalid(f"line {number}: body must be a string (base64 with \"encoding\": \"base64\")")
    encoding = value.get("encoding")
    if encoding == "base64":
        try:
            body = base64.b64decode(value["body"], validate=True)
        except (binascii.Error, ValueError):
            raise Invalid(f"line {number}: body is not base64") from None
    elif encoding in (None, "utf-8"):
        try:
            body = value["body"].encode()
        except UnicodeEncodeError:
            raise Invalid(f"line {number}: body is not text") from None
    else:
        raise Invalid(f"line {number}: encoding must be utf-8 or base64")
    for key in ("content_type", "dedup_id", "delay", "at", "traceparent", "tracestate"):
        field = value.get(key)
        if field is not None and (isinstance(field, bool) or not isinstance(field, (str, int, float))
                                  or (key not in ("delay", "at") and not isinstance(field, str))):
            raise Invalid(f"line {number}: {key} has the wrong type")
    return {"body": body, "content_type": value.get("content_type"),
            "dedup_id": value.get("dedup_id"), "delay": value.get("delay"), "at": value.get("at"),
            "traceparent": value.get("traceparent"), "tracestate": value.get("tracestate")}


def json_record(message: Fetched, cf: str) -> dict:
    """A fetched message as JSON: what a single fetch sends (a compound rendered in the format
    cf), the body as text when it is UTF-8, else in base64 with "encoding": "base64" (the
    record of mqctl export)."""
    headers, body = compound.delivery(message, cf)
    record = {"id": message["id"], "receipt": message["receipt"], "attempts": message["attempts"],
              "content_type": headers["Content-Type"], "created_ms": message["created_ms"],
              "due": message["due"], "kind": headers["X-Message-Kind"],
              **{name: headers[name] for name in trace_context.HEADERS if name in headers}}
    try:
        record["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        record["body"] = base64.b64encode(body).decode("ascii")
        record["encoding"] = "base64"
    return record


async def post_batch(handler: ApiHandler, queue: str, body: bytes) -> None:
    """Add every message of a batch, all or none: 201 with each id in order once all are
    durable (200 when every one was a duplicate)."""
    if handler.param("dedup_id", "X-Dedup-Id") is not None:
        raise Invalid("a batch takes de-duplication keys per message, not for the request")
    now = time.time()
    defaults = {"delay": handler.param("delay", "X-Delay"), "at": handler.param("at", "X-At")}
    traced = {"traceparent": handler.request.headers.get("traceparent"),
              "tracestate": handler.request.headers.get("tracestate")}
    messages = messages_of(handler.request.headers.get("Content-Type"), body, defaults, now, traced)
    result = await handler.service.run(handler.token, AddBatch(queue=queue, messages=messages))
    handler.log_fields["count"] = len(result["messages"])
    fresh = [m for m in result["messages"] if not m.get("duplicate")]
    reply = [added_record(m) for m in result["messages"]]
    handler.write_json(201 if fresh else 200, {"queue": queue, "messages": reply})


def added_record(message: Mapping[str, Any]) -> dict:
    """One record of a batch add's answer, as a single add's JSON body says it: `due` when
    not ready at once, `accumulated` when not "no", `duplicate`."""
    accumulated = accumulated_of(message)
    return {"id": message["id"], **({"due": message["due"]} if message.get("due") else {}),
            **({"accumulated": accumulated} if accumulated != "no" else {}),
            **({"duplicate": True} if message.get("duplicate") else {})}


async def get_batch(handler: ApiHandler, queue: str, limit, wait: float, cf: str, call) -> None:
    """Answer a batch fetch: multipart/mixed, or JSON when the client accepts only that; a
    compound in the format cf, as a single fetch serves it."""
    limit = parse_number("max", limit, 1, kind=int, low=1, high=MAX_FETCH)
    result = await call(FetchBatch(queue=queue, wait=wait, max=limit))
    if result.get("cancelled"):
        return
    messages = result.get("messages") or []
    if not messages:
        handler.set_status(204)
        handler.finish()
        return
    handler.log_fields["count"] = len(messages)
    handler.set_header("Cache-Control", "no-store")
    handler.set_header("X-Count", str(len(messages)))
    if "application/json" in handler.request.headers.get("Accept", ""):
        handler.write_json(200, {"queue": queue,
                                 "messages": [json_record(m, cf) for m in messages]})
        return
    boundary = uuid.uuid4().hex
    handler.set_header("Content-Type", f"{MULTIPART}; boundary={boundary}")
    handler.finish(multipart_body([compound.delivery(m, cf) for m in messages], boundary))


def multipart_body(deliveries: list[tuple[dict, bytes]], boundary: str) -> bytes:
    """The multipart/mixed body of fetched messages: per part, the headers a single fetch
    sends (compound.delivery) and Content-Length, in UTF-8."""
    out = []
    for headers, body in deliveries:
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        out.append(f"--{boundary}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode())
        out.append(body)
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out)


class AckBatchHandler(ApiHandler):
    """POST /{queue}/messages/ack: acknowledge many deliveries by their receipts."""


    async def post(self, name: str) -> None:
        """200 with each receipt's outcome in order: acked, conflict (stale), not_found, invalid."""
        queue = self.queue_name(name)
        value = self.json_body()
        if not isinstance(value, dict) or not isinstance(value.get("receipts"), list):
            raise Invalid('expected {"receipts": ["{id}.{n}", ...]}')
        receipts = value["receipts"]
        if not 1 <= len(receipts) <= MAX_BATCH_MESSAGES:
            raise Invalid(f"give 1 to {MAX_BATCH_MESSAGES} receipts, not {len(receipts)}")
        if not all(isinstance(r, str) for r in receipts):
            raise Invalid("every receipt must be a string")
        result = await self.service.run(self.token, AckBatch(queue=queue, receipts=receipts))
        results = result["results"]
        acked = sum(1 for r in results if r["status"] == "acked")
        self.log_fields["count"] = acked
        self.write_json(200, {"queue": queue, "acked": acked, "results": results})
