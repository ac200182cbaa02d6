"""The mq data source's batch read and write against a real root, with the real daemon running."""

import os
import threading
import time

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from mq import store as fmt
from mq.pipeline import sink
from mq.pipeline.options import SourceOptions
from mq.store import publishing
from mq.store.listing import list_entries, read_entry
from mq.store.staging import committing_tasks
from support import body_is_whole, checked_body, poll_for

pytestmark = pytest.mark.spark


def read(spark, root, **options):
    """A batch read of the root with the given options."""
    reader = spark.read.format("mq").option("root", str(root))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_snapshot_reads_every_state_and_consumes_nothing(spark, start_mq):
    daemon = start_mq(workers=2, timeout=60)
    ready = [daemon.add("snap", b"ready %d" % i, "text/plain") for i in range(5)]
    delayed = daemon.request("POST", "/snap/messages?delay=300", b"later").json()["id"]
    fetched = daemon.fetch("snap")
    assert fetched.status == 200 and fetched.header("X-Message-Id") == ready[0]

    rows = {r["id"]: r for r in read(spark, daemon.root, queue="snap").collect()}

    assert set(rows) == set(ready) | {delayed}
    assert rows[ready[0]]["state"] == "in_flight" and rows[ready[0]]["attempts"] == 1
    assert rows[ready[0]]["due"] is not None and rows[ready[0]]["body"] == b"ready 0"
    assert rows[delayed]["state"] == "delayed" and rows[delayed]["attempts"] == 0
    assert rows[delayed]["due"].timestamp() > time.time() + 200
    for message_id in ready[1:]:
        row = rows[message_id]
        assert (row["state"], row["due"], row["attempts"], row["content_type"]) == ("ready", None, 0, "text/plain")
        assert row["queue"] == "snap" and row["created"] is not None
    # Nothing was consumed: the daemon still hands out the other four, in order.
    assert [daemon.fetch("snap").header("X-Message-Id") for _ in range(4)] == ready[1:]


def test_read_splits_by_id_and_filters_states_and_queues(spark, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    for queue in ("a1", "a2", "b1"):
        for i in range(30):
            add_directly(store, queue, b"%s-%d" % (queue.encode(), i))
    df = read(spark, store.root, queues="a.*", numPartitions=3)
    assert df.rdd.getNumPartitions() == 3
    per_partition = df.rdd.glom().map(len).collect()
    assert sum(per_partition) == 60 and min(per_partition) > 0
    assert read(spark, store.root, queues="a.*", states="delayed,in_flight").count() == 0


def add_directly(store: fmt.Store, queue: str, body: bytes) -> str:
    """Put a ready message in a root without a daemon (the save actor's write and rename)."""
    from mq.ids import new_id

    message_id = new_id()
    store.write_new(queue, message_id, fmt.encode_message(body, "text/plain", int(time.time() * 1000),
                                                          message_id), None)
    store.states.deliver_new(queue, message_id, False)
    return message_id


def test_read_while_the_daemon_moves_messages_never_fails_nor_half_reads(spark, start_mq):
    daemon = start_mq(workers=2, timeout=60)
    for i in range(300):
        daemon.add("busy", checked_body(i, 200))
    stop = threading.Event()
    moved = []

    def consume():
        """Fetch every message; delete every other one (the rest stay in flight)."""
        while not stop.is_set():
            resp = daemon.fetch("busy")
            if resp.status != 200:
                break
            moved.append(resp.header("X-Message-Id"))
            if len(moved) % 2:
                daemon.delete("busy", moved[-1])

    worker = threading.Thread(target=consume)
    worker.start()
    try:
        seen = 0
        while worker.is_alive() and seen < 8:
            rows = read(spark, daemon.root, queue="busy", numPartitions=2).select("id", "body").collect()
            assert all(body_is_whole(r["body"]) for r in rows)
            assert len({r["id"] for r in rows}) == len(rows)  # No message twice.
            seen += 1
    finally:
        stop.set()
        worker.join()
    assert len(moved) > 0 and seen > 0


def test_written_messages_are_served_by_the_running_daemon_within_2s(spark, start_mq):
    daemon = start_mq(workers=2, timeout=60)
    # The fetch actor's index for the queue is built and stays non-empty (an HTTP add lands
    # after the write): such an index is never re-listed, so the write's notification to the
    # daemon is what puts the new messages in it, in id order, ahead of the younger add.
    first = daemon.add("load", b"before")
    daemon.add("load", b"before 2")
    assert daemon.fetch("load").header("X-Message-Id") == first
    rows = [(b"\x00bin %d" % i, "application/x-test") for i in range(5)]
    df = spark.createDataFrame(rows, "body binary, content_type string")

    df.write.format("mq").option("root", str(daemon.root)).option("queue", "load").mode("append").save()
    written_at = time.monotonic()
    daemon.add("load", b"after")

    bodies = [daemon.fetch("load").body]
    got = poll_for(lambda: (r := daemon.fetch("load")).status == 200 and r, timeout=2)
    bodies.append(got.body)
    assert got.header("Content-Type") == "application/x-test"
    while (resp := daemon.fetch("load")).status == 200:
        bodies.append(resp.body)
    assert time.monotonic() - written_at < 2.0
    # Two tasks wrote the five rows side by side: their ids interleave by write time.
    assert bodies[0] == b"before 2" and bodies[-1] == b"after"
    assert sorted(bodies[1:-1]) == [r[0] for r in rows]
    assert not os.listdir(os.path.join(daemon.root, "stage"))


def test_a_driver_no_daemon_hears_is_served_within_2s_through_notice_files(start_mq):
    # notify=false: no ZeroMQ notification, as from a driver on another host. The queue's
    # index stays non-empty, so only the notice file can bring the new messages into it.
    # --log-level=debug: the fetch actor logs "fetch.noticed" when a notice brings messages in.
    daemon = start_mq(workers=2, timeout=60, args=("--log-level=debug",))
    options = SourceOptions.parse({"root": str(daemon.root), "queue": "far", "notify": "false"})
    writer = sink.BatchWriter(options, spark_schema("body binary"))
    staged = writer.write(iter(Rows.of(b"far 1", b"far 2")))  # Older ids than the adds below.
    daemon.add("far", b"near 1")
    daemon.add("far", b"near 2")
    assert daemon.fetch("far").body == b"near 1"  # The index is built and holds "near 2".
    assert daemon.events("fetch.noticed") == [], "noticed before the write was committed"

    writer.commit([staged])
    committed_at = time.monotonic()
    # A fetch now would take "near 2", the only message the index knows, so wait for the fetch
    # actor to read the notice (every 0.5 s) and list the queue: within the 2 s bound.
    noticed = daemon.wait_for_events("fetch.noticed", timeout=2.0, queue="far")
    took = time.monotonic() - committed_at
    assert took < 2.0, f"the notice was read {took:.2f} s after the commit"
    assert [line["ready"] for line in noticed] == [3], "far 1, far 2 and near 2, in one listing"
    # Served in id order: the noticed messages went into the index ahead of "near 2".
    bodies = [daemon.fetch("far").body for _ in range(3)]
    assert bodies == [b"far 1", b"far 2", b"near 2"]


def test_delayed_rows_from_a_driver_no_daemon_hears_are_moved_when_due(start_mq):
    daemon = start_mq(workers=2, timeout=60)
    daemon.add("later", b"index")  # The queue exists; nothing else.
    daemon.delete("later", daemon.fetch("later").header("X-Message-Id"))
    options = SourceOptions.parse({"root": str(daemon.root), "queue": "later", "notify": "false"})
    import pyarrow as pa

    writer = sink.BatchWriter(options, spark_schema("body binary, delay double"))
    batch = pa.RecordBatch.from_pydict({"body": [b"soon"], "delay": [1.0]})
    writer.commit([writer.write(iter([batch]))])
    due = time.monotonic() + 1.0
    assert daemon.fetch("later").status == 204
    got = poll_for(lambda: (r := daemon.fetch("later")).status == 200 and r, timeout=4)
    assert got.body == b"soon" and time.monotonic() - due < 2.0


def test_write_routes_rows_delays_and_string_bodies(spark, tmp_path):
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    df = spark.createDataFrame(
        [("one", "r1", None), ("two", "r2", None), ("three", "r1", 600.0)],
        "body string, queue string, delay double")
    df.write.format("mq").option("root", root).mode("append").save()
    rows = {r["body"]: r for r in read(spark, root, queues="r.").collect()}
    assert rows[b"one"]["queue"] == "r1" and rows[b"one"]["state"] == "ready"
    assert rows[b"one"]["content_type"] == "text/plain; charset=utf-8"
    assert rows[b"two"]["queue"] == "r2"
    assert rows[b"three"]["state"] == "delayed" and rows[b"three"]["due"].timestamp() > time.time() + 500


def test_dedup_id_drops_a_row_whose_key_the_daemon_already_stored(spark, start_mq):
    daemon = start_mq(workers=2, timeout=60)
    first = daemon.request("POST", "/dd/messages?dedup_id=k1", b"by http")
    assert first.status == 201
    df = spark.createDataFrame([("k1", b"dup"), ("k2", b"new"), ("k2", b"dup in job")], "dedup_id string, body binary")
    df.write.format("mq").option("root", str(daemon.root)).option("queue", "dd").mode("append").save()
    bodies = sorted(r["body"] for r in read(spark, daemon.root, queue="dd").collect())
    assert bodies in ([b"by http", b"new"], [b"by http", b"dup in job"])
    again = daemon.request("POST", "/dd/messages?dedup_id=k2", b"late")
    assert again.status == 200 and again.header("X-Duplicate") == "true"


def test_a_failed_job_leaves_nothing_visible(spark, start_mq):
    daemon = start_mq(workers=2, timeout=60)

    @F.udf(BinaryType(), useArrow=False)
    def body_or_fail(n):
        """A body, except for row 150, where the task raises."""
        if n == 150:
            raise RuntimeError("task fails on purpose")
        return b"body %d" % n

    # The written column depends on the failing UDF, so Spark cannot optimise it away.
    df = spark.range(0, 200, 1, 4).select(body_or_fail("id").alias("body"))
    with pytest.raises(Exception, match="task fails on purpose"):
        df.write.format("mq").option("root", str(daemon.root)).option("queue", "fail").mode("append").save()

    assert not os.path.exists(os.path.join(daemon.root, "queues", "fail"))
    assert read(spark, daemon.root, queues="fail").count() == 0
    assert daemon.fetch("fail").status == 404
    # abort() removed the job's stage folder; a task Spark was still cancelling may have
    # staged files after that. Without a COMMIT marker they are never published, and the
    # reaper's sweep of abandoned stages removes them.
    store = fmt.Store(str(daemon.root))
    assert all(committing_tasks(folder) is None for _, folder, _ in store.staging.list_stages())
    publishing.sweep_abandoned_stages(store, min_age_seconds=0)
    assert not os.listdir(os.path.join(daemon.root, "stage"))
    assert read(spark, daemon.root, queues="fail").count() == 0


def test_overwrite_and_a_missing_body_column_are_refused(spark, tmp_path):
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    df = spark.createDataFrame([("x",)], "text string")
    with pytest.raises(Exception, match="needs a column 'body'"):
        df.write.format("mq").option("root", root).option("queue", "q").mode("append").save()
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="only appends"):
        df.write.format("mq").option("root", root).option("queue", "q").mode("overwrite").save()
    with pytest.raises(Exception, match="option root is required"):
        spark.read.format("mq").option("queue", "q").load().collect()
    with pytest.raises(Exception, match="is not an mq root"):
        read(spark, tmp_path / "nothing", queue="q").collect()
    other = tmp_path / "v2"
    other.mkdir()
    (other / "FORMAT").write_text("mq-format 2\n")
    with pytest.raises(Exception, match="unsupported format"):
        read(spark, other, queue="q").collect()


class Rows:
    """Arrow batches for driving the writer's tasks directly."""

    @staticmethod
    def of(*bodies):
        """One Arrow batch with a body column."""
        import pyarrow as pa

        return [pa.RecordBatch.from_pydict({"body": [b for b in bodies]})]


def test_a_retried_task_is_published_once(tmp_path):
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    options = SourceOptions.parse({"root": root, "queue": "retry"})
    writer = sink.BatchWriter(options, spark_schema("body binary"))
    # Two attempts of the same partition both stage its rows; Spark commits one of them.
    first = writer.write(iter(Rows.of(b"a", b"b")))
    second = writer.write(iter(Rows.of(b"a", b"b")))
    assert first.task != second.task
    writer.commit([second])
    assert sorted(body for body in bodies_of(root, "retry")) == [b"a", b"b"]
    assert not os.path.exists(fmt.Store(root).staging.stage_folder(writer.job))


def test_a_commit_killed_midway_is_finished_by_the_next_write_once_its_marker_is_quiet(tmp_path):
    root = str(tmp_path / "root")
    store = fmt.Store(root)
    store.init()
    options = SourceOptions.parse({"root": root, "queue": "roll"})
    killed = sink.BatchWriter(options, spark_schema("body binary"))
    task = killed.write(iter(Rows.of(b"1", b"2", b"3")))
    # The driver decided to commit, published one file, then died.
    store.staging.mark_committing(killed.job, [task.task])
    folder = store.staging.stage_folder(killed.job, task.task)
    store.staging.publish_staged(folder, sorted(os.listdir(folder))[0])
    assert len(bodies_of(root, "roll")) == 1

    # A fresh marker may be a live driver's, still publishing: another commit leaves it.
    later = sink.BatchWriter(options, spark_schema("body binary"))
    later.commit([later.write(iter(Rows.of(b"4")))])
    assert len(bodies_of(root, "roll")) == 2 and os.path.isdir(folder)

    quiet = time.time() - publishing.COMMIT_GRACE_SECONDS - 1
    os.utime(os.path.join(store.staging.stage_folder(killed.job), "COMMIT"), (quiet, quiet))
    last = sink.BatchWriter(options, spark_schema("body binary"))
    last.commit([last.write(iter(Rows.of(b"5")))])

    assert sorted(bodies_of(root, "roll")) == [b"1", b"2", b"3", b"4", b"5"]
    assert not os.listdir(os.path.join(root, "stage"))


def test_an_abandoned_stage_is_never_published_nor_removed_by_commits_and_swept_when_old(tmp_path):
    root = str(tmp_path / "root")
    store = fmt.Store(root)
    store.init()
    options = SourceOptions.parse({"root": root, "queue": "gone"})
    dead = sink.BatchWriter(options, spark_schema("body binary"))
    task = dead.write(iter(Rows.of(b"never")))
    assert publishing.sweep_abandoned_stages(store) == []  # Young: may be a job still running.
    old = time.time() - publishing.ABANDONED_STAGE_SECONDS - 60
    for path in (store.staging.stage_folder(dead.job, task.task), store.staging.stage_folder(dead.job)):
        os.utime(path, (old, old))
    other = sink.BatchWriter(options, spark_schema("body binary"))
    other.commit([other.write(iter(Rows.of(b"kept")))])
    assert os.listdir(os.path.join(root, "stage")) == [dead.job]  # A commit removes no other job.

    assert publishing.sweep_abandoned_stages(store) == [dead.job]
    assert not os.listdir(os.path.join(root, "stage")) and bodies_of(root, "gone") == [b"kept"]


def spark_schema(ddl: str):
    """A StructType from "name type, ..." with binary or string columns (no session needed)."""
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    kinds = {"binary": BinaryType(), "string": StringType(), "double": DoubleType()}
    return StructType([StructField(*column.split()[:1], kinds[column.split()[1]])
                       for column in ddl.split(",")])


def bodies_of(root: str, queue: str) -> list[bytes]:
    """Bodies of a queue's ready messages, read with the store."""
    store = fmt.Store(root)
    found = [read_entry(e) for e in list_entries(store, [queue])]
    return [m.body for m, _ in filter(None, found)]


def test_a_commit_of_many_tasks_into_new_queues_publishes_every_message(tmp_path):
    # The commit renames on several threads; all of them find the queue missing at first.
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    for job in range(20):
        options = SourceOptions.parse({"root": root, "queue": f"new{job}"})
        writer = sink.BatchWriter(options, spark_schema("body binary"))
        tasks = [writer.write(iter(Rows.of(*(b"%d-%d" % (t, i) for i in range(10))))) for t in range(6)]
        writer.commit(tasks)
        assert len(bodies_of(root, f"new{job}")) == 60, job


def test_a_read_written_back_names_its_queue_once_and_keeps_a_delay_only_when_asked(spark, tmp_path):
    from mq.local import LocalClient

    root = str(tmp_path / "root")
    with LocalClient(root, create_root=True) as local:
        local.put("orders", b"ready now")
        local.put("orders.eu", b"in an hour", delay=3600)
    store = fmt.Store(root)

    def queue_files(queue):
        return sorted(os.listdir(store.queue_dir(queue))) if os.path.isdir(store.queue_dir(queue)) else []

    def delayed(queue):
        return {name: os.stat(os.path.join(store.folder("delay"), name)).st_mtime
                for name in os.listdir(store.folder("delay")) if name.startswith(queue + ":")}

    df = read(spark, root, queues="orders.*", numPartitions=1)
    # The read's queue column and option queue both name a queue: refused on the driver, nothing added.
    with pytest.raises(Exception, match="give option queue or a queue column, not both"):
        df.write.format("mq").option("root", root).option("queue", "replay").mode("append").save()
    assert "replay" not in os.listdir(os.path.join(root, "queues")) and not delayed("replay")
    assert len(queue_files("orders")) == 1 and len(delayed("orders.eu")) == 1

    # A write reads no `due`: a delayed message's copy is ready at once, and `at` from `due`
    # keeps its delay (one job for both; the option's own path is docs/PIPELINE.md's example,
    # which tests/project/test_doc_examples.py runs).
    replay = df.withColumn("queue", F.lit("replay")).withColumn("at", F.lit(None).cast("timestamp"))
    kept = (df.withColumn("queue", F.lit("kept"))
            .withColumn("at", F.when(F.col("state") == "delayed", F.col("due"))))
    replay.unionByName(kept).write.format("mq").option("root", root).mode("append").save()
    assert len(queue_files("replay")) == 2 and not delayed("replay")
    assert len(queue_files("kept")) == 1
    [source_due] = delayed("orders.eu").values()
    [kept_due] = delayed("kept").values()
    assert abs(kept_due - source_due) < 0.001
    assert len(queue_files("orders")) == 1 and len(delayed("orders.eu")) == 1
