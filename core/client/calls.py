"""Each operation of the HTTP API as data: the request to send and how to read its answer.

Client and AsyncClient perform the same Call objects, so neither of them builds a request or
reads an answer: they only move bytes (and wait between retries, retry.py).
"""

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, overload
from urllib.parse import quote

import httpx

from mq.adds import check_content_type
from mq.client import tracing
from mq.client.errors import ClientError, InvalidError, UnavailableError, error_for
from mq.client.message import Message
from mq.errors import Invalid
from mq.ids import id_time_ms
from mq.operations import MAX_WAIT_SECONDS, Operation
from mq.queue_names import validate_queue

#: The Content-Type of a str body when none is given: the text is sent as UTF-8.
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
_RAISE = object()


@dataclass(frozen=True)
class Call:
    """One operation: its HTTP request, and read(response) giving its result."""

    method: str
    path: str
    read: Callable[[httpx.Response], Any]
    params: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    content: bytes | None = None
    #: Seconds the daemon may hold the request on purpose (a long poll), beyond the timeout.
    wait: float = 0.0
    #: The result of a 404 when the call does not raise it (queue_exists).
    if_missing: Any = _RAISE
    #: A removal (ack, revoke): a 404 to a retry means done. The try before it may have
    #: removed the message and lost its answer (a timeout, a cut connection, a 503 after the
    #: actor acted); the message is gone either way, which is what the call asked for.
    removes: bool = False

    def arguments(self, timeout: float) -> dict:
        """The keyword arguments of httpx's request() for this call."""
        return {"method": self.method, "url": self.path, "params": self.params,
                "headers": self.headers, "content": self.content,
                "timeout": timeout + min(max(0.0, self.wait), MAX_WAIT_SECONDS)}


def result(call: Call, outcome: httpx.Response | Exception, url: str, retried: bool = False):
    """What the call returns, from its last answer (or the connection error that ended it);
    retried: the answer is to a retry."""
    if isinstance(outcome, Exception):
        raise UnavailableError(f"cannot reach mq at {url}: {type(outcome).__name__}: "
                               f"{outcome}".rstrip(": ")) from outcome
    if outcome.status_code == 404 and call.if_missing is not _RAISE:
        return call.if_missing
    if outcome.status_code == 404 and call.removes and retried:
        return None
    if outcome.status_code >= 400:
        raise error_from(outcome)
    return call.read(outcome)


def error_from(response: httpx.Response) -> ClientError:
    """The typed exception of an error answer, with the kind and message of its JSON body."""
    try:
        value = response.json()
        kind, message = str(value["error"]), str(value["message"])
    except (ValueError, KeyError, TypeError):
        # A bare answer from a proxy or the HTTP layer: the status says what it is.
        kind, message = None, response.text.strip() or response.reason_phrase
    return error_for(response.status_code, kind, message)


# -- the operations ---------------------------------------------------------------------


def create_queue(queue: str) -> Call:
    """PUT /{queue}: True when created, False when it existed."""
    return Call("PUT", queue_path(queue), lambda r: r.status_code == 201)


def delete_queue(queue: str) -> Call:
    """DELETE /{queue}."""
    return Call("DELETE", queue_path(queue), _nothing)


def queue_exists(queue: str) -> Call:
    """GET /{queue}: True, or False on 404."""
    return Call("GET", queue_path(queue), lambda r: True, if_missing=False)


def stat(queue: str) -> Call:
    """GET /{queue}: {"queue", "ready", "properties"}."""
    return Call("GET", queue_path(queue), _json)


def properties(queue: str) -> Call:
    """GET /{queue}/properties: the effective properties."""
    return Call("GET", queue_path(queue, "properties"), _effective)


def set_properties(queue: str, props: dict) -> Call:
    """PATCH /{queue}/properties with the given keys: the effective properties after."""
    return Call("PATCH", queue_path(queue, "properties"), _effective,
                headers={"Content-Type": "application/json"},
                content=json.dumps(props).encode())


def body_bytes(body, content_type: str | None) -> tuple[bytes, str | None]:
    """A message body as bytes, with its content type (a str body is UTF-8 text/plain)."""
    if isinstance(body, str):
        return body.encode(), content_type or TEXT_CONTENT_TYPE
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body), content_type
    raise TypeError(f"body must be bytes or str, not {type(body).__name__}")


def put(queue: str, body, *, delay=None, at=None, dedup_id=None, content_type=None) -> Call:
    """POST /{queue}/messages: the id (the first message's for a duplicate)."""
    body, content_type = body_bytes(body, content_type)
    params = {"delay": _seconds("delay", delay), "at": at_value(at),
              "dedup_id": _text("dedup_id", dedup_id)}
    content_type = content_type_of(content_type)
    # Bytes: httpx would send a str header only as ASCII; the daemon reads it as UTF-8.
    headers = {"Content-Type": None if content_type is None else content_type.encode()}
    # Read now, in the caller's context (an AsyncClient's task too): the message keeps the
    # trace it was added in, and every retry sends the same one.
    return Call("POST", queue_path(queue, "messages"), lambda r: r.json()["id"],
                params=_present(params), headers=tracing.injected(_present(headers)),
                content=body)


def get(queue: str, wait=0.0) -> Call:
    """GET /{queue}/messages[?wait=S]: a Message, or None when there is none (204)."""
    text = _seconds("wait", wait)
    return Call("GET", queue_path(queue, "messages"), lambda r: _delivery(queue, r),
                params=_present({"wait": text if wait else None}), wait=float(wait or 0))


def reply(message: Message, verb: str, seconds=None) -> Call:
    """POST /{queue}/messages/{id}?reply=ack|nack|ext with the message's receipt."""
    if not isinstance(message, Message):
        raise TypeError(f"expected a Message from get(), not {type(message).__name__}")
    if not message.receipt:
        # Without a receipt the daemon would take an ack for a plain delete.
        raise InvalidError(f"message {message.id} has no receipt: only a fetched message "
                         "can be acked, nacked or extended (revoke deletes one)")
    read = _extended(message) if verb == "ext" else _nothing
    params = _present({"reply": verb, "seconds": _seconds("seconds", seconds)})
    return Call("POST", message_path(message.queue, message.id), read, params=params,
                headers={"X-Receipt": message.receipt}, removes=verb == "ack")


def revoke(queue: str, message_id: str) -> Call:
    """DELETE /{queue}/messages/{id}: delete it in whatever state it is."""
    return Call("DELETE", message_path(queue, message_id), _nothing, removes=True)


def declared(op: type[Operation], **fields) -> Call:
    """The request of an op that declares its REST route (mq.operations.wire): the op built
    from fields with its own checks (InvalidError, before any request, for one the daemon
    would refuse, or one the route does not carry but at its default), its fields put in the
    path, query and body as the route declares; its JSON reply."""
    rest = op.rest
    if rest is None:
        raise TypeError(f"op {op.op!r} declares no REST route")
    try:
        payload = op.from_payload(fields).to_payload()
    except Invalid as err:
        raise InvalidError(err.message) from None
    defaults, carried = {name: default for name, _, default in op.spec}, rest.fields()
    for name, value in fields.items():
        # Dropped from the request, it would run with the field's default, not with value.
        if name not in carried and (name not in defaults or value != defaults[name]):
            raise InvalidError(f"{op.op}: {name} is not sent by {rest.method} {rest.path}")
    path = rest.path.format(**{name: quote(str(payload[name]), safe="") for name in rest.path_fields})
    params = _present({parameter: payload[name] for parameter, name in rest.query.items()})
    if rest.body is None:
        return Call(rest.method, path, _json, params=params)
    return Call(rest.method, path, _json, params=params, headers={"Content-Type": "application/json"},
                content=json.dumps(payload[rest.body]).encode())


def peek(queue: str, max=10, after=None) -> Call:
    """GET /{queue}/peek?max=N[&after=ID]: the oldest ready messages, none claimed."""
    if isinstance(max, bool) or not isinstance(max, int):
        raise TypeError(f"max must be an int, not {type(max).__name__}")
    params = _present({"max": str(max), "after": _text("after", after)})
    return Call("GET", queue_path(queue, "peek"), lambda r: _peeked(queue, r), params=params)


def purge(queue: str) -> Call:
    """POST /{queue}/purge: how many messages were removed."""
    return Call("POST", queue_path(queue, "purge"), lambda r: int(r.json()["purged"]))


def redrive(queue: str) -> Call:
    """POST /{queue}/redrive: {"queue", "dead_letter_queue", "moved"}."""
    return Call("POST", queue_path(queue, "redrive"), _json)


def stats() -> Call:
    """GET /_mq/stats: every queue's depths, totals and rates (docs/OPERATIONS.md)."""
    return Call("GET", "/_mq/stats", _json)


# -- arguments ----------------------------------------------------------------------------


def queue_path(queue: str, *rest: str) -> str:
    """The path of a queue (and a route under it); InvalidError, before any request, for a
    name the daemon would refuse (the daemon's own rule, mq.queue_names)."""
    if not isinstance(queue, str):
        raise TypeError(f"queue must be a str, not {type(queue).__name__}")
    if not queue:
        raise InvalidError("queue name must not be empty")
    try:
        # Checked here: '.' and '..' would be resolved away by the URL, and '_mq' reach the
        # daemon's own endpoints, so the daemon would answer another route's error.
        validate_queue(queue)
    except Invalid as err:
        raise InvalidError(err.message) from None
    return "/".join(["", quote(queue, safe=""), *rest])


def message_path(queue: str, message_id: str) -> str:
    """The path of one message."""
    if not isinstance(message_id, str) or not message_id:
        raise TypeError(f"message id must be a non-empty str, not {message_id!r}")
    return queue_path(queue, "messages", quote(message_id, safe=""))


@overload
def at_value(when: None) -> None: ...


@overload
def at_value(when: datetime | float | str) -> str: ...


def at_value(when: datetime | float | str | None) -> str | None:
    """The `at` parameter from a timezone-aware datetime, Unix seconds or RFC 3339 text."""
    if when is None or isinstance(when, str):
        return when
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise InvalidError(f"at={when!r}: give a timezone-aware datetime (a naive one "
                             "is ambiguous)")
        return repr(when.timestamp())
    return _seconds("at", when)


def _seconds(name: str, value) -> str | None:
    """A number of seconds as query text; the daemon checks the range."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    return repr(value)


def _text(name: str, value) -> str | None:
    """A str parameter, checked to be one."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def content_type_of(value) -> str | None:
    """A content type, checked as the daemon checks it (mq.adds): InvalidError before it is
    sent, rather than an error of the HTTP library for one that is not one line."""
    value = _text("content_type", value)
    if value is not None:
        try:
            check_content_type(value)
        except Invalid as err:
            raise InvalidError(err.message) from None
    return value


def _present(values: dict) -> dict:
    """The entries that were given."""
    return {k: v for k, v in values.items() if v is not None}


# -- answers ------------------------------------------------------------------------------


def _nothing(response: httpx.Response) -> None:
    """An answer with nothing to return."""
    return None


def _json(response: httpx.Response):
    """The JSON body."""
    return response.json()


def _effective(response: httpx.Response) -> dict:
    """The effective properties of a properties answer."""
    return response.json()["properties"]


def _delivery(queue: str, response: httpx.Response) -> Message | None:
    """The fetched message, or None for 204."""
    if response.status_code == 204:
        return None
    headers = response.headers
    message_id = headers["X-Message-Id"]
    # The fetch answer has no creation time of its own: a UUIDv7 id carries it.
    return Message(queue=queue, id=message_id, body=response.content,
                   content_type=headers.get("Content-Type", "application/octet-stream"),
                   receipt=headers["X-Receipt"], attempts=int(headers["X-Attempts"]),
                   created_ms=id_time_ms(message_id), **tracing.carried(headers))


def _extended(message: Message) -> Callable[[httpx.Response], float]:
    """Reads an extend's answer: the new due time; the message takes the receipt sent back."""
    def read(response: httpx.Response) -> float:
        message.receipt = response.headers.get("X-Receipt", message.receipt)
        return float(response.json()["due"])
    return read


def _peeked(queue: str, response: httpx.Response) -> list[Message]:
    """The messages of a peek answer, without receipts."""
    return [Message(queue=queue, id=m["id"], body=base64.b64decode(m["body"]),
                    content_type=m["content_type"], receipt=None, attempts=int(m["attempts"]),
                    created_ms=m.get("created_ms"), **tracing.carried(m))
            for m in response.json()["messages"]]
