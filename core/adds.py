"""An add's fields, each checked by one function declared here: the add operations
(mq.operations.Add, AddFanout, AddBatch's messages) name them as their fields' checks, and the
writers that send no operation (mq.local, the Spark stager) decode an Add op all the same
(mq.operations.add_of)."""

import math
import re
import time
from dataclasses import dataclass

from mq import trace_context
from mq.errors import Invalid, TooLarge
from mq.schedule import MAX_AHEAD_SECONDS
from mq.store import DEFAULT_CONTENT_TYPE

#: Longest de-duplication key, in characters.
MAX_DEDUP_ID = 256
#: Most messages one batch add (or batch fetch, or batch ack) may carry.
MAX_BATCH_MESSAGES = 1000
#: Longest message group id, in characters.
MAX_GROUP = 256
#: Longest content type, in characters: it is sent back as a header, which HTTP clients and
#: proxies read into a line buffer of a few kilobytes (4 KiB of UTF-8 at most).
MAX_CONTENT_TYPE = 1024
#: A control character (C0 or DEL): not allowed in a content type, which is sent back as a
#: header (of a fetch, of a batch fetch's part) and must stay one line, nor in a group, sent
#: back as the SQS API's MessageGroupId (XML 1.0 cannot carry most of them).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class CheckedAdd:
    """A checked add: where it goes, what it holds, when it becomes visible, its key."""

    queue: str
    body: bytes
    content_type: str
    due: float | None
    dedup_id: str
    group: str = ""
    attributes: dict | None = None


def check_content_type(content_type) -> str:
    """A content type: one line of at most MAX_CONTENT_TYPE characters of text (empty:
    application/octet-stream)."""
    if not isinstance(content_type, str):
        raise Invalid("content type must be a string")
    if len(content_type) > MAX_CONTENT_TYPE:
        raise Invalid(f"content type must be at most {MAX_CONTENT_TYPE} characters")
    if _CONTROL.search(content_type):
        # It is sent back as a header (of a fetch, of a batch fetch's part): one line only.
        raise Invalid("content type must not contain control characters")
    return _text(content_type, "content type")


def _text(value: str, what: str) -> str:
    """value, which every way out sends as UTF-8; Invalid when it has no UTF-8 form (a lone
    surrogate, which only a Python caller of mq.local can give)."""
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise Invalid(f"{what} is not text: it has no UTF-8 form") from None
    return value


def check_due(due, now: float | None = None):
    """A due time: finite Unix seconds, at most MAX_AHEAD_SECONDS after now (default: the
    time of the check); one already past means now."""
    if isinstance(due, bool) or not isinstance(due, (int, float)) or not math.isfinite(due):
        raise Invalid(f"due time {due!r}: expected finite Unix seconds")
    if due - (time.time() if now is None else now) > MAX_AHEAD_SECONDS:
        raise Invalid(f"a message may be scheduled at most {MAX_AHEAD_SECONDS} seconds ahead")
    return due


def check_dedup_id(dedup_id) -> str:
    """A de-duplication key: 1 to MAX_DEDUP_ID characters."""
    return _name(dedup_id, MAX_DEDUP_ID, "dedup_id")


def check_group(group) -> str:
    """A message group: 1 to MAX_GROUP characters of text, no control character."""
    _name(group, MAX_GROUP, "group")
    if _CONTROL.search(group):
        raise Invalid("group must not contain control characters")
    return _text(group, "group")


def _name(value, high: int, what: str) -> str:
    """A string of 1 to high characters; Invalid saying what it is otherwise."""
    if not isinstance(value, str) or not 0 < len(value) <= high:
        raise Invalid(f"{what} must be 1 to {high} characters")
    return value


def check_attributes(attributes) -> dict:
    """A protocol layer's metadata: a map, stored as given, whose trace context (`tp`, `ts`)
    is as mq.trace_context.parse keeps it (a fetch sends it back as headers)."""
    if not isinstance(attributes, dict):
        raise Invalid("attributes must be a map")
    if not trace_context.well_formed(attributes):
        raise Invalid("attributes: tp and ts must be a trace context as "
                      "mq.trace_context.parse keeps it")
    return attributes


def checked_add(queue: str, body: bytes, content_type: str | None, due: float | None,
                dedup_id: str | None, now: float, group: str | None = None,
                attributes: dict | None = None) -> CheckedAdd:
    """The CheckedAdd of fields already checked: the default content type, a due time not
    ahead as none (ready now), no key or group as empty."""
    return CheckedAdd(queue, body, content_type or DEFAULT_CONTENT_TYPE,
                      float(due) if due is not None and due > now else None, dedup_id or "",
                      group or "", attributes or None)


def with_properties(add: CheckedAdd, props: dict, max_body_bytes: int, now: float,
                    default_delay: bool = True) -> CheckedAdd:
    """Apply a queue's properties: its body size limit (TooLarge) and its default delay (unless
    the add gave a due time of its own, default_delay False: one not ahead means now)."""
    limit = min(props["max_body_bytes"], max_body_bytes)
    if len(add.body) > limit:
        raise TooLarge(f"body of {len(add.body)} bytes is over queue {add.queue!r}'s limit of "
                       f"{limit} bytes")
    if default_delay and add.due is None and props["delay"] > 0:
        add.due = now + props["delay"]
    return add
