"""What mqctl prints: the export format (one JSON object per message and line, written and
read back) and its other JSON answers.

A record is {"id", "queue", "content_type", "attempts", "created_ms", "body"}: the body as
text when it is UTF-8, else base64 with "encoding": "base64". Lines are split on b"\\n" only
(JSON escapes it inside strings), so any body survives a round trip byte for byte.
"""

import base64
import binascii
import json
from dataclasses import dataclass

from mq.ctl.errors import CtlError

FIELDS = ("id", "queue", "content_type", "attempts", "created_ms")
BASE64 = "base64"


@dataclass
class Item:
    """One message to add, as read from an input: its body, content type and id if known."""

    body: bytes
    content_type: str | None = None
    id: str | None = None


def to_record(message, receipt: bool = False) -> dict:
    """A message as a record (with its receipt too when asked, for get)."""
    record = {name: getattr(message, name) for name in FIELDS}
    if receipt:
        record["receipt"] = message.receipt
    try:
        record["body"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        record["body"] = base64.b64encode(message.body).decode("ascii")
        record["encoding"] = BASE64
    return record


def to_line(message, receipt: bool = False) -> bytes:
    """A message as one line of JSON, newline included."""
    text = json.dumps(to_record(message, receipt), ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def write_message(out, message, body_only: bool = False, receipt: bool = False) -> None:
    """Write a message to a binary stream: its record, or (body_only) its body and a newline."""
    out.write(message.body + b"\n" if body_only else to_line(message, receipt))


def print_json(value) -> None:
    """One JSON line on stdout (stat, purge, the summaries of export and load)."""
    print(json.dumps(value, separators=(",", ":")), flush=True)


def from_line(line: bytes, where: str) -> Item:
    """The message a record's line holds; CtlError naming `where` (file and line) if it is not one."""
    try:
        record = json.loads(line)
    except ValueError as err:
        raise CtlError(f"{where}: not JSON ({err})") from None
    if not isinstance(record, dict):
        raise CtlError(f"{where}: expected a JSON object, got {type(record).__name__}")
    body, encoding = record.get("body"), record.get("encoding")
    if not isinstance(body, str):
        raise CtlError(f"{where}: \"body\" must be a string")
    for name in ("content_type", "id"):
        if record.get(name) is not None and not isinstance(record[name], str):
            raise CtlError(f"{where}: \"{name}\" must be a string")
    if encoding == BASE64:
        try:
            data = base64.b64decode(body, validate=True)
        except binascii.Error as err:
            raise CtlError(f"{where}: \"body\" is not base64 ({err})") from None
    elif encoding in (None, "utf-8"):
        try:
            data = body.encode("utf-8")
        except UnicodeEncodeError:  # A lone surrogate ("\\ud800") names no byte sequence.
            raise CtlError(f"{where}: \"body\" is not valid text; give such bodies in base64") from None
    else:
        raise CtlError(f"{where}: unknown \"encoding\" {encoding!r}; expected base64 or none")
    return Item(data, record.get("content_type"), record.get("id"))
