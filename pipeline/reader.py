"""Batch read: a snapshot of queues as rows, split by id into partitions; consumes nothing."""

import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from mq import store as fmt
from mq.pipeline.options import SourceOptions
from mq.store.listing import Entry, list_entries, read_entry
from mq.store.message import Message

#: The columns of every read, batch or streaming.
SCHEMA = ("id string, queue string, body binary, content_type string, state string, "
          "created timestamp, due timestamp, attempts int")
ARROW_SCHEMA = pa.schema([
    ("id", pa.string()), ("queue", pa.string()), ("body", pa.binary()),
    ("content_type", pa.string()), ("state", pa.string()),
    ("created", pa.timestamp("us", tz="UTC")), ("due", pa.timestamp("us", tz="UTC")),
    ("attempts", pa.int32()),
])
#: Rows per Arrow batch handed to Spark, and the body bytes that end a batch early.
BATCH_ROWS = 8192
BATCH_BYTES = 32 * 1024 * 1024


class Shard(InputPartition):
    """One partition of a batch read: the ids whose last hex digits fall in shard i of n."""

    def __init__(self, index: int, count: int, queues: list[str]):
        super().__init__(index)
        self.index, self.count, self.queues = index, count, queues


class RowBuffer:
    """Collects rows column by column and cuts them into Arrow record batches."""

    def __init__(self):
        self.columns: list[list] = [[] for _ in ARROW_SCHEMA]
        self.bytes = 0

    def add(self, entry: Entry, message: Message, mtime: float) -> None:
        """Append one message as a row."""
        due = int(mtime * 1_000_000) if entry.state != "ready" else None
        row = (entry.id, entry.queue, message.body, message.content_type, entry.state,
               message.created_ms * 1000, due, entry.attempts)
        for column, value in zip(self.columns, row):
            column.append(value)
        self.bytes += len(message.body)

    def full(self) -> bool:
        """True when the rows so far should go to Spark as one batch."""
        return len(self.columns[0]) >= BATCH_ROWS or self.bytes >= BATCH_BYTES

    def take(self) -> pa.RecordBatch:
        """The rows so far as a record batch; the buffer starts empty again."""
        batch = pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(self.columns, ARROW_SCHEMA)],
            schema=ARROW_SCHEMA)
        self.columns = [[] for _ in ARROW_SCHEMA]
        self.bytes = 0
        return batch


def read_entries(entries) -> Iterator[pa.RecordBatch]:
    """Read each listed entry whole and yield the rows; gone or corrupt files are skipped."""
    buffer = RowBuffer()
    seen = set()
    for entry in entries:
        if entry.id in seen:
            continue  # Listed in two states because it moved between the listings.
        try:
            found = read_entry(entry)
        except fmt.CorruptMessage as err:
            print(f"mq: skipping {entry.path}: {err}", file=sys.stderr)
            continue
        if found is None:
            continue  # Moved (fetched, acknowledged, due) since it was listed.
        seen.add(entry.id)
        buffer.add(entry, *found)
        if buffer.full():
            yield buffer.take()
    if buffer.columns[0]:
        yield buffer.take()


class SnapshotReader(DataSourceReader):
    """Plans shards on the driver; each executor lists the folders and reads its shard."""

    def __init__(self, options: SourceOptions):
        options.require_queues()
        self.options = options

    def partitions(self):
        """One Shard per requested partition, over the queues that exist now."""
        store = self.options.open_store()
        queues = self.options.matching_queues(store)
        count = self.options.partitions
        return [Shard(i, count, queues) for i in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Yield the shard's messages as Arrow batches."""
        assert isinstance(partition, Shard), "partitions() plans Shards only"
        store = self.options.open_store()
        states = set(self.options.states)
        entries = (e for e in list_entries(store, partition.queues, (partition.index, partition.count))
                   if e.state in states)
        yield from read_entries(entries)
