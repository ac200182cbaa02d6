"""Staging, the first phase of a write: a task's rows become durable message files in stage/.

Each task attempt writes its rows as finished message files (the save actor's bytes) into
stage/{job}/{task}/ with exclusive creates and flushes once at its end (docs/PIPELINE.md).
"""

import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

from mq import properties
from mq import store as fmt
from mq.adds import with_properties
from mq.errors import Invalid
from mq.ids import new_id
from mq.operations import add_of
from mq.pipeline.options import SourceOptions
from mq.schedule import due_time
from mq.store.staging import staged_name

#: Columns a write understands; any other column is ignored.
COLUMNS = ("body", "queue", "delay", "at", "dedup_id", "content_type")
#: Content type of a message whose body column is a string and that names none.
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
@dataclass
class StagedTask(WriterCommitMessage):
    """What one successful task attempt staged: its job and task folder ids and counts."""

    job: str
    task: str
    count: int
    queues: list = field(default_factory=list)


def check_schema(schema) -> None:
    """Refuse a DataFrame without a usable body column, or with a known column of the wrong type."""
    kinds = {f.name: f.dataType.typeName() for f in schema.fields}
    if kinds.get("body") not in ("binary", "string"):
        raise Invalid("writing to mq needs a column 'body' of type binary or string "
                      f"(columns: {', '.join(kinds) or 'none'})")
    expected = {"queue": ("string",), "dedup_id": ("string",), "content_type": ("string",),
                "delay": ("integer", "long", "double", "float", "short", "decimal"),
                "at": ("timestamp", "timestamp_ntz", "integer", "long", "double", "decimal")}
    for name, allowed in expected.items():
        if name in kinds and kinds[name] not in allowed:
            raise Invalid(f"column {name!r} must be {' or '.join(allowed)}, not {kinds[name]}")


def _seconds(column: pa.Array) -> list:
    """A delay or at column as float seconds (timestamps: since the epoch, UTC)."""
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
        return [None if v is None else v / 1e6 for v in column.to_pylist()]
    return [None if v is None else float(v) for v in pc.cast(column, pa.float64()).to_pylist()]


class Stager:
    """Writes one task's rows as message files into its stage folder."""

    def __init__(self, options: SourceOptions, job: str):
        self.options = options
        self.job = job
        self.store = options.open_store()
        self.task = new_id()
        self.folder = self.store.staging.make_stage_folder(job, self.task)
        self.props = properties.PropertyFiles(self.store)
        self.checked: dict[str, dict] = {}
        self.count = 0
        self.queues: set[str] = set()

    def queue_props(self, queue) -> dict:
        """The queue's effective properties, the name checked on first sight."""
        props = self.checked.get(queue)
        if props is None:
            if queue is None:
                raise Invalid("a row has no queue: give option queue or a non-null queue column")
            props = self.checked[queue] = self.props.effective(fmt.validate_queue(queue))
        return props

    def stage_batch(self, batch: pa.RecordBatch) -> None:
        """Stage every row of one Arrow batch."""
        names = batch.schema.names
        n = batch.num_rows
        body_col = batch.column(names.index("body"))
        text_body = pa.types.is_string(body_col.type) or pa.types.is_large_string(body_col.type)
        bodies = body_col.to_pylist()
        absent = [None] * n
        queues = (batch.column(names.index("queue")).to_pylist() if "queue" in names
                  else [self.options.queue] * n)
        types = batch.column(names.index("content_type")).to_pylist() if "content_type" in names else absent
        keys = batch.column(names.index("dedup_id")).to_pylist() if "dedup_id" in names else absent
        delays = _seconds(batch.column(names.index("delay"))) if "delay" in names else absent
        ats = _seconds(batch.column(names.index("at"))) if "at" in names else absent
        default_type = self.options.content_type or (
            TEXT_CONTENT_TYPE if text_body else fmt.DEFAULT_CONTENT_TYPE)
        for body, queue, ctype, key, delay, at in zip(bodies, queues, types, keys, delays, ats):
            self.stage_row(body, queue or self.options.queue, ctype or default_type, key, delay, at)

    def stage_row(self, body, queue, content_type, key, delay, at) -> None:
        """Encode one message as the save actor does and create its staged file."""
        if body is None:
            raise Invalid("a row has a null body")
        if isinstance(body, str):
            body = body.encode()
        props = self.queue_props(queue)
        now = time.time()
        add = add_of({"queue": queue, "body": body, "content_type": content_type,
                      "due": due_time(delay, at, now), "dedup_id": key}, now)
        add = with_properties(add, props, props["max_body_bytes"], now)
        now_ms = int(now * 1000)
        message_id = new_id(now_ms)
        data = fmt.encode_message(add.body, add.content_type, now_ms, message_id, add.dedup_id)
        self.store.staging.write_staged(self.folder,
                                staged_name(queue, message_id, add.due is not None, bool(add.dedup_id)),
                                data, add.due)
        self.count += 1
        self.queues.add(queue)

    def finish(self) -> StagedTask:
        """Make every staged file durable with one flush; return the commit message."""
        # sync=fs: one syncfs covers the files and their names; sync=file: the files were
        # fsynced as written, so the folders' entries are what is left.
        self.store.flush({self.folder, self.store.staging.stage_folder(self.job)})
        return StagedTask(self.job, self.task, self.count, sorted(self.queues))


