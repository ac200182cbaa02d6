"""mq-pipeline export: queues to Parquet partitioned by queue and date; a snapshot, or a drain."""

import os
import time

from pyspark.sql import Observation
from pyspark.sql import functions as F


def source(spark, root: str, queue: str | None, queues: str | None, partitions: int, stream: bool = False,
           max_per_batch: int | None = None):
    """The mq data source over the chosen queues, as a batch or a streaming DataFrame."""
    reader = spark.readStream if stream else spark.read
    reader = reader.format("mq").option("root", root).option("numPartitions", partitions)
    reader = reader.option("queue", queue) if queue else reader.option("queues", queues)
    if max_per_batch:
        reader = reader.option("maxMessagesPerBatch", max_per_batch)
    return reader.load()


def with_date(df):
    """Add the partition column date: the UTC day the message was created."""
    return df.withColumn("date", F.date_format("created", "yyyy-MM-dd"))


def snapshot(spark, root, queue, queues, output, partitions=4, mode="errorifexists") -> dict:
    """Copy every message of the queues (ready, delayed, in flight) to Parquet; consume nothing."""
    started = time.time()
    observation = Observation("export")
    df = with_date(source(spark, root, queue, queues, partitions))
    df = df.observe(observation, F.count(F.lit(1)).alias("rows"),
                    F.coalesce(F.sum(F.length("body")), F.lit(0)).alias("bytes"))
    df.write.mode(mode).partitionBy("queue", "date").parquet(output)
    rows = observation.get["rows"]
    seconds = time.time() - started
    return {"read": rows, "written": rows, "bytes": observation.get["bytes"], "seconds": seconds,
            "output": output, "consumed": 0}


def drain(spark, root, queue, queues, output, checkpoint=None, partitions=4, max_per_batch=100_000) -> dict:
    """Consume the queues into Parquet: each message is removed only after its batch is in the output."""
    started = time.time()
    checkpoint = checkpoint or os.path.join(output, "_checkpoint")
    df = with_date(source(spark, root, queue, queues, partitions, stream=True, max_per_batch=max_per_batch))
    query = (df.writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).partitionBy("queue", "date")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    return {"read": rows, "written": rows, "seconds": time.time() - started, "output": output,
            "consumed": rows, "batches": len(query.recentProgress), "checkpoint": checkpoint}
