#!/usr/bin/env python3
"""How soon a running daemon serves what a Spark job wrote when no notification reaches it
(the documented bound: 2 s at most), with a deep queue.

    .venv/bin/python bench/notice_latency.py [--depth 1000000] [--jobs 3] [--rows 10]

A driver on another host cannot reach the daemon's ZeroMQ sockets; the commit then only posts
the notice file `notices/ready:{queue}`, and the fetch actor finds the new messages by
re-listing the queue's folder when it reads a new token (every 0.5 s). The re-listing is what
grows with the queue's depth, so this fills the queue first.

1. Stage --jobs write jobs of --rows rows each with the data source's own writer
   (`mq.pipeline.sink.BatchWriter`, `notify=false`, no Spark session needed): their ids are
   older than everything filled after them.
2. Fill the queue to --depth with the fast fill path (bench/depth.py, set-up only).
3. Start a daemon (`mq --workers 2`), fetch once so that the queue's index is built.
4. For each job: commit it (publish: renames, flush, notice), then fetch until a body of that
   job comes back (its older ids go to the head of the index once noticed) and print the time
   from the end of the commit to that answer. Fetched messages are not deleted.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa
from harness import Client, Daemon, code_under_test, loadavg, machine_line
from pyspark.sql.types import BinaryType, StructField, StructType

from mq.ids import new_id
from mq.pipeline import sink
from mq.pipeline.options import SourceOptions
from mq.store import Store, encode_message

QUEUE = "deep"


def stage_jobs(root: str, jobs: int, rows: int) -> list[tuple[sink.BatchWriter, object, bytes]]:
    """Stage each job's rows (one task each); return (writer, staged task, body prefix)."""
    options = SourceOptions.parse({"root": root, "queue": QUEUE, "notify": "false"})
    schema = StructType([StructField("body", BinaryType())])
    staged = []
    for job in range(jobs):
        prefix = b"job %d " % job
        writer = sink.BatchWriter(options, schema)
        batch = pa.RecordBatch.from_pydict({"body": [prefix + b"%d" % i for i in range(rows)]})
        staged.append((writer, writer.write(iter([batch])), prefix))
    return staged


def fill(store: Store, depth: int) -> float:
    """The fast fill path (as bench/depth.py): write and deliver, one flush at the end."""
    started = time.monotonic()
    for _ in range(depth):
        now_ms = int(time.time() * 1000)
        message_id = new_id(now_ms)
        store.write_new(QUEUE, message_id, encode_message(b"f" * 100, "text/plain", now_ms), None)
        store.states.deliver_new(QUEUE, message_id, False)
    store.flush_data()
    return time.monotonic() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=1_000_000,
                        help="messages in the queue (default 1000000)")
    parser.add_argument("--jobs", type=int, default=3,
                        help="write jobs to commit, one after another (default 3)")
    parser.add_argument("--rows", type=int, default=10, help="rows per job (default 10)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="folder for the temporary root")
    args = parser.parse_args(argv)

    print(f"machine: {machine_line(args.tmp)}; load {loadavg()}", flush=True)
    print(f"mq: {code_under_test()}", flush=True)
    base = tempfile.mkdtemp(prefix="mq-bench-notice-", dir=args.tmp)
    root = os.path.join(base, "root")
    store = Store(root)
    store.init()
    store.queues.create_queue(QUEUE)
    results = []
    try:
        staged = stage_jobs(root, args.jobs, args.rows)
        print(f"fill: {args.depth:,} messages in {fill(store, args.depth):.0f} s", flush=True)
        with Daemon(root, workers=2, extra=["--no-access-log"]) as daemon:
            client = Client(daemon.port)
            started = time.monotonic()
            status, _, _ = client.request("GET", f"/{QUEUE}/messages")
            print(f"daemon: {daemon.command}; first fetch (index of {args.depth:,}) "
                  f"{time.monotonic() - started:.2f} s", flush=True)
            assert status == 200, status
            for writer, task, prefix in staged:
                time.sleep(1.0)  # Let a notice check pass, so that each job starts afresh.
                commit_started = time.monotonic()
                writer.commit([task])
                committed = time.monotonic()
                fetches = 0
                while True:
                    status, _, body = client.request("GET", f"/{QUEUE}/messages")
                    fetches += 1
                    if status == 200 and body.startswith(prefix):
                        break
                served = time.monotonic() - committed
                results.append(served)
                print(f"  {prefix.decode().strip()}: commit {committed - commit_started:.2f} s, "
                      f"served {served:.2f} s after it ({fetches} fetches)", flush=True)
            client.close()
    finally:
        cleaning = time.monotonic()
        shutil.rmtree(base, ignore_errors=True)
        print(f"removed {base} in {time.monotonic() - cleaning:.0f} s; load {loadavg()}")
    worst = max(results)
    print(f"\nRESULT depth {args.depth:,}: served {', '.join(f'{r:.2f}' for r in results)} s after "
          f"the commit; worst {worst:.2f} s: bound 2 s {'MET' if worst <= 2.0 else 'MISSED'}")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
