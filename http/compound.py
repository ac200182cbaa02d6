"""Serving a compound message: multipart/mixed by default, or msgpack as stored (`cf=msgpack`).

A compound is stored as a msgpack array of [content type, body] pairs (docs/FORMAT.md,
"Accumulation"); this module turns that into the reply a fetch asked for.
"""

import os

from mq import trace_context
from mq.errors import Invalid
from mq.operations import Fetched
from mq.store.accumulation import COMPOUND_CONTENT_TYPE, decode_compound

#: The compound formats a fetch may ask for (`cf` / `X-Compound-Format`); the first is the default.
FORMATS = ("multipart", "msgpack")


def compound_format(value: str | None) -> str:
    """The checked compound format a fetch asked for ("multipart" when none)."""
    if value is None or value == "":
        return FORMATS[0]
    if value not in FORMATS:
        raise Invalid(f"cf must be one of {', '.join(FORMATS)}, not {value[:64]!r}")
    return value


def delivery(result: Fetched, fmt: str) -> tuple[dict[str, str], bytes]:
    """(headers, body) that answer a fetched message (a fetch actor's result): its id, receipt,
    attempts, kind and Content-Type (and traceparent, tracestate when it has them: core/trace_context.py),
    a compound rendered in the format fmt. A single fetch
    sends them as the reply's headers, a batch fetch as each part's: the same for both."""
    content_type, body = result["content_type"], result["body"]
    if result.get("parts"):
        content_type, body = render(body, fmt)
    return {"Content-Type": content_type, "X-Message-Id": result["id"],
            "X-Receipt": result["receipt"], "X-Attempts": str(result["attempts"]),
            "X-Message-Kind": "compound" if result.get("parts") else "normal",
            **trace_context.of_message(result.get("attributes"))}, body


def render(body: bytes, fmt: str) -> tuple[str, bytes]:
    """(Content-Type, body) of a compound's reply in the format asked for."""
    if fmt == "msgpack":
        return COMPOUND_CONTENT_TYPE, body
    return multipart(decode_compound(body))


def multipart(parts: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """A multipart/mixed document (RFC 2046) of the parts, each with its Content-Type in
    UTF-8, as a single fetch and a batch fetch send it."""
    boundary = "mq-" + os.urandom(12).hex()
    while any(boundary.encode() in body for _, body in parts):
        boundary = "mq-" + os.urandom(12).hex()  # Astronomically rare; the parts must not hold it.
    delimiter = b"--" + boundary.encode()
    out = []
    for content_type, body in parts:
        out += [delimiter, b"\r\nContent-Type: ", content_type.encode(),
                b"\r\n\r\n", body, b"\r\n"]
    out += [delimiter, b"--\r\n"]
    return f'multipart/mixed; boundary="{boundary}"', b"".join(out)
