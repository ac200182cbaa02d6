"""The batch operations of the HTTP API as Call objects: add many messages in one request
(multipart/mixed, bodies kept binary), fetch up to N, ack many receipts."""

import json
import uuid

import httpx

from mq.client import tracing
from mq.client.calls import (
    Call,
    _present,
    _seconds,
    _text,
    at_value,
    body_bytes,
    content_type_of,
    queue_path,
)
from mq.client.errors import InvalidError
from mq.client.message import Message
from mq.ids import id_time_ms
from mq.operations import MAX_BATCH_MESSAGES, MAX_FETCH


def add_many(queue: str, messages, *, delay=None, at=None) -> Call:
    """POST /{queue}/messages as multipart/mixed: the ids in order, all stored or none.

    Each message is bytes, str (sent as UTF-8 text) or a dict with "body" and optionally
    "content_type", "delay", "at", "dedup_id"; delay and at apply to those that set neither.
    """
    parts = [_part(n, m) for n, m in enumerate(messages)]
    if not 1 <= len(parts) <= MAX_BATCH_MESSAGES:
        raise InvalidError(f"a batch holds 1 to {MAX_BATCH_MESSAGES} messages, not {len(parts)}")
    boundary = uuid.uuid4().hex
    while any(boundary.encode() in body for _, body in parts):
        boundary = uuid.uuid4().hex
    params = _present({"delay": _seconds("delay", delay), "at": at_value(at)})
    return Call("POST", queue_path(queue, "messages"), _ids, params=params,
                # The request's trace context is every message's (the daemon's rule for parts
                # without their own), read in the caller's context as for put.
                headers=tracing.injected(
                    {"Content-Type": f"multipart/mixed; boundary={boundary}"}),
                content=multipart(parts, boundary))


def fetch_many(queue: str, max=10, wait=0.0) -> Call:
    """GET /{queue}/messages?max=N[&wait=S]: up to max Messages, [] when none came."""
    if isinstance(max, bool) or not isinstance(max, int):
        raise TypeError(f"max must be an int, not {type(max).__name__}")
    if not 1 <= max <= MAX_FETCH:
        raise InvalidError(f"max must be a whole number from 1 to {MAX_FETCH}, not {max!r}")
    text = _seconds("wait", wait)
    return Call("GET", queue_path(queue, "messages"), lambda r: _deliveries(queue, r),
                params=_present({"max": str(max), "wait": text if wait else None}),
                wait=float(wait or 0))


def ack_many(queue: str, receipts: list[str]) -> Call:
    """POST /{queue}/messages/ack: each receipt's outcome, in order."""
    if not 1 <= len(receipts) <= MAX_BATCH_MESSAGES:
        raise InvalidError(f"give 1 to {MAX_BATCH_MESSAGES} receipts, not {len(receipts)}")
    return Call("POST", queue_path(queue, "messages", "ack"), lambda r: r.json()["results"],
                headers={"Content-Type": "application/json"},
                content=json.dumps({"receipts": receipts}).encode())


def _part(number: int, message) -> tuple[dict, bytes]:
    """(part headers, body) of one message of a batch add."""
    if isinstance(message, (str, bytes, bytearray, memoryview)):
        message = {"body": message}
    if not isinstance(message, dict):
        raise TypeError(f"message {number}: expected bytes, str or dict, not {type(message).__name__}")
    try:
        content_type = content_type_of(message.get("content_type"))
    except InvalidError as err:
        raise InvalidError(f"message {number}: {err.message}") from None
    try:
        body, content_type = body_bytes(message.get("body"), content_type)
    except TypeError as err:
        raise TypeError(f"message {number}: {err}") from None
    headers = _present({"Content-Type": content_type,
                        "X-Delay": _seconds("delay", message.get("delay")),
                        "X-At": at_value(message.get("at")),
                        "X-Dedup-Id": _text("dedup_id", message.get("dedup_id"))})
    for value in headers.values():
        if "\r" in value or "\n" in value:
            raise InvalidError(f"message {number}: a header value must be one line")
    return headers, body


def multipart(parts: list[tuple[dict, bytes]], boundary: str) -> bytes:
    """A multipart/mixed body (RFC 2046) of the parts, their headers in UTF-8."""
    out = []
    for headers, body in parts:
        out.append(f"--{boundary}\r\n".encode())
        out.append("".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode())
        out.append(b"\r\n")
        out.append(body)
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out)


def split_multipart(content: bytes) -> list[tuple[dict, bytes]]:
    """The parts of a batch fetch's answer, each body cut by its Content-Length."""
    parts, pos = [], content.find(b"--")
    while pos >= 0:
        line_end = content.index(b"\r\n", pos)
        if content[pos:line_end].endswith(b"--"):
            break
        head_end = content.index(b"\r\n\r\n", line_end)
        headers = {}
        # UTF-8, as the daemon writes part headers (and reads the ones multipart() writes).
        for line in content[line_end + 2:head_end].decode("utf-8", "replace").split("\r\n"):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        start = head_end + 4
        end = start + int(headers["content-length"])
        parts.append((headers, content[start:end]))
        pos = content.find(b"--", end)
    return parts


def _ids(response: httpx.Response) -> list[str]:
    """The ids of a batch add's answer, in order (a duplicate's is the earlier message's)."""
    return [m["id"] for m in response.json()["messages"]]


def _deliveries(queue: str, response: httpx.Response) -> list[Message]:
    """The messages of a batch fetch's answer; [] for 204."""
    if response.status_code == 204:
        return []
    return [Message(queue=queue, id=h["x-message-id"], body=body,
                    content_type=h.get("content-type", "application/octet-stream"),
                    receipt=h["x-receipt"], attempts=int(h["x-attempts"]),
                    created_ms=id_time_ms(h["x-message-id"]), **tracing.carried(h))
            for h, body in split_multipart(response.content)]
