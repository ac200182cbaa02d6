"""The Spark data source "mq": batch and streaming reads and writes of an mq root."""

from pyspark.sql.datasource import DataSource

from mq.errors import Invalid
from mq.pipeline.options import SourceOptions
from mq.pipeline.reader import SCHEMA, SnapshotReader
from mq.pipeline.sink import BatchWriter, StreamWriter
from mq.pipeline.stream import ClaimingStreamReader


class MqDataSource(DataSource):
    """spark.read / readStream / write / writeStream .format("mq"); options in docs/PIPELINE.md."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "mq"

    def schema(self) -> str:
        """The columns every read returns."""
        return SCHEMA

    def parsed(self) -> SourceOptions:
        """The checked options; the root must exist, be an mq root of this format version and,
        with option rootId, have that ID. Checked on the driver, before any task runs: reads
        and writes alike never make a root (mq --create-root does)."""
        options = SourceOptions.parse(self.options)
        options.open_store().init(make=False, expect_id=options.root_id)
        return options

    def reader(self, schema) -> SnapshotReader:
        """A snapshot read: consumes nothing."""
        return SnapshotReader(self.parsed())

    def streamReader(self, schema) -> ClaimingStreamReader:
        """A consuming read: claims, then acknowledges after the sink commits."""
        return ClaimingStreamReader(self.parsed())

    def writer(self, schema, overwrite: bool) -> BatchWriter:
        """An appending write; overwrite would mean deleting queues, so it is refused."""
        if overwrite:
            raise Invalid("mq only appends messages: use mode('append'), not overwrite")
        return BatchWriter(self.parsed(), schema)

    def streamWriter(self, schema, overwrite: bool) -> StreamWriter:
        """Each micro-batch is published whole, as a batch write."""
        if overwrite:
            raise Invalid("mq only appends messages: use outputMode('append')")
        return StreamWriter(self.parsed(), schema)
