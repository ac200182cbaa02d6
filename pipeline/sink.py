"""Batch and streaming writes: tasks stage message files durably, the job's commit publishes them.

Two-phase commit over the root (docs/PIPELINE.md):
1. Each task attempt writes its rows as message files into stage/{job}/{task}/ (exclusive
   create, whole write) and flushes once at its end (one syncfs, or an fsync per file with
   sync=file). Nothing in stage/ is ever served.
2. commit() on the driver writes stage/{job}/COMMIT, listing the task attempts Spark chose,
   then renames each of their files into queues/{q}/ (or delay/), flushes the folders it
   touched, and removes stage/{job}. abort() removes stage/{job}.
A failed job therefore leaves nothing visible, a failed or speculative task attempt is never
published, and a driver killed during the renames leaves a COMMIT marker from which the next
write on the root finishes the job (roll forward).
"""

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from mq import properties
from mq import store as fmt
from mq.errors import Invalid, TooLarge
from mq.ids import new_id
from mq.pipeline import notify
from mq.pipeline.options import SourceOptions

#: Columns a write understands; any other column is ignored.
COLUMNS = ("body", "queue", "delay", "at", "dedup_id", "content_type")
#: Content type of a message whose body column is a string and that names none.
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
#: Threads that rename staged files into their queues in a commit, and files per unit of work.
PUBLISH_THREADS = 4
PUBLISH_CHUNK = 20_000
#: Seconds after which a stage folder with no COMMIT marker is an abandoned job's, and removed.
STALE_STAGE_SECONDS = 24 * 3600.0


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
        self.store = fmt.Store(options.root, options.sync)
        self.task = new_id()
        self.folder = fmt.stage_folder(self.store, job, self.task)
        os.makedirs(self.folder)
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
        queues = batch.column(names.index("queue")).to_pylist() if "queue" in names else [self.options.queue] * n
        types = batch.column(names.index("content_type")).to_pylist() if "content_type" in names else absent
        keys = batch.column(names.index("dedup_id")).to_pylist() if "dedup_id" in names else absent
        delays = _seconds(batch.column(names.index("delay"))) if "delay" in names else absent
        ats = _seconds(batch.column(names.index("at"))) if "at" in names else absent
        default_type = self.options.content_type or (TEXT_CONTENT_TYPE if text_body else fmt.DEFAULT_CONTENT_TYPE)
        for body, queue, ctype, key, delay, at in zip(bodies, queues, types, keys, delays, ats):
            self.stage_row(body, queue or self.options.queue, ctype or default_type, key, delay, at)

    def stage_row(self, body, queue, content_type, key, delay, at) -> None:
        """Encode one message as the save actor does and create its staged file."""
        if body is None:
            raise Invalid("a row has a null body")
        if isinstance(body, str):
            body = body.encode()
        props = self.queue_props(queue)
        if len(body) > props["max_body_bytes"]:
            raise TooLarge(f"a body of {len(body)} bytes is over queue {queue!r}'s limit of "
                           f"{props['max_body_bytes']} bytes")
        if key is not None and not 0 < len(key) <= 256:
            raise Invalid("dedup_id must be 1 to 256 characters")
        now = time.time()
        due = at if at is not None else (now + delay if delay is not None else None)
        if due is None and props["delay"] > 0:
            due = now + props["delay"]
        delayed = due is not None and due > now
        now_ms = int(now * 1000)
        message_id = new_id(now_ms)
        data = fmt.encode_message(body, content_type, now_ms, message_id, key or "")
        fmt.write_staged(self.store, self.folder, fmt.staged_name(queue, message_id, delayed, bool(key)),
                         data, due if delayed else None)
        self.count += 1
        self.queues.add(queue)

    def finish(self) -> StagedTask:
        """Make every staged file durable with one flush; return the commit message."""
        # sync=fs: one syncfs covers the files and their names; sync=file: the files were
        # fsynced as written, so the folders' entries are what is left.
        self.store.flush({self.folder, os.path.dirname(self.folder)})
        return StagedTask(self.job, self.task, self.count, sorted(self.queues))


class Publisher:
    """The driver side of a write job: publish the chosen attempts' files, or drop them all."""

    def __init__(self, options: SourceOptions, job: str):
        self.options = options
        self.job = job

    def commit(self, messages: list) -> dict:
        """Mark the job as committing, publish its files, flush, tell the daemons; return a report."""
        started = time.time()
        store = fmt.Store(self.options.root, self.options.sync)
        tasks = [m.task for m in messages if m is not None]
        folder = fmt.stage_folder(store, self.job)
        if not os.path.isdir(folder):
            os.makedirs(folder)  # A job with no rows still commits (it publishes nothing).
        fmt.mark_committing(store, self.job, tasks)
        report = publish_job(store, folder, tasks, self.options.notify)
        report.update(job=self.job, tasks=len(tasks), commit_seconds=round(time.time() - started, 3))
        roll_forward(store, skip=self.job)
        if self.options.report_file:
            write_report(self.options.report_file, report)
        return report

    def abort(self) -> None:
        """Remove every file the job staged; none was ever visible."""
        store = fmt.Store(self.options.root, self.options.sync)
        shutil.rmtree(fmt.stage_folder(store, self.job), ignore_errors=True)


def publish_job(store: fmt.Store, folder: str, tasks: list[str], tell: bool = True) -> dict:
    """Rename the staged files of the listed tasks into their queues; flush; remove the folder.

    Renames run on PUBLISH_THREADS threads: each is a system call that releases the GIL, and
    the commit of a big job is otherwise one process renaming a million files alone.
    """
    chunks = []
    for task in tasks:
        task_dir = os.path.join(folder, task)
        try:
            names = os.listdir(task_dir)
        except FileNotFoundError:
            continue  # Published already by an earlier, interrupted commit.
        chunks.extend((task_dir, names[i:i + PUBLISH_CHUNK]) for i in range(0, len(names), PUBLISH_CHUNK))
    props = properties.PropertyFiles(store)
    with ThreadPoolExecutor(PUBLISH_THREADS) as pool:
        parts = list(pool.map(lambda chunk: publish_chunk(store, props, *chunk), chunks))
    total = Published()
    for part in parts:
        total.merge(part)
    if total.dirs:
        store.flush(total.dirs | {store.folder("queues")})
    shutil.rmtree(folder, ignore_errors=True)
    told = notify.tell_daemons(store, total.ready, total.delayed) if tell and (total.ready or total.delayed) else 0
    return {"messages": total.count, "duplicates": total.duplicates, "delayed": len(total.delayed),
            "queues": {q: len(ids) for q, ids in sorted(total.ready.items())}, "daemons_told": told}


@dataclass
class Published:
    """What publishing some staged files did."""

    count: int = 0
    duplicates: int = 0
    dirs: set = field(default_factory=set)
    ready: dict = field(default_factory=dict)
    delayed: list = field(default_factory=list)

    def merge(self, other: "Published") -> None:
        """Add another part's results to these."""
        self.count += other.count
        self.duplicates += other.duplicates
        self.dirs |= other.dirs
        for queue, ids in other.ready.items():
            self.ready.setdefault(queue, []).extend(ids)
        self.delayed.extend(other.delayed)


def publish_chunk(store: fmt.Store, props, task_dir: str, names: list[str]) -> Published:
    """Publish some of one task's staged files."""
    out = Published(dirs={task_dir})
    now = time.time()
    known_queues: set[str] = set()
    for name in names:
        parsed = fmt.parse_staged(name)
        if parsed is None:
            continue  # Not a message file (nothing else is staged, but never publish junk).
        queue, message_id, is_delayed, keyed = parsed
        if queue not in known_queues:
            # One check per queue and chunk, not per file; a delayed message needs its queue too.
            store.create_queue(queue)
            known_queues.add(queue)
        try:
            if keyed and _is_duplicate(store, props, task_dir, name, queue, message_id, now, out.dirs):
                out.duplicates += 1
                continue
            due = os.stat(os.path.join(task_dir, name)).st_mtime if is_delayed else None
        except FileNotFoundError:
            continue  # Published by another committer of the same job.
        target = fmt.publish_staged(store, task_dir, name, parsed)
        if target is None:
            continue
        out.dirs.add(target)
        out.count += 1
        if is_delayed:
            out.delayed.append((queue, message_id, 0, due))
        else:
            out.ready.setdefault(queue, []).append((message_id, 0))
    return out


def _is_duplicate(store, props, task_dir, name, queue, message_id, now, dirs) -> bool:
    """Record the staged message's dedup key; True (and the file dropped) when it was taken."""
    with open(os.path.join(task_dir, name), "rb") as f:
        digest = fmt.decode_message(queue, message_id, f.read(65536)).dedup_digest
    window = props.effective(queue)["dedup_window"]
    earlier = fmt.dedup_record_digest(store, queue, digest, message_id, window, now)
    dirs.add(os.path.dirname(store.dedup_path(queue, digest)))
    if earlier is None or earlier == message_id:
        return False
    os.unlink(os.path.join(task_dir, name))
    return True


def roll_forward(store: fmt.Store, skip: str = "", stale_after: float = STALE_STAGE_SECONDS) -> int:
    """Finish jobs whose driver died while publishing; remove abandoned stage folders.

    A folder with a COMMIT marker is published (renames that already happened are skipped);
    one without, older than stale_after seconds, belonged to a job that never committed.
    """
    finished = 0
    for job, folder, mtime in fmt.list_stages(store):
        if job == skip:
            continue
        tasks = fmt.committing_tasks(folder)
        if tasks is not None:
            publish_job(store, folder, tasks)
            finished += 1
        elif time.time() - mtime > stale_after:
            shutil.rmtree(folder, ignore_errors=True)
    return finished


def write_report(path: str, report: dict) -> None:
    """Write the commit report as JSON (replaced whole)."""
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as f:
        f.write(orjson.dumps(report))
    os.replace(temp, path)


class BatchWriter(DataSourceArrowWriter):
    """df.write.format("mq"): stage on executors, publish in commit, drop in abort."""

    def __init__(self, options: SourceOptions, schema):
        check_schema(schema)
        if options.queues is not None:
            raise Invalid("writes take option queue (a default queue), not queues")
        self.options = options
        self.job = new_id()

    def write(self, iterator) -> StagedTask:
        """Stage this task's rows; flush once."""
        stager = Stager(self.options, self.job)
        for batch in iterator:
            stager.stage_batch(batch)
        return stager.finish()

    def commit(self, messages) -> None:
        """Publish the job's files (Spark calls this once, after every task succeeded)."""
        Publisher(self.options, self.job).commit(messages)

    def abort(self, messages) -> None:
        """Drop the job's files."""
        Publisher(self.options, self.job).abort()


class StreamWriter(DataSourceStreamArrowWriter):
    """df.writeStream.format("mq"): each micro-batch is one job, staged then published whole."""

    def __init__(self, options: SourceOptions, schema):
        check_schema(schema)
        if options.queues is not None:
            raise Invalid("writes take option queue (a default queue), not queues")
        self.options = options
        self.job = new_id()  # The micro-batch's stage folder, shared by its tasks.

    def write(self, iterator) -> StagedTask:
        """Stage this task's rows of the current micro-batch (Spark makes one writer per batch)."""
        stager = Stager(self.options, self.job)
        for batch in iterator:
            stager.stage_batch(batch)
        return stager.finish()

    def commit(self, messages, batchId) -> None:
        """Publish the micro-batch's files (this writer is a new instance: the job comes from the tasks)."""
        jobs = {m.job for m in messages if m is not None}
        for job in jobs:
            Publisher(self.options, job).commit([m for m in messages if m is not None and m.job == job])

    def abort(self, messages, batchId) -> None:
        """Drop the micro-batch's files (those of tasks that reported none go with the stale sweep)."""
        for job in {m.job for m in messages if m is not None}:
            Publisher(self.options, job).abort()
