"""mq-pipeline load: Parquet, JSON lines, text lines or a folder of files into a queue, durably."""

import os
import tempfile
import time

import orjson
from pyspark.sql import functions as F

FORMATS = ("parquet", "json", "text", "files")
#: File name endings that choose a format when --format is auto.
ENDINGS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json",
           ".txt": "text", ".log": "text"}


def guess_format(path: str) -> str:
    """The input format for --format auto: by ending, a folder of Parquet files, or files."""
    ending = os.path.splitext(path.rstrip("/"))[1].lower()
    if ending in ENDINGS:
        return ENDINGS[ending]
    if os.path.isdir(path):
        names = [n for _, _, files in os.walk(path) for n in files]
        if names and all(n.endswith(".parquet") or n.startswith(("_", ".")) for n in names):
            return "parquet"
    return "files"


def rows(spark, path: str, kind: str, content_type: str | None):
    """The input as a DataFrame with a body column (and any of queue, delay, at, dedup_id, content_type)."""
    if kind == "parquet":
        return spark.read.parquet(path)
    if kind == "json":
        records = spark.read.json(path)
        if "body" in records.columns:
            return records
        # Lines without a body field: each whole line is one message.
        return spark.read.text(path).select(F.col("value").alias("body"),
                                            F.lit(content_type or "application/json").alias("content_type"))
    if kind == "text":
        return spark.read.text(path).select(F.col("value").alias("body"))
    return (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(path)
            .select(F.col("content").alias("body")))


def run(spark, root: str, queue: str, path: str, kind: str = "auto", content_type: str | None = None,
        sync: str = "fs", partitions: int | None = None) -> dict:
    """Write every row as a message; the job commits only once every message is durable."""
    started = time.time()
    kind = guess_format(path) if kind == "auto" else kind
    df = rows(spark, path, kind, content_type)
    # Everything goes to the named queue, also rows of an export (which carry their old queue).
    df = df.drop("queue")
    if partitions:
        df = df.repartition(partitions)
    fd, report_path = tempfile.mkstemp(prefix="mq-load-", suffix=".json")
    os.close(fd)
    try:
        writer = (df.write.format("mq").mode("append").option("root", root).option("queue", queue)
                  .option("sync", sync).option("reportFile", report_path))
        if content_type:
            writer = writer.option("contentType", content_type)
        writer.save()
        with open(report_path, "rb") as f:
            report = orjson.loads(f.read())
    finally:
        os.unlink(report_path)
    report.update(format=kind, input=path, seconds=time.time() - started)
    return report
