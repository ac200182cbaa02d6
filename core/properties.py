"""Queue properties: the schema, validation, and precedence (queue's own, first matching rule, system).

Stored in the root (docs/FORMAT.md) so every daemon and actor on the root sees the same values;
readers re-check the files' mtimes (or, while props/ holds still, its own: PropertyFiles), so
a change is seen by the next request that uses it.
"""

import os
import re
import time
from collections.abc import Iterable, Iterator

import orjson

from mq.config import Options
from mq.errors import Invalid
from mq.store import MAX_QUEUE_NAME, validate_queue

#: The system defaults; "timeout" and "max_body_bytes" are the daemon's options (their
#: defaults here, the values the daemon runs with once it has started).
SYSTEM = {
    "timeout": Options.timeout,  # seconds a fetched message stays invisible
    "retry": 2,               # redeliveries before a message goes to its dead-letter queue
    "delay": 0.0,             # seconds every new message waits before it is visible
    "dedup_window": 300.0,    # seconds a de-duplication key is remembered
    "max_body_bytes": Options.max_body_bytes,
    "dead_letter_queue": "",  # empty: "{queue}.dead"
    "accum": 0.0,             # seconds of an accumulation window (docs/DELIVERY.md); 0 is off
    "fifo": False,            # a group's messages in order: none while an older one is in flight
    "tags": {},               # the queue's tags, names to values
    "attributes": {},         # a protocol layer's queue attributes (the SQS API's), kept as given
    "retention": 0.0,         # seconds a message is kept after it was added; 0: until acked
}

#: Largest retry count accepted; it bounds the names probed for a message (docs/FORMAT.md).
MAX_RETRY = 100
#: The retry count that means "redeliver forever": no message ever goes to a dead-letter queue.
UNLIMITED_RETRY = -1
MAX_TIMEOUT = 12 * 3600.0
#: Longest retention, in seconds (14 days, as SQS).
MAX_RETENTION = 14 * 86400.0


def _number(key, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"property {key!r} must be a number, not {type(value).__name__}")
    if not low <= value <= high:
        raise Invalid(f"property {key!r} must be between {low:g} and {high:g}")
    return value


def _integer(key, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"property {key!r} must be an integer")
    return _number(key, value, low, high)


def _retention(key, value):
    if _number(key, value, 0, MAX_RETENTION) and value < 1:
        raise Invalid(f"property {key!r} must be 0 (no limit) or between 1 and {MAX_RETENTION:g}")
    return value


def _queue_name(key, value):
    if not isinstance(value, str):
        raise Invalid(f"property {key!r} must be a string")
    if value:
        try:
            validate_queue(value)
        except Invalid as err:
            raise Invalid(f"property {key!r}: {err.message}") from None
    return value


def _bool(key, value):
    if not isinstance(value, bool):
        raise Invalid(f"property {key!r} must be true or false, not {type(value).__name__}")
    return value


def _strings(key, value, most, longest_key, longest_value):
    if not isinstance(value, dict):
        raise Invalid(f"property {key!r} must be an object of strings")
    if len(value) > most:
        raise Invalid(f"property {key!r} may hold at most {most} entries")
    for name, text in value.items():
        if not isinstance(text, str) or not 0 < len(name) <= longest_key or len(text) > longest_value:
            raise Invalid(f"property {key!r}: entry {name[:40]!r} must be a string of at most "
                          f"{longest_value} characters, its name 1 to {longest_key}")
    return value


CHECKS = {
    "timeout": lambda k, v: float(_number(k, v, 0.001, MAX_TIMEOUT)),
    "retry": lambda k, v: _integer(k, v, UNLIMITED_RETRY, MAX_RETRY),
    "delay": lambda k, v: float(_number(k, v, 0, 366 * 86400)),
    "dedup_window": lambda k, v: float(_number(k, v, 0, 30 * 86400)),
    "max_body_bytes": lambda k, v: _integer(k, v, 0, 1 << 30),
    "dead_letter_queue": _queue_name,
    "accum": lambda k, v: float(_number(k, v, 0, 3600)),
    "fifo": _bool,
    "tags": lambda k, v: _strings(k, v, 50, 128, 256),
    "attributes": lambda k, v: _strings(k, v, 64, 128, 65536),
    "retention": lambda k, v: float(_retention(k, v)),
}


def dead_letter_count(dead_props: dict, deliveries: int) -> int:
    """The delivery count a dead letter keeps in its dead-letter queue (of properties
    `dead_props`): its own when that queue never dead-letters (retry -1), so that a receive
    counts every earlier delivery as SQS counts receives across queues; else 0, a count of its
    own for that queue's retries."""
    return deliveries if dead_props["retry"] == UNLIMITED_RETRY else 0


def dead_letter(props: dict, deliveries: int, effective) -> tuple[str | None, int]:
    """Where a delivery that ended unacked goes, from its queue's properties `props`: (None, 0)
    to be ready again, else (the dead-letter queue, the count it keeps there); `effective`
    gives a queue's properties by name."""
    if not exhausted(props, deliveries):
        return None, 0
    dead = props["dead_letter_queue"]
    return dead, dead_letter_count(effective(dead), deliveries)


def exhausted(props: dict, deliveries: int) -> bool:
    """Whether a message delivered `deliveries` times has had every redelivery its queue's
    `retry` allows (never, with UNLIMITED_RETRY)."""
    return props["retry"] != UNLIMITED_RETRY and deliveries > props["retry"]


def validate(props) -> dict:
    """Return props with checked values; raise Invalid naming the first bad key."""
    if not isinstance(props, dict):
        raise Invalid("properties must be a JSON object")
    out = {}
    for key, value in props.items():
        if key not in CHECKS:
            raise Invalid(f"unknown property {key!r}; known: {', '.join(sorted(CHECKS))}")
        out[key] = CHECKS[key](key, value)
    return out


def named_queues(props) -> list[str]:
    """The queues a properties value names (dead_letter_queue): its writer must be allowed to
    use them, since the queue's dead letters will be written there and a redrive reads them
    back. Anything not a properties object names none (its check refuses it)."""
    if not isinstance(props, dict):
        return []
    dead = props.get("dead_letter_queue")
    return [dead] if isinstance(dead, str) and dead else []


def validate_rules(rules) -> list:
    """Return default rules [[regex, props], ...] checked; raise Invalid naming what is wrong."""
    if not isinstance(rules, list):
        raise Invalid("default properties must be a JSON list of [regex, properties] pairs")
    out = []
    for pos, rule in enumerate(rules):
        if not isinstance(rule, list) or len(rule) != 2 or not isinstance(rule[0], str):
            raise Invalid(f"rule {pos} must be [regex, properties]")
        try:
            re.compile(rule[0])
        except re.error as err:
            raise Invalid(f"rule {pos}: bad regex {rule[0]!r}: {err}") from None
        out.append([rule[0], validate(rule[1])])
    return out


#: Seconds props/ must have held still, and the longest a value read is answered without
#: looking at its file again (PropertyFiles).
SETTLED_SECONDS = 1.0


class PropertyFiles:
    """Reads the property files of a root, re-reading a file only when its mtime changed.

    Every change of a property file renames or unlinks a name in props/ (Disk.replace), which
    changes the folder's mtime. While that mtime holds still, and was already SETTLED_SECONDS
    old when seen (a change in the same tick of the file system's clock would keep it), what
    was read is answered without a stat of each file for up to SETTLED_SECONDS: on a network
    or FUSE file system a stat of a queue's missing property file is a round trip of its own
    on every batch (bench/fs_ops.py).
    """

    def __init__(self, store, system: dict | None = None):
        self.store = store
        self.system = {**SYSTEM, **(system or {})}
        #: queue (None: the rules) -> (its file's stamp, its value)
        self._cache: dict[str | None, tuple[tuple, object]] = {}
        #: props/'s stamp when seen settled, when, and queue -> its value since
        self._folder: tuple = ()
        self._seen_at = 0.0
        self._known: dict[str | None, object] = {}

    def _settled(self, path: str) -> tuple:
        """props/'s (inode, mtime) when older than SETTLED_SECONDS, else ()."""
        try:
            info = os.stat(os.path.dirname(path))
        except OSError:
            return ()
        if time.time() - info.st_mtime < SETTLED_SECONDS:
            return ()
        return (info.st_ino, info.st_mtime_ns)

    def _load(self, key: str | None, path: str, empty):
        folder, now = self._settled(path), time.monotonic()
        if not folder or folder != self._folder or now - self._seen_at > SETTLED_SECONDS:
            self._folder, self._seen_at, self._known = folder, now, {}
        elif key in self._known:
            return self._known[key]
        value = self._read(key, path, empty)
        if folder:
            self._known[key] = value
        return value

    def _read(self, key: str | None, path: str, empty):
        try:
            info = os.stat(path)
            # A replace makes a new inode: two within one clock tick keep their mtime.
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            self._cache.pop(key, None)
            return empty
        cached = self._cache.get(key)
        if cached and cached[0] == stamp:
            return cached[1]
        try:
            with open(path, "rb") as f:
                value = orjson.loads(f.read())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return empty
        self._cache[key] = (stamp, value)
        return value

    def own(self, queue: str) -> dict:
        """The properties set on the queue itself."""
        return self._load(queue, self.store.props_path(queue), {})

    def rules(self) -> list:
        """The default rules, in order."""
        return self._load(None, self.store.default_props_path(), [])

    def queues(self) -> set[str]:
        """The queues whose own properties are cached."""
        return {key for key in self._cache if key is not None}

    def forget(self, queue: str) -> None:
        """Drop a gone queue's cached properties."""
        self._cache.pop(queue, None)
        self._known.pop(queue, None)

    def effective(self, queue: str) -> dict:
        """Every property of the queue: its own, then the first matching rule, then the system's."""
        return self._merged(queue, self.rules(), self.own(queue))

    def effective_each(self, queues: Iterable[str]) -> Iterator[tuple[str, dict]]:
        """(queue, effective properties) of each queue, props/ listed once: a queue without a
        file there costs no stat of its own (a pass over 10,000 queues is one listing, not
        20,000 stats)."""
        rules = self.rules()
        try:
            files: set[str] | None = set(os.listdir(os.path.dirname(
                self.store.default_props_path())))
        except OSError:
            files = None  # Each queue's own look tells absence from a fault.
        for queue in queues:
            if files is not None and f"{queue}.json" not in files:
                self._cache.pop(queue, None)
                own: dict = {}
            else:
                own = self.own(queue)
            yield queue, self._merged(queue, rules, own)

    def _merged(self, queue: str, rules: list, own: dict) -> dict:
        merged = dict(self.system)
        for pattern, props in rules:
            if re.fullmatch(pattern, queue):
                merged.update(props)
                break
        merged.update(own)
        if not merged["dead_letter_queue"]:
            merged["dead_letter_queue"] = dead_letter_default(queue)
        return merged


def dead_letter_default(queue: str) -> str:
    """The default dead-letter queue of a queue: '{queue}.dead', shortened to fit a name."""
    return queue[: MAX_QUEUE_NAME - 5] + ".dead"
