"""Streaming read (claim, sink commit, acknowledge) and streaming write, with a real Spark."""

import glob
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict

import pytest

import stream_driver
from mq import store as fmt
from support import poll_for
from test_pipeline_batch import add_directly

pytestmark = pytest.mark.spark
HERE = os.path.dirname(os.path.abspath(__file__))


def leftovers(store: fmt.Store, queue: str) -> dict:
    """Whatever of a queue is still ready, in flight, or listed in a manifest."""
    return {"ready": store.states.list_ready(queue),
            "delay": [n for n in os.listdir(store.folder("delay")) if n.startswith(queue + ":")],
            "manifests": store.streams.list_manifests("spark")}


def test_stream_consumes_in_capped_batches_and_nothing_lingers(spark, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    ids = {add_directly(store, "st", b"m%d" % i) for i in range(45)}
    add_directly(store, "other", b"not this queue")
    query = (spark.readStream.format("mq").option("root", store.root).option("queue", "st")
             .option("maxMessagesPerBatch", 10).load()
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(90)

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 10, 10, 5]
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert {r["id"] for r in out} == ids and len(out) == 45
    assert all(r["state"] == "in_flight" and r["attempts"] == 1 for r in out)
    # The last batch was acknowledged too (Spark never calls commit() for it).
    assert leftovers(store, "st") == {"ready": [], "delay": [], "manifests": []}
    assert len(store.states.list_ready("other")) == 1


def run_driver(root, queue, checkpoint, sink, mode, per_batch=25) -> subprocess.Popen:
    """Start the stream driver in its own process group (its JVM and Python workers with it)."""
    log = open(os.path.join(os.path.dirname(sink), f"driver-{mode}.log"), "ab")
    return subprocess.Popen([sys.executable, os.path.join(HERE, "stream_driver.py"), root, queue,
                             checkpoint, sink, mode, str(per_batch)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def deliveries(sink: str) -> list[dict]:
    """Every (batch, id, body) the sink received, over both runs."""
    found = []
    for path in sorted(glob.glob(os.path.join(sink, "*.jsonl"))):
        with open(path) as f:
            found.extend(json.loads(line) for line in f if line.strip())
    return found


@pytest.mark.timeout(150)
def test_stream_driver_killed_9_restarts_from_checkpoint_and_loses_nothing(spark, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    added = {add_directly(store, "kq", b"k%d" % i): b"k%d" % i for i in range(400)}
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    os.makedirs(sink)

    first = run_driver(store.root, "kq", checkpoint, sink, "continuous")
    try:
        poll_for(lambda: len(glob.glob(os.path.join(sink, "*.jsonl"))) >= 3, timeout=90,
                 interval=0.05, what="three micro-batches in the sink")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    before = deliveries(sink)
    assert 0 < len({d["id"] for d in before}) < len(added), "the kill must land mid-stream"

    # Restarted in another process, this one's session (a JVM start less than a driver of its
    # own); bigger batches for the rest: the replayed batch keeps its manifest's size.
    assert stream_driver.run(spark, store.root, "kq", checkpoint, sink, "available-now", 200, timeout=100)

    got = deliveries(sink)
    assert {d["id"] for d in got} == set(added)  # None lost.
    assert all(added[d["id"]] == d["body"].encode() for d in got)
    # Duplicates: a message the sink received more than once. Each must be explained by a
    # replay: the batch that was in flight at the kill (in the sink, not yet in Spark's
    # commit log) is re-run from its manifest with the same batch number after the restart.
    batches_of = defaultdict(list)
    for d in got:
        batches_of[d["id"]].append(d["batch"])
    duplicated = {i: b for i, b in batches_of.items() if len(b) > 1}
    replayed = {b[0] for b in duplicated.values()}
    assert all(len(set(b)) == 1 for b in duplicated.values()), duplicated
    assert len(replayed) <= 1, f"only the batch in flight at the kill may be replayed: {replayed}"
    print(f"\n{len(duplicated)} duplicates of {len(added)}, all from replayed batch(es) {sorted(replayed)}")
    assert leftovers(store, "kq") == {"ready": [], "delay": [], "manifests": []}


def test_stream_write_publishes_each_micro_batch_whole(spark, tmp_path):
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for n in range(3):
        (incoming / f"part{n}.txt").write_text("".join(f"line {n}-{i}\n" for i in range(20)))
    query = (spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(incoming))
             .withColumnRenamed("value", "body")
             .writeStream.format("mq").option("root", root).option("queue", "sw")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(90)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [20, 20, 20]
    rows = spark.read.format("mq").option("root", root).option("queue", "sw").load().collect()
    assert sorted(r["body"].decode() for r in rows) == sorted(
        f"line {n}-{i}" for n in range(3) for i in range(20))
    assert not os.listdir(os.path.join(root, "stage"))
