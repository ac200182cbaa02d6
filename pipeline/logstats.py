"""mq-pipeline logstats: mq's JSON log lines to per-queue, per-minute request counts and latency."""

import datetime
import time

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

#: The fields of an "http.request" line (http/front.py, log_request) that the counts use.
LOG_SCHEMA = StructType([
    StructField("event", StringType()), StructField("timestamp", StringType()),
    StructField("method", StringType()), StructField("path", StringType()),
    StructField("status", IntegerType()), StructField("ms", DoubleType()),
    StructField("queue", StringType()),
])
#: The counted kinds of request, in the order the table and the chart show them.
KINDS = ("adds", "fetches", "acks", "errors")
MESSAGES = r"^/[^/]+/messages$"
ONE_MESSAGE = r"^/[^/]+/messages/[^/]+$"


def requests(spark, paths: list[str]):
    """The access-log lines of the given files or folders, with minute and queue resolved."""
    return resolved(spark.read.schema(LOG_SCHEMA).option("mode", "PERMISSIVE").json(paths))


def queued_requests(spark, root: str, queue: str):
    """The access-log lines shipped as messages of a queue (one line a message, as a log
    shipper adds them; docs/OPERATIONS.md), read without consuming them."""
    bodies = spark.read.format("mq").option("root", root).option("queue", queue).load()
    return resolved(bodies.select(F.from_json(F.col("body").cast("string"), LOG_SCHEMA)
                                  .alias("line")).select("line.*"))


def resolved(lines):
    """The http.request lines among lines, with minute and queue resolved."""
    lines = lines.where(F.col("event") == "http.request")
    queue = F.coalesce(F.col("queue"), F.regexp_extract("path", r"^/([^/_][^/]*)", 1))
    return (lines.withColumn("minute", F.date_trunc("minute", F.to_timestamp("timestamp")))
            .withColumn("queue", F.when(queue == "", F.lit("-")).otherwise(queue)))


def per_minute(reqs):
    """One row per queue and minute: counts of adds, fetches, acks (DELETE of a message), errors, latency."""
    is_ = lambda cond: F.sum(F.when(cond, 1).otherwise(0))  # noqa: E731
    return (reqs.groupBy("queue", "minute").agg(
        F.count(F.lit(1)).alias("requests"),
        is_((F.col("method") == "POST") & F.col("path").rlike(MESSAGES)).alias("adds"),
        is_((F.col("method") == "GET") & F.col("path").rlike(MESSAGES)).alias("fetches"),
        is_((F.col("method") == "DELETE") & F.col("path").rlike(ONE_MESSAGE)).alias("acks"),
        is_(F.col("status") >= 500).alias("errors"),
        is_((F.col("status") >= 400) & (F.col("status") < 500)).alias("client_errors"),
        F.percentile("ms", 0.5).alias("p50_ms"),
        F.percentile("ms", 0.99).alias("p99_ms"),
    ).orderBy("minute", "queue"))


def summary(reqs) -> list:
    """Per-queue totals over the whole log, with p50 and p99 over all its requests."""
    m = per_minute(reqs.withColumn("minute", F.lit(None).cast("timestamp")))
    return m.drop("minute").orderBy("queue").collect()


def table(rows) -> str:
    """The summary as an aligned text table."""
    head = ("queue", "requests", *KINDS, "client_errors", "p50_ms", "p99_ms")
    cells = [head] + [(r["queue"], *(str(r[k]) for k in head[1:-2]),
                       f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return "\n".join("  ".join(c[i].rjust(widths[i]) if i else c[i].ljust(widths[i])
                               for i in range(len(head))) for c in cells)


def chart(minutes, path: str) -> None:
    """Draw requests per second of each kind over time, all queues together, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # No display: draw to a file.
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    totals: dict = {}
    for r in minutes:
        slot = totals.setdefault(r["minute"], dict.fromkeys(KINDS, 0))
        for kind in KINDS:
            slot[kind] += r[kind]
    times = sorted(totals)
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    for kind in KINDS:
        ax.plot(times, [totals[t][kind] / 60 for t in times], marker="o", markersize=3, label=kind)
    ax.set_title("mq requests per second, by minute (all queues)")
    ax.set_xlabel("minute (UTC)")
    ax.set_ylabel("per second")
    ax.grid(True, alpha=0.3)
    ax.legend()
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    # Without this a log of one minute gets an axis spanning years.
    pad = datetime.timedelta(minutes=max(1, (times[-1] - times[0]).total_seconds() / 60 / 20))
    ax.set_xlim(times[0] - pad, times[-1] + pad)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(spark, paths: list[str] | None, output: str, chart_path: str | None = None,
        root: str | None = None, queue: str | None = None) -> dict:
    """Compute the per-minute table of the log files at paths (or the lines in queue of root),
    write it as Parquet, print-ready summary, draw the chart."""
    started = time.time()
    if paths:
        reqs = requests(spark, paths)
    elif root and queue:
        reqs = queued_requests(spark, root, queue)
    else:
        raise ValueError("logstats reads log files (paths) or a queue of a root")
    reqs = reqs.cache()
    lines = reqs.count()
    minutes = per_minute(reqs)
    minutes.write.mode("overwrite").parquet(output)
    collected = spark.read.parquet(output).collect()
    totals = summary(reqs)
    chart_path = chart_path or output.rstrip("/") + ".png"
    if collected:
        chart(collected, chart_path)
    reqs.unpersist()
    return {"read": lines, "written": len(collected), "output": output,
            "chart": chart_path if collected else None, "table": table(totals),
            "seconds": time.time() - started}
