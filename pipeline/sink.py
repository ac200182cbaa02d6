"""Batch and streaming writes: tasks stage message files durably, the job's commit publishes them.

Two-phase commit over the root (docs/PIPELINE.md):
1. Each task attempt writes its rows as message files into stage/{job}/{task}/ (exclusive
   create, whole write) and flushes once at its end (one syncfs, or an fsync per file with
   sync=file). Nothing in stage/ is ever served.
2. commit() on the driver writes stage/{job}/COMMIT, listing the task attempts Spark chose,
   then renames each of their files into queues/{q}/ (or delay/), flushes the folders it
   touched, and removes stage/{job}. abort() removes stage/{job}.
A failed job therefore leaves nothing visible, a failed or speculative task attempt is never
published, and a driver killed during the renames leaves a COMMIT marker from which the
daemon's reaper (or the next write on the root) finishes the job (roll forward).
"""

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

from mq.errors import Invalid
from mq.ids import new_id
from mq.pipeline.options import SourceOptions
from mq.pipeline.publish import Publisher
from mq.pipeline.staging import StagedTask, Stager, check_schema


class StagingWriter:
    """What both writers do on the executors: check the schema, stage a task's rows."""

    def __init__(self, options: SourceOptions, schema):
        check_schema(schema)
        if options.queues is not None:
            raise Invalid("writes take option queue (a default queue), not queues")
        if options.queue is not None and "queue" in schema.fieldNames():
            # A read written back carries its rows' queues: which one the caller meant cannot be told.
            raise Invalid(f"give option queue or a queue column, not both: drop the column "
                          f"(df.drop(\"queue\")) to write every row to {options.queue!r}")
        self.options = options
        self.job = new_id()  # The job's (a micro-batch's) stage folder, shared by its tasks.

    def write(self, iterator) -> StagedTask:
        """Stage this task's rows; flush once."""
        stager = Stager(self.options, self.job)
        for batch in iterator:
            stager.stage_batch(batch)
        return stager.finish()


class BatchWriter(StagingWriter, DataSourceArrowWriter):
    """df.write.format("mq"): stage on executors, publish in commit, drop in abort."""

    def commit(self, messages) -> None:
        """Publish the job's files (Spark calls this once, after every task succeeded)."""
        Publisher(self.options, self.job).commit(messages)

    def abort(self, messages) -> None:
        """Drop the job's files."""
        Publisher(self.options, self.job).abort()


class StreamWriter(StagingWriter, DataSourceStreamArrowWriter):
    """df.writeStream.format("mq"): each micro-batch is one job, staged then published whole
    (Spark makes one writer per micro-batch)."""

    def commit(self, messages, batchId) -> None:
        """Publish the micro-batch's files (this writer is a new instance: the job comes from the tasks)."""
        jobs = {m.job for m in messages if m is not None}
        for job in jobs:
            Publisher(self.options, job).commit([m for m in messages if m is not None and m.job == job])

    def abort(self, messages, batchId) -> None:
        """Drop the micro-batch's files (those of tasks that reported none go with the reaper's
        sweep of abandoned stage folders)."""
        for job in {m.job for m in messages if m is not None}:
            Publisher(self.options, job).abort()
