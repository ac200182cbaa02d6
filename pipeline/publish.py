"""Publishing, the second phase of a write: the commit renames a job's staged files into view.

commit() on the driver writes stage/{job}/COMMIT listing the task attempts Spark chose, renames
each of their files into queues/{q}/ (or delay/), flushes the folders it touched and removes
stage/{job}; abort() removes stage/{job}. A driver killed during the renames leaves the
COMMIT marker, from which the next write on the root finishes the job (roll forward).
"""

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson

from mq import properties
from mq import store as fmt
from mq.pipeline import notify
from mq.store.staging import committing_tasks, parse_staged
from mq.pipeline.options import SourceOptions

#: Threads that rename staged files into their queues in a commit, and files per unit of work.
PUBLISH_THREADS = 4
PUBLISH_CHUNK = 20_000
#: Seconds after which a stage folder with no COMMIT marker is an abandoned job's, and removed.
STALE_STAGE_SECONDS = 24 * 3600.0


class Publisher:
    """The driver side of a write job: publish the chosen attempts' files, or drop them all."""

    def __init__(self, options: SourceOptions, job: str):
        self.options = options
        self.job = job

    def commit(self, messages: list) -> dict:
        """Mark the job as committing, publish its files, flush, tell the daemons; return a report."""
        started = time.time()
        store = fmt.Store(self.options.root, self.options.sync)
        tasks = [m.task for m in messages if m is not None]
        folder = store.stage_folder(self.job)
        if not os.path.isdir(folder):
            os.makedirs(folder)  # A job with no rows still commits (it publishes nothing).
        store.mark_committing(self.job, tasks)
        report = publish_job(store, folder, tasks, self.options.notify)
        report.update(job=self.job, tasks=len(tasks), commit_seconds=round(time.time() - started, 3))
        roll_forward(store, skip=self.job)
        if self.options.report_file:
            write_report(self.options.report_file, report)
        return report

    def abort(self) -> None:
        """Remove every file the job staged; none was ever visible."""
        store = fmt.Store(self.options.root, self.options.sync)
        shutil.rmtree(store.stage_folder(self.job), ignore_errors=True)


def publish_job(store: fmt.Store, folder: str, tasks: list[str], tell: bool = True) -> dict:
    """Rename the staged files of the listed tasks into their queues; flush; remove the folder.

    Renames run on PUBLISH_THREADS threads: each is a system call that releases the GIL, and
    the commit of a big job is otherwise one process renaming a million files alone.
    """
    chunks = []
    for task in tasks:
        task_dir = os.path.join(folder, task)
        try:
            names = os.listdir(task_dir)
        except FileNotFoundError:
            continue  # Published already by an earlier, interrupted commit.
        chunks.extend((task_dir, names[i:i + PUBLISH_CHUNK]) for i in range(0, len(names), PUBLISH_CHUNK))
    props = properties.PropertyFiles(store)
    with ThreadPoolExecutor(PUBLISH_THREADS) as pool:
        parts = list(pool.map(lambda chunk: publish_chunk(store, props, *chunk), chunks))
    total = Published()
    for part in parts:
        total.merge(part)
    if total.dirs:
        store.flush(total.dirs | {store.folder("queues")})
    shutil.rmtree(folder, ignore_errors=True)
    # Notices reach daemons on every host within a second; the notification, those on this host at once.
    for queue in total.ready:
        store.post_notice(queue)
    if total.delayed:
        store.post_notice()
    told = notify.tell_daemons(store, total.ready, total.delayed) if tell and (total.ready or total.delayed) else 0
    return {"messages": total.count, "duplicates": total.duplicates, "delayed": len(total.delayed),
            "queues": {q: len(ids) for q, ids in sorted(total.ready.items())}, "daemons_told": told}


@dataclass
class Published:
    """What publishing some staged files did."""

    count: int = 0
    duplicates: int = 0
    dirs: set = field(default_factory=set)
    ready: dict = field(default_factory=dict)
    delayed: list = field(default_factory=list)

    def merge(self, other: "Published") -> None:
        """Add another part's results to these."""
        self.count += other.count
        self.duplicates += other.duplicates
        self.dirs |= other.dirs
        for queue, ids in other.ready.items():
            self.ready.setdefault(queue, []).extend(ids)
        self.delayed.extend(other.delayed)


def publish_chunk(store: fmt.Store, props, task_dir: str, names: list[str]) -> Published:
    """Publish some of one task's staged files."""
    out = Published(dirs={task_dir})
    now = time.time()
    known_queues: set[str] = set()
    for name in names:
        parsed = parse_staged(name)
        if parsed is None:
            continue  # Not a message file (nothing else is staged, but never publish junk).
        queue, message_id, is_delayed, keyed = parsed
        if queue not in known_queues:
            # One check per queue and chunk, not per file; a delayed message needs its queue too.
            store.create_queue(queue)
            known_queues.add(queue)
        try:
            if keyed and _is_duplicate(store, props, task_dir, name, queue, message_id, now, out.dirs):
                out.duplicates += 1
                continue
            due = os.stat(os.path.join(task_dir, name)).st_mtime if is_delayed else None
        except FileNotFoundError:
            continue  # Published by another committer of the same job.
        target = store.publish_staged(task_dir, name, parsed)
        if target is None:
            continue
        out.dirs.add(target)
        out.count += 1
        if is_delayed:
            out.delayed.append((queue, message_id, 0, due))
        else:
            out.ready.setdefault(queue, []).append((message_id, 0))
    return out


def _is_duplicate(store, props, task_dir, name, queue, message_id, now, dirs) -> bool:
    """Record the staged message's dedup key; True (and the file dropped) when it was taken."""
    with open(os.path.join(task_dir, name), "rb") as f:
        digest = fmt.decode_message(queue, message_id, f.read(65536)).dedup_digest
    window = props.effective(queue)["dedup_window"]
    earlier = store.dedup_record_digest(queue, digest, message_id, window, now)
    dirs.add(os.path.dirname(store.dedup_digest_path(queue, digest)))
    if earlier is None or earlier == message_id:
        return False
    os.unlink(os.path.join(task_dir, name))
    return True


def roll_forward(store: fmt.Store, skip: str = "", stale_after: float = STALE_STAGE_SECONDS) -> int:
    """Finish jobs whose driver died while publishing; remove abandoned stage folders.

    A folder with a COMMIT marker is published (renames that already happened are skipped);
    one without, older than stale_after seconds, belonged to a job that never committed.
    """
    finished = 0
    for job, folder, mtime in store.list_stages():
        if job == skip:
            continue
        tasks = committing_tasks(folder)
        if tasks is not None:
            publish_job(store, folder, tasks)
            finished += 1
        elif time.time() - mtime > stale_after:
            shutil.rmtree(folder, ignore_errors=True)
    return finished


def write_report(path: str, report: dict) -> None:
    """Write the commit report as JSON (replaced whole)."""
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as f:
        f.write(orjson.dumps(report))
    os.replace(temp, path)


