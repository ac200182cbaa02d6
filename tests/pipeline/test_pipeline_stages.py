"""A slow write job keeps its staged files while other jobs commit and the daemon's reaper runs.

Its tasks run through the data source's writer classes in-process (no Spark session): a task
that finished a day ago, one still writing, then the job's own commit.
"""

import os
import time

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from mq import store as fmt
from mq.pipeline import sink
from mq.pipeline.options import SourceOptions
from mq.pipeline.publish import Publisher
from mq.pipeline.staging import Stager
from mq.store import publishing
from support import poll_for

pytestmark = pytest.mark.spark

SCHEMA = StructType([StructField("body", BinaryType())])
#: An mtime older than the age at which a stage folder without a COMMIT marker is abandoned.
A_DAY_AGO = time.time() - publishing.ABANDONED_STAGE_SECONDS - 3600


def rows(*bodies) -> pa.RecordBatch:
    """One Arrow batch with a body column."""
    return pa.RecordBatch.from_pydict({"body": list(bodies)})


def set_mtime(when: float, *paths) -> None:
    """Set each path's atime and mtime."""
    for path in paths:
        os.utime(path, (when, when))


def staged(store: fmt.Store, job: str) -> dict:
    """{task: staged files} of a job; {} when its folder is gone."""
    folder = store.staging.stage_folder(job)
    if not os.path.isdir(folder):
        return {}
    return {t: len(os.listdir(os.path.join(folder, t))) for t in os.listdir(folder)}


def test_a_slow_job_survives_other_commits_and_the_reaper_and_publishes_every_row(start_mq, tmp_path):
    root = tmp_path / "root"
    store = fmt.Store(str(root))
    store.init()
    options = SourceOptions.parse({"root": str(root), "queue": "slow"})
    slow = sink.BatchWriter(options, SCHEMA)
    finished = slow.write(iter([rows(b"done 1", b"done 2")]))
    running = Stager(options, slow.job)
    running.stage_batch(rows(b"late 1"))
    # Both tasks started a day ago and the first one finished then; the second one is still
    # writing, and each file it creates bumps its own folder's mtime, not the job folder's.
    set_mtime(A_DAY_AGO, store.staging.stage_folder(slow.job, finished.task), running.folder,
              store.staging.stage_folder(slow.job))
    running.stage_batch(rows(b"late 2"))
    # An abandoned job beside it: its removal shows that the reaper has made a pass.
    dead = sink.BatchWriter(options, SCHEMA)
    dead_task = dead.write(iter([rows(b"never")]))
    set_mtime(A_DAY_AGO, store.staging.stage_folder(dead.job, dead_task.task), store.staging.stage_folder(dead.job))
    expected = {finished.task: 2, running.task: 2}

    other = sink.BatchWriter(SourceOptions.parse({"root": str(root), "queue": "other"}), SCHEMA)
    other.commit([other.write(iter([rows(b"other")]))])
    assert staged(store, slow.job) == expected, "another job's commit removed the slow job's files"
    assert staged(store, dead.job) == {dead_task.task: 1}  # Removing it is the reaper's alone.

    daemon = start_mq(root=root, workers=1, timeout=30, args=("--log-level=debug",))
    poll_for(lambda: not os.path.exists(store.staging.stage_folder(dead.job)), timeout=10,
             what="the reaper to remove the abandoned job")
    daemon.wait_for_events("reaper.stage_pass", removed=1)  # That pass looked at every folder.
    assert staged(store, slow.job) == expected, "the reaper removed the slow job's files"

    report = Publisher(options, slow.job).commit([finished, running.finish()])
    assert report["messages"] == 4
    served = []

    def all_served():
        """Fetch what is ready; true once the job's four rows came."""
        while (resp := daemon.fetch("slow")).status == 200:
            served.append(resp.body)
        return len(served) >= 4

    poll_for(all_served, timeout=30, what="the daemon to serve the slow job's rows")
    assert sorted(served) == [b"done 1", b"done 2", b"late 1", b"late 2"]
    assert daemon.fetch("slow").status == 204 and not os.listdir(store.stage_dir())
