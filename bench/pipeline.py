#!/usr/bin/env python3
"""The Spark pipeline's speed: export and load of N 100-byte messages.

    .venv/bin/python bench/pipeline.py [--count 1000000] [--record]

Each figure is compared, in the same run and on the same machine, with its ceiling:

- export: `mq-pipeline export`'s job (the mq data source, snapshot, to Parquet partitioned by
  queue and date) against Spark's own `binaryFile` format reading the same files and writing
  them to Parquet too. Target: mq at least 1.5 times binaryFile.
- load: `mq-pipeline load`'s job (Parquet -> the mq data source; files staged and flushed once
  per task, published in the commit, flushed again: every message durable before the job
  ends) against the daemon's single-message HTTP add rate (`mq --workers 2`, POST of one
  100-byte message per request, keep-alive clients on 127.0.0.1). Target: at least 5 times.

Spark runs local[2], the page cache is warm for both readers (the files were just written),
and a small warm-up job runs first so that neither pays the session's first-job cost.
With --record the figures replace the "## Pipeline" section of bench/RESULTS.md.
"""

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from harness import Daemon, filesystem, loadavg, machine  # noqa: E402

from mq import store as fmt  # noqa: E402
from mq.ids import new_id  # noqa: E402

BODY = b"p" * 100
QUEUE = "bench"


def fill(root: str, count: int) -> float:
    """Put count ready messages in QUEUE with the save actor's write and rename; one flush at the end.

    No daemon runs on this root meanwhile (docs/FORMAT.md, the fast fill path).
    """
    store = fmt.Store(root)
    store.init()
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    for _ in range(count):
        message_id = new_id()
        store.write_new(QUEUE, message_id, fmt.encode_message(BODY, "text/plain", now_ms, message_id), None)
        store.states.deliver_new(QUEUE, message_id, False)
    store.flush({store.folder("new"), store.queue_dir(QUEUE)})
    return time.monotonic() - started


async def http_adds(port: int, clients: int, seconds: float) -> dict:
    """POST one 100-byte message per request from `clients` keep-alive connections for `seconds`."""
    request = (f"POST /{QUEUE}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
               f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY
    counts = {"ok": 0, "errors": 0}
    deadline = time.monotonic() + seconds

    async def client() -> None:
        """One keep-alive connection adding until the deadline."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.monotonic() < deadline:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                counts["ok" if status == 201 else "errors"] += 1
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    return {"rate": counts["ok"] / elapsed, "added": counts["ok"], "errors": counts["errors"],
            "seconds": elapsed}


def timed(what, job) -> tuple[float, object]:
    """(seconds, result) of one job."""
    started = time.monotonic()
    result = job()
    return time.monotonic() - started, result


def main(argv=None) -> int:
    """Run the benchmark; exit status 0 when both targets are met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="messages (default 1000000)")
    parser.add_argument("--partitions", type=int, default=4, help="read and write tasks (default 4)")
    parser.add_argument("--clients", type=int, default=64, help="HTTP clients for the add rate (default 64)")
    parser.add_argument("--http-seconds", type=float, default=10.0,
                        help="length of the HTTP run (default 10)")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one in /tmp)")
    parser.add_argument("--record", action="store_true", help="write the figures into bench/RESULTS.md")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from mq.pipeline import export, load, session

    work = tempfile.mkdtemp(prefix="mq-bench-pipeline-", dir=args.dir)
    say = lambda text: print(text, flush=True)  # noqa: E731
    try:
        say(f"scratch {work} ({filesystem(work)}); load average {loadavg()}")
        root = os.path.join(work, "root")
        seconds = fill(root, args.count)
        say(f"fill: {args.count} messages of {len(BODY)} bytes in {seconds:.1f} s (set-up, not measured)")

        spark = session.build("mq-bench-pipeline", "local[2]", progress=False,
                              conf={"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4",
                                    # binaryFile's best setting for small files: with the default
                                    # 4 MB per file, 1M files become ~30k tasks.
                                    "spark.sql.files.openCostInBytes": "1024"})
        warm = os.path.join(work, "warm")
        fill(warm, 2000)
        spark.read.format("binaryFile").load(fmt.Store(warm).queue_dir(QUEUE)).write.parquet(warm + "-bf")
        export.snapshot(spark, warm, QUEUE, None, warm + "-mq", args.partitions)
        load.run(spark, warm, "warm-load", warm + "-mq", "parquet")

        queue_dir = fmt.Store(root).queue_dir(QUEUE)
        bf_seconds, _ = timed("binaryFile", lambda: (
            spark.read.format("binaryFile").load(queue_dir)
            .select("path", "modificationTime", F.col("content").alias("body"))
            .write.parquet(os.path.join(work, "export-binaryfile"))))
        bf_rows = spark.read.parquet(os.path.join(work, "export-binaryfile")).count()
        say(f"export, Spark binaryFile -> Parquet: {bf_rows} files in {bf_seconds:.1f} s, "
            f"{bf_rows / bf_seconds:,.0f} msg/s")
        mq_seconds, out = timed("mq", lambda: export.snapshot(
            spark, root, QUEUE, None, os.path.join(work, "export-mq"), args.partitions))
        say(f"export, mq data source -> Parquet by queue and date: {out['written']} messages in "
            f"{mq_seconds:.1f} s, {out['written'] / mq_seconds:,.0f} msg/s")
        export_ratio = (out["written"] / mq_seconds) / (bf_rows / bf_seconds)
        say(f"export: {export_ratio:.2f} x binaryFile (target 1.5)")
        assert out["written"] == bf_rows == args.count, (out["written"], bf_rows)

        source = os.path.join(work, "load-input")
        spark.range(0, args.count, 1, args.partitions).select(
            F.expr(f"cast(rpad(cast(id as string), {len(BODY)}, 'x') as binary)").alias("body")
        ).write.parquet(source)
        target = os.path.join(work, "load-root")
        fmt.Store(target).init()
        load_seconds, report = timed("load", lambda: load.run(spark, target, "loaded", source, "parquet",
                                                               partitions=None))
        on_disk = len(os.listdir(fmt.Store(target).queue_dir("loaded")))
        load_rate = report["messages"] / load_seconds
        say(f"load, Parquet -> mq data source: {report['messages']} messages ({on_disk} files in the "
            f"queue) in {load_seconds:.1f} s, {load_rate:,.0f} msg/s (commit {report['commit_seconds']} s)")
        assert report["messages"] == on_disk == args.count
        spark.stop()

        http_root = os.path.join(work, "http-root")
        with Daemon(http_root, workers=2) as daemon:
            asyncio.run(http_adds(daemon.port, args.clients, 2.0))  # Warm-up.
            http = asyncio.run(http_adds(daemon.port, args.clients, args.http_seconds))
            command = daemon.command
        say(f"HTTP adds, {command}, {args.clients} clients: {http['added']} in {http['seconds']:.1f} s, "
            f"{http['rate']:,.0f} msg/s ({http['errors']} errors)")
        load_ratio = load_rate / http["rate"]
        say(f"load: {load_ratio:.1f} x the HTTP add rate (target 5)")

        figures = {
            "count": args.count, "bf_rate": bf_rows / bf_seconds, "bf_seconds": bf_seconds,
            "mq_rate": out["written"] / mq_seconds, "mq_seconds": mq_seconds, "export_ratio": export_ratio,
            "load_rate": load_rate, "load_seconds": load_seconds, "commit_seconds": report["commit_seconds"],
            "http_rate": http["rate"], "http_clients": args.clients, "load_ratio": load_ratio,
            "http_command": command, "partitions": args.partitions, "load": loadavg(),
        }
        if args.record:
            record(figures, " ".join(["bench/pipeline.py", *(argv if argv is not None else sys.argv[1:])]))
        met = export_ratio >= 1.5 and load_ratio >= 5
        say("targets met" if met else "targets NOT met")
        return 0 if met else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def record(f: dict, command: str) -> None:
    """Replace (or append) the "## Pipeline" section of bench/RESULTS.md; other sections stay."""
    m = machine()
    section = f"""## Pipeline

`.venv/bin/python {command}` (Spark local[2], {f['partitions']} tasks, page cache warm,
{m['nproc']} cores, {m['memory']}, kernel {m['kernel']}, load average at the end {f['load']}).

| job | messages | seconds | msg/s | ceiling in the same run | ratio | target |
| --- | ---: | ---: | ---: | --- | ---: | ---: |
| export (mq source -> Parquet by queue and date) | {f['count']:,} | {f['mq_seconds']:.1f} | {f['mq_rate']:,.0f} | Spark binaryFile -> Parquet: {f['bf_rate']:,.0f} msg/s ({f['bf_seconds']:.1f} s) | {f['export_ratio']:.2f} x | 1.5 x |
| load (Parquet -> mq sink, durable before commit) | {f['count']:,} | {f['load_seconds']:.1f} | {f['load_rate']:,.0f} | HTTP single-message adds, `{f['http_command']}`, {f['http_clients']} clients: {f['http_rate']:,.0f} msg/s | {f['load_ratio']:.1f} x | 5 x |

The load's commit (renaming every staged file into the queue, one flush) took {f['commit_seconds']} s of it.
"""
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    start = text.find("## Pipeline")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as out:
        out.write(text)


if __name__ == "__main__":
    sys.exit(main())
