"""The grammar of names under a root: queue names, message ids and the entries built from them."""

from mq.errors import Invalid
from mq.ids import is_id
from mq.queue_names import MAX_QUEUE_NAME, QUEUE_PATTERN, RESERVED_NAMES, is_queue, validate_queue

__all__ = ["MAX_QUEUE_NAME", "QUEUE_PATTERN", "RESERVED_NAMES", "is_queue", "validate_queue",
           "validate_id", "entry_name", "parse_entry", "queued_name", "split_name"]


def validate_id(message_id: str) -> str:
    """Return message_id if it is in the id format, else raise Invalid."""
    if not isinstance(message_id, str) or not is_id(message_id):
        raise Invalid(f"invalid message id {message_id!r}: expected a lower-case UUID")
    return message_id


def entry_name(message_id: str, attempts: int = 0) -> str:
    """A message's name in its folder: the id, then '.N' once it has been delivered N times."""
    return f"{message_id}.{attempts}" if attempts else message_id


def parse_entry(name: str) -> tuple[str, int] | None:
    """(id, deliveries so far) of an entry name; None when it is not one."""
    message_id, dot, count = name.partition(".")
    if not is_id(message_id) or (dot and not count.isdigit()):
        return None
    return message_id, int(count) if dot else 0


def queued_name(queue: str, entry: str) -> str:
    """'{queue}:{entry}': a name in one of the root's shared folders (new/, delay/, remove/)."""
    return f"{queue}:{entry}"


def split_name(name: str) -> tuple[str, str, int] | None:
    """(queue, id, deliveries) of a 'queue:id[.N]' name in new/, delay/ or remove/."""
    queue, sep, entry = name.rpartition(":")
    parsed = parse_entry(entry) if sep and QUEUE_PATTERN.fullmatch(queue) else None
    return (queue, *parsed) if parsed else None


def probe_counts(max_attempts: int, near: int | None = None) -> range | list[int]:
    """The delivery counts a lookup by id probes: 0 to max_attempts, then, when `near` (a
    count the message had) is past them, near to near + max_attempts: a count only grows,
    so a message delivered any number of times is found in as many probes."""
    counts = range(max_attempts + 1)
    if near is None or near <= max_attempts:
        return counts
    return [*counts, *range(near, near + max_attempts + 1)]
