"""The options of the mq data source: names, defaults and units, checked in one place."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mq import store as fmt
from mq.errors import Invalid
from mq.numbers import parse_number

#: Partitions a batch read is split into when numPartitions is not given.
DEFAULT_READ_PARTITIONS = 4
#: Messages one micro-batch of a streaming read claims at most, by default.
DEFAULT_MAX_MESSAGES_PER_BATCH = 10_000
#: Seconds a message claimed by a streaming read stays invisible to others before the
#: daemon's mover may hand it out again (the batch must commit to its sink before then).
DEFAULT_VISIBILITY_TIMEOUT = 300.0
#: The streaming consumer name when none is given (names the manifest folder).
DEFAULT_CONSUMER = "spark"
STATES = ("ready", "delayed", "in_flight")


def _flag(options: Mapping[str, Any], name: str, default: bool) -> bool:
    value = str(options.get(name, default)).lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise Invalid(f"option {name}: expected true or false, got {value!r}")
    return value in ("true", "1", "yes")


def _number(options: Mapping[str, Any], name: str, default, kind=float, low=0):
    return parse_number(f"option {name}", options.get(name), default, kind, low)


@dataclass(frozen=True)
class SourceOptions:
    """What the user passed with .option(...), checked (see docs/PIPELINE.md for each)."""

    root: str
    queue: str | None
    queues: str | None
    partitions: int
    states: tuple[str, ...]
    sync: str
    content_type: str | None
    report_file: str | None
    max_messages_per_batch: int
    visibility_timeout: float
    consumer: str
    notify: bool
    root_id: str = ""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "SourceOptions":
        """Check every option; raise Invalid naming the first one that is wrong."""
        root = options.get("root")
        if not root:
            raise Invalid("option root is required: the mq root folder, e.g. .option('root', '/srv/mq')")
        queue, queues = options.get("queue"), options.get("queues")
        if queue is not None and queues is not None:
            raise Invalid("give option queue (one name) or queues (a regex), not both")
        if queue is not None:
            fmt.validate_queue(queue)
        if queues is not None:
            try:
                re.compile(queues)
            except re.error as err:
                raise Invalid(f"option queues: not a regular expression: {err}") from None
        listed = str(options.get("states", ",".join(STATES))).split(",")
        states = tuple(s.strip() for s in listed if s.strip())
        unknown = set(states) - set(STATES)
        if unknown or not states:
            raise Invalid(f"option states: use a comma-separated subset of {', '.join(STATES)}")
        sync = options.get("sync", "fs")
        if sync not in ("fs", "file"):
            raise Invalid("option sync: 'fs' (one syncfs per task) or 'file' (fsync each file)")
        consumer = options.get("consumer", DEFAULT_CONSUMER)
        fmt.validate_queue(consumer)
        return cls(
            root=root, queue=queue, queues=queues,
            partitions=_number(options, "numPartitions", DEFAULT_READ_PARTITIONS, int, 1),
            states=states, sync=sync,
            content_type=options.get("contentType"),
            report_file=options.get("reportFile"),
            max_messages_per_batch=_number(options, "maxMessagesPerBatch",
                                           DEFAULT_MAX_MESSAGES_PER_BATCH, int, 1),
            visibility_timeout=_number(options, "visibilityTimeout", DEFAULT_VISIBILITY_TIMEOUT,
                                       float, 1),
            consumer=consumer,
            notify=_flag(options, "notify", True),
            root_id=options.get("rootId", ""),
        )

    def open_store(self) -> fmt.Store:
        """A Store of the root, which must exist: a job never makes a root (RootMissing where
        FORMAT is missing, as on the empty mount point of a shared file system that a node
        has not mounted: a root or a stage folder made there would hold messages no daemon
        sees). One stat, so each task checks again on its own node."""
        store = fmt.Store(self.root, self.sync)
        store.require_format()
        return store

    def require_queues(self) -> None:
        """Reads need queue or queues."""
        if self.queue is None and self.queues is None:
            raise Invalid("reading needs option queue (one name) or queues (a regex of names)")

    def matching_queues(self, store) -> list[str]:
        """The queues of the root this read covers, listed now."""
        if self.queue is not None:
            return [self.queue]
        assert self.queues is not None, "the readers call require_queues() first"
        pattern = re.compile(self.queues)
        return [q for q in store.queues.list_queues() if pattern.fullmatch(q)]
