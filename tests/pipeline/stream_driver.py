"""A streaming query's driver, run as its own process so a test can kill -9 it.

    python stream_driver.py ROOT QUEUE CHECKPOINT SINK_DIR (continuous|available-now) MAX_PER_BATCH

The sink is foreachBatch: each micro-batch's (id, body) rows go to SINK_DIR/{batch}-{uuid}.jsonl,
fsynced, so the test sees every delivery, including a batch Spark replays after a kill. run()
is the query alone, for a session the caller already has (the restart after a kill).
"""

import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_support import spark_conf  # noqa: E402

from mq.pipeline import session  # noqa: E402


def main() -> None:
    """Run the query until it ends (available-now) or is killed (continuous)."""
    root, queue, checkpoint, sink_dir, mode, per_batch = sys.argv[1:7]
    spark = session.build("mq-stream-driver", "local[2]", progress=False, conf=spark_conf())
    run(spark, root, queue, checkpoint, sink_dir, mode, int(per_batch))
    spark.stop()


def run(spark, root: str, queue: str, checkpoint: str, sink_dir: str, mode: str, per_batch: int,
        timeout: float | None = None) -> bool:
    """Start the query on spark and wait for its end; False (the query stopped) when it did not
    end within timeout seconds."""

    def deliver(df, batch_id):
        """The sink: write the batch's rows to a new file, fsynced."""
        rows = df.select("id", "body").collect()
        path = os.path.join(sink_dir, f"{batch_id}-{uuid.uuid4().hex}.jsonl")
        with open(path, "w") as f:
            for row in rows:
                f.write(json.dumps({"batch": batch_id, "id": row["id"], "body": row["body"].decode()}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        time.sleep(0.3)  # Widen the window between the sink's write and Spark's commit log.

    stream = (spark.readStream.format("mq").option("root", root).option("queue", queue)
              .option("maxMessagesPerBatch", per_batch).option("numPartitions", 2).load())
    writer = stream.writeStream.foreachBatch(deliver).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if mode == "available-now" else writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    print("started", flush=True)
    if timeout is None:
        query.awaitTermination()
    elif not query.awaitTermination(timeout):
        query.stop()
        return False
    print("finished", flush=True)
    return True


if __name__ == "__main__":
    main()
