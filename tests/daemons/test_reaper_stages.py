"""Spark stage folders left in a root: the daemon's reaper finishes or removes them, no Spark needed.

A job whose driver died after its COMMIT marker is rolled forward once the marker has been
quiet for COMMIT_GRACE_SECONDS; a folder without a marker is removed only when the newest
mtime of its job folder and task folders is ABANDONED_STAGE_SECONDS old (docs/PIPELINE.md).
The stage folders are made with the store's own functions, as a write task and a commit do.
"""

import os
import threading
import time

import pytest

from mq.ids import new_id
from mq.store import Store, encode_message
from mq.store import publishing
from mq.store.staging import staged_name
from support import poll_for

#: An mtime older than the abandoned-stage age, and one older than the commit grace.
A_DAY_AGO = time.time() - publishing.ABANDONED_STAGE_SECONDS - 3600
QUIET = time.time() - publishing.COMMIT_GRACE_SECONDS - 5


def new_root(path) -> Store:
    """A fresh root."""
    store = Store(str(path))
    store.init()
    return store


def stage_task(store: Store, job: str, queue: str, bodies, keys=None) -> str:
    """Stage one task's messages as a write task does (one flush at its end); return the task."""
    task = new_id()
    folder = store.staging.stage_folder(job, task)
    os.makedirs(folder)
    for body, key in zip(bodies, keys or [None] * len(bodies)):
        message_id = new_id()
        data = encode_message(body, "text/plain", int(time.time() * 1000), message_id, key or "")
        store.staging.write_staged(folder, staged_name(queue, message_id, False, bool(key)), data, None)
    store.flush({folder, os.path.dirname(folder)})
    return task


def set_mtime(when: float, *paths) -> None:
    """Set each path's atime and mtime."""
    for path in paths:
        os.utime(path, (when, when))


def staged_counts(store: Store, job: str) -> dict:
    """{task: files} of a job's stage folder; {} when the folder is gone."""
    folder = store.staging.stage_folder(job)
    if not os.path.isdir(folder):
        return {}
    return {t: len(os.listdir(os.path.join(folder, t))) for t in os.listdir(folder)
            if os.path.isdir(os.path.join(folder, t))}


def test_the_daemons_reaper_publishes_a_job_whose_driver_died_after_its_commit(start_mq, tmp_path):
    store = new_root(tmp_path / "root")
    job = new_id()
    task = stage_task(store, job, "orphan", [b"one", b"two", b"three"], [None, None, "key-3"])
    store.staging.mark_committing(job, [task])
    # The driver published its first file, then died: the job is half visible.
    task_dir = store.staging.stage_folder(job, task)
    store.staging.publish_staged(task_dir, sorted(os.listdir(task_dir))[0])
    set_mtime(QUIET, os.path.join(store.staging.stage_folder(job), "COMMIT"))

    daemon = start_mq(root=tmp_path / "root", workers=1, timeout=30)
    served = []

    def everything_served():
        """Fetch and delete what is ready; true once all three bodies came."""
        while (resp := daemon.fetch("orphan")).status == 200:
            served.append(resp.body)
            daemon.delete("orphan", resp.header("X-Message-Id"))
        return len(served) >= 3

    poll_for(everything_served, timeout=10, what="the reaper to roll the job forward")
    assert sorted(served) == [b"one", b"three", b"two"]
    assert not os.path.exists(store.staging.stage_folder(job))
    assert [line["messages"] for line in daemon.events("reaper.rolled_forward")] == [2]
    # The rolled-forward message's key was recorded, as the driver's commit would have.
    again = daemon.request("POST", "/orphan/messages?dedup_id=key-3", b"again")
    assert again.status == 200 and again.header("X-Duplicate") == "true"


def test_the_daemons_reaper_removes_only_stage_folders_idle_for_a_day(start_mq, tmp_path):
    store = new_root(tmp_path / "root")
    abandoned = new_id()
    gone = stage_task(store, abandoned, "q", [b"never"])
    set_mtime(A_DAY_AGO, store.staging.stage_folder(abandoned, gone), store.staging.stage_folder(abandoned))
    # A slow job: its first task finished a day ago, its second one is still writing.
    slow = new_id()
    done = stage_task(store, slow, "q", [b"done"])
    writing = stage_task(store, slow, "q", [b"writing"])
    set_mtime(A_DAY_AGO, store.staging.stage_folder(slow, done), store.staging.stage_folder(slow))
    young = new_id()
    stage_task(store, young, "q", [b"young"])
    # A live driver's commit: a fresh marker keeps the reaper out.
    live = new_id()
    store.staging.mark_committing(live, [stage_task(store, live, "live", [b"live"])])
    set_mtime(A_DAY_AGO, store.staging.stage_folder(live))

    daemon = start_mq(root=tmp_path / "root", workers=1, timeout=30, args=("--log-level=debug",))

    poll_for(lambda: not os.path.exists(store.staging.stage_folder(abandoned)), timeout=10,
             what="the reaper to remove the abandoned stage folder")
    # The pass that removed it has looked at every other folder too once it logs its end.
    daemon.wait_for_events("reaper.stage_pass", removed=1)
    assert staged_counts(store, slow) == {done: 1, writing: 1}
    assert len(staged_counts(store, young)) == 1
    assert len(staged_counts(store, live)) == 1 and daemon.fetch("live").status == 404
    assert [line["job"] for line in daemon.events("reaper.stage_removed")] == [abandoned]


def test_roll_forward_leaves_a_fresh_marker_and_folders_without_one(tmp_path):
    store = new_root(tmp_path / "root")
    committing, unmarked = new_id(), new_id()
    store.staging.mark_committing(committing, [stage_task(store, committing, "rf", [b"a", b"b"])])
    stage_task(store, unmarked, "rf", [b"not decided"])
    set_mtime(A_DAY_AGO, *(os.path.join(store.staging.stage_folder(unmarked), t)
                           for t in os.listdir(store.staging.stage_folder(unmarked))),
              store.staging.stage_folder(unmarked))
    window = lambda queue: 300.0  # noqa: E731 -- the default dedup window

    assert publishing.roll_forward(store, window) == {}  # A live driver may be publishing it.
    set_mtime(QUIET, os.path.join(store.staging.stage_folder(committing), "COMMIT"))
    finished = publishing.roll_forward(store, window)

    assert {job: report["messages"] for job, report in finished.items()} == {committing: 2}
    assert len(store.states.list_ready("rf")) == 2
    assert os.listdir(store.stage_dir()) == [unmarked]  # Removing it is the sweep's, not this.


@pytest.mark.parametrize("sync", ["fs", "file"])
def test_two_committers_of_one_job_publish_each_message_once(tmp_path, monkeypatch, sync):
    # Small chunks: the two committers interleave file by file, and each touches the marker.
    monkeypatch.setattr(publishing, "PUBLISH_CHUNK", 50)
    store = Store(str(tmp_path / "root"), sync)
    store.init()
    job = new_id()
    tasks = [stage_task(store, job, "twice", [b"%d-%d" % (t, i) for i in range(400)],
                        [f"k{t}-{i}" if i % 2 else None for i in range(400)]) for t in range(3)]
    store.staging.mark_committing(job, tasks)
    window = lambda queue: 300.0  # noqa: E731 -- the default dedup window
    start = threading.Barrier(2)
    reports, errors = [], []

    def commit():
        """One committer: the driver, or a reaper that took it for dead."""
        start.wait()
        try:
            reports.append(publishing.publish_job(store, store.staging.stage_folder(job), tasks, window))
        except Exception as err:  # noqa: BLE001 -- any failure fails the test below
            errors.append(err)

    threads = [threading.Thread(target=commit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sum(r["messages"] for r in reports) == 1200 and sum(r["duplicates"] for r in reports) == 0
    assert len({i for i, _ in store.states.list_ready("twice")}) == len(store.states.list_ready("twice")) == 1200
    assert not os.path.exists(store.staging.stage_folder(job))
