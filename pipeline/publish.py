"""Publishing, the second phase of a write: the driver's commit renames a job's staged files into view.

commit() writes stage/{job}/COMMIT listing the task attempts Spark chose, then publishes them
with mq.store.publishing (renames, flush, notices, removal of stage/{job}) and tells the daemons
on this host over ZeroMQ; abort() removes stage/{job}. A driver killed during the renames
leaves the COMMIT marker, from which the daemon's reaper, or the next Spark commit on the root,
finishes the job (roll forward). Stage folders of other jobs are never removed here: a job
that is slow is not one that was abandoned (docs/PIPELINE.md, "Stage folders").
"""

import os
import sys
import time

import orjson

from mq import properties
from mq import store as fmt
from mq.errors import Unavailable
from mq.pipeline import notify
from mq.pipeline.options import SourceOptions
from mq.store.publishing import publish_job, roll_forward


def tell_daemons(store: object, ready: dict, delayed: list) -> int:
    """notify.tell_daemons as mq.store.publishing's Tell, whose store is any object."""
    assert isinstance(store, fmt.Store), "publishing hands tell the Store it was given"
    return notify.tell_daemons(store, ready, delayed)


class Publisher:
    """The driver side of a write job: publish the chosen attempts' files, or drop them all."""

    def __init__(self, options: SourceOptions, job: str):
        self.options = options
        self.job = job

    def commit(self, messages: list) -> dict:
        """Mark the job as committing, publish its files, flush, tell the daemons; return a report."""
        started = time.time()
        store = self.options.open_store()
        tasks = [m.task for m in messages if m is not None]
        folder = store.staging.make_stage_folder(self.job)  # A job with no rows still commits.
        check_staged(store, self.job, tasks)
        store.staging.mark_committing(self.job, tasks)
        window = dedup_window(store)
        tell = tell_daemons if self.options.notify else None
        report = publish_job(store, folder, tasks, window, tell)
        report.update(job=self.job, tasks=len(tasks), commit_seconds=round(time.time() - started, 3))
        # Other jobs whose driver died mid-commit: finished here too (publishing is idempotent),
        # as the daemon's reaper would; a failure there is theirs, not this job's.
        roll_forward(store, window, skip=self.job, tell=tell, on_error=warn_roll_forward)
        if self.options.report_file:
            write_report(self.options.report_file, report)
        return report

    def abort(self) -> None:
        """Remove every file the job staged; none was ever visible."""
        # Not open_store: removing makes nothing, and a root gone must not hide the job's failure.
        store = fmt.Store(self.options.root, self.options.sync)
        store.staging.remove_stage(store.staging.stage_folder(self.job))


def check_staged(store: fmt.Store, job: str, tasks: list[str]) -> None:
    """Refuse to commit when a chosen task's folder is gone: its rows would be lost unseen.

    Before the COMMIT marker nothing publishes a job, so a missing task folder was removed
    by something else (an operator, or the abandoned-stage sweep of a job idle for a day).
    """
    missing = [t for t in tasks if not os.path.isdir(store.staging.stage_folder(job, t))]
    if missing:
        raise Unavailable(f"job {job}: the staged files of task(s) {', '.join(missing)} are gone "
                          f"from {store.staging.stage_folder(job)}; nothing was published")


def dedup_window(store: fmt.Store):
    """dedup_window(queue) from the root's property files, as the daemon reads them."""
    props = properties.PropertyFiles(store)
    return lambda queue: props.effective(queue)["dedup_window"]


def warn_roll_forward(job: str, err: Exception) -> None:
    """One line on stderr for another job this commit could not finish (the reaper retries)."""
    print(f"mq: could not roll forward stage job {job}: {err}", file=sys.stderr)


def write_report(path: str, report: dict) -> None:
    """Write the commit report as JSON (replaced whole)."""
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as f:
        f.write(orjson.dumps(report))
    os.replace(temp, path)
