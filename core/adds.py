"""An add, checked in one place: the front, the save actor and the Spark stager all call this."""

import math
import re
from dataclasses import dataclass

from mq.errors import Invalid, TooLarge
from mq.schedule import MAX_AHEAD_SECONDS
from mq.store import DEFAULT_CONTENT_TYPE, validate_queue

#: Longest de-duplication key, in characters.
MAX_DEDUP_ID = 256
#: Most messages one batch add (or batch fetch, or batch ack) may carry.
MAX_BATCH_MESSAGES = 1000
#: Longest message group id, in characters.
MAX_GROUP = 256
#: A control character (C0 or DEL): not allowed in a content type, which is sent back as a
#: header (of a fetch, of a batch fetch's part) and must stay one line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class Add:
    """A checked add: where it goes, what it holds, when it becomes visible, its key."""

    queue: str
    body: bytes
    content_type: str
    due: float | None
    dedup_id: str
    group: str = ""
    attributes: dict | None = None


def check_add(queue, body, content_type=None, due=None, dedup_id=None, now: float = 0.0,
              group=None, attributes=None) -> Add:
    """Return the add checked; raise Invalid naming the first thing wrong with it.

    due: Unix seconds when it becomes visible (None: now), at most a year and a day ahead;
    a due time already past means now. group: the message group (1 to MAX_GROUP characters);
    attributes: a map of a protocol layer's metadata, stored as given.
    """
    validate_queue(queue)
    if not isinstance(body, bytes):
        raise Invalid("message body must be bytes")
    if content_type is not None and not isinstance(content_type, str):
        raise Invalid("content type must be a string")
    if content_type and _CONTROL.search(content_type):
        raise Invalid("content type must not contain control characters")
    if due is not None:
        if isinstance(due, bool) or not isinstance(due, (int, float)) or not math.isfinite(due):
            raise Invalid(f"due time {due!r}: expected finite Unix seconds")
        if due - now > MAX_AHEAD_SECONDS:
            raise Invalid(f"a message may be scheduled at most {MAX_AHEAD_SECONDS} seconds ahead")
    if dedup_id is not None and (not isinstance(dedup_id, str) or not 0 < len(dedup_id) <= MAX_DEDUP_ID):
        raise Invalid(f"dedup_id must be 1 to {MAX_DEDUP_ID} characters")
    if group is not None and (not isinstance(group, str) or not 0 < len(group) <= MAX_GROUP):
        raise Invalid(f"group must be 1 to {MAX_GROUP} characters")
    if attributes is not None and not isinstance(attributes, dict):
        raise Invalid("attributes must be a map")
    return Add(queue, body, content_type or DEFAULT_CONTENT_TYPE,
               float(due) if due is not None and due > now else None, dedup_id or "",
               group or "", attributes or None)


def with_properties(add: Add, props: dict, max_body_bytes: int, now: float,
                    default_delay: bool = True) -> Add:
    """Apply a queue's properties: its body size limit (TooLarge) and its default delay (unless
    the add gave a due time of its own, default_delay False: one not ahead means now)."""
    limit = min(props["max_body_bytes"], max_body_bytes)
    if len(add.body) > limit:
        raise TooLarge(f"body of {len(add.body)} bytes is over queue {add.queue!r}'s limit of "
                       f"{limit} bytes")
    if default_delay and add.due is None and props["delay"] > 0:
        add.due = now + props["delay"]
    return add
