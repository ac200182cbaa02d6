"""The data source's flushing calls leave no file descriptor open, however many run.

A long stream once failed with EMFILE: every flush opened the root for syncfs(2) through a
new Store whose descriptor was never closed. No Spark session: the calls run in-process,
each with a new Store, as the data source's writers, commits and stream reader make them.
"""

import os

import pyarrow as pa
import pytest

from mq import store as fmt
from mq.ids import new_id
from mq.pipeline.notify import tell_daemons
from mq.pipeline.options import SourceOptions
from mq.pipeline.publish import dedup_window
from mq.pipeline.staging import Stager
from mq.pipeline.stream import ClaimingStreamReader
from mq.store.publishing import publish_job

pytestmark = pytest.mark.spark

#: Rounds of every flushing call; a leak of one descriptor per call shows as hundreds.
ROUNDS = 300
#: Rounds run before counting, so that what is opened once per process (ZeroMQ's context,
#: lazily imported modules) is open already.
WARM_UP_ROUNDS = 3


def open_descriptors() -> int:
    """How many file descriptors this process has open now."""
    return len(os.listdir("/proc/self/fd"))


def flush_round(options: SourceOptions, reader: ClaimingStreamReader, seq: int) -> None:
    """Stage and finish a task, publish its job, claim its message and acknowledge it."""
    job = new_id()
    stager = Stager(options, job)
    stager.stage_batch(pa.RecordBatch.from_pydict({"body": [b"row %d" % seq]}))
    task = stager.finish()
    store = fmt.Store(options.root, options.sync)
    store.staging.mark_committing(job, [task.task])
    report = publish_job(store, store.staging.stage_folder(job), [task.task], dedup_window(store), tell_daemons)
    assert report["messages"] == 1
    claimed = reader.claim(reader.store(), 1)
    assert len(claimed) == 1
    store.streams.write_manifest(options.consumer, seq, claimed)
    assert reader.acknowledge_through(reader.store(), seq) == 1


def test_flushing_calls_leak_no_descriptor(tmp_path):
    root = str(tmp_path / "root")
    fmt.Store(root).init()
    options = SourceOptions.parse({"root": root, "queue": "fds"})
    reader = ClaimingStreamReader(options)
    for seq in range(1, WARM_UP_ROUNDS + 1):
        flush_round(options, reader, seq)
    before = open_descriptors()

    for seq in range(WARM_UP_ROUNDS + 1, WARM_UP_ROUNDS + ROUNDS + 1):
        flush_round(options, reader, seq)

    after = open_descriptors()
    assert after <= before, f"{after - before} descriptors leaked over {ROUNDS} rounds"
    assert fmt.Store(root).states.list_ready("fds") == []  # Every round's message went all the way.
