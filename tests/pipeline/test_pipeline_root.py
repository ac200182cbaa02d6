"""The data source and mq-pipeline open an existing root only: a folder without FORMAT (the
empty mount point of a shared file system not mounted) is refused on the driver before any
task runs, by each task on its own node, and nothing is ever written into it."""

import os
import subprocess

import pytest
from pyspark.sql import functions as F

from mq.pipeline import reader, sink
from mq.pipeline.options import SourceOptions
from mq.pipeline.staging import Stager
from mq.store.root import RootMissing
from support import command, create_root
from test_pipeline_batch import bodies_of, read, spark_schema

pytestmark = pytest.mark.spark
OTHER_ID = "00000000-0000-7000-8000-000000000000"


def marked_rows(spark, marks, count: int = 3):
    """A DataFrame of `count` body rows whose every computed row first creates a file in
    `marks`: a file there means a task ran."""
    folder = str(marks)

    @F.udf("binary", useArrow=False)
    def body(n):
        with open(os.path.join(folder, f"row-{n}"), "w"):
            pass
        return b"row %d" % n

    return spark.range(count).select(body("id").alias("body"))


def test_a_read_and_a_write_on_a_folder_without_format_fail_before_any_task(spark, tmp_path):
    mount, missing, marks = tmp_path / "mnt", tmp_path / "missing", tmp_path / "marks"
    mount.mkdir()
    marks.mkdir()
    for path in (mount, missing):
        with pytest.raises(Exception, match=f"{path} is not an mq root \\(no FORMAT file\\)"):
            (marked_rows(spark, marks).write.format("mq").mode("append")
             .option("root", str(path)).option("queue", "q").save())
        with pytest.raises(Exception, match="is not an mq root .*mq --create-root"):
            read(spark, path, queue="q").collect()
    assert os.listdir(mount) == [] and not missing.exists()
    assert os.listdir(marks) == [], "a task ran"


def test_a_root_made_by_mq_create_root_is_written_and_read_and_root_id_checked(spark, tmp_path):
    root, marks = tmp_path / "root", tmp_path / "marks"
    marks.mkdir()
    made = create_root(root)
    assert made.returncode == 0, made.stderr
    root_id = made.stdout.strip()
    (marked_rows(spark, marks).write.format("mq").mode("append").option("root", str(root))
     .option("rootId", root_id).option("queue", "q").save())
    assert sorted(bodies_of(str(root), "q")) == [b"row 0", b"row 1", b"row 2"]
    assert read(spark, root, queue="q", rootId=root_id).count() == 3
    for name in os.listdir(marks):
        os.unlink(marks / name)
    with pytest.raises(Exception, match=f"another root \\(ID {root_id}, not {OTHER_ID}"):
        (marked_rows(spark, marks).write.format("mq").mode("append").option("root", str(root))
         .option("rootId", OTHER_ID).option("queue", "q").save())
    assert os.listdir(marks) == [] and len(bodies_of(str(root), "q")) == 3


def test_a_task_on_a_node_without_the_root_fails_and_writes_nothing(tmp_path):
    # The driver saw the root; this executor's node has only the empty mount point.
    mount = tmp_path / "mnt"
    mount.mkdir()
    options = SourceOptions.parse({"root": str(mount), "queue": "q"})
    with pytest.raises(RootMissing):
        sink.BatchWriter(options, spark_schema("body binary")).write(iter([]))
    with pytest.raises(RootMissing):
        Stager(options, "job")
    with pytest.raises(RootMissing):
        list(reader.SnapshotReader(options).read(reader.Shard(0, 1, ["q"])))
    assert os.listdir(mount) == []


def test_the_jobs_refuse_a_folder_without_format_before_spark_starts(tmp_path):
    mount, data = tmp_path / "mnt", tmp_path / "lines.txt"
    mount.mkdir()
    data.write_text("a\n")
    for job in (["load", "--queue", "q", "--input", str(data)],
                ["export", "--queue", "q", "--output", str(tmp_path / "out")]):
        done = subprocess.run([command("mq-pipeline"), job[0], "--root", str(mount), *job[1:]],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"mq-pipeline: {mount} is not an mq root"), done.stderr
        assert done.stderr.count("\n") == 1 and "mq --create-root" in done.stderr
    assert os.listdir(mount) == [] and not (tmp_path / "out").exists()
