"""Publishing a Spark write job's staged files: by its driver, or by whoever finds it unfinished.

The driver's commit (mq.pipeline.publish) writes stage/{job}/COMMIT and calls publish_job.
roll_forward finishes jobs whose committer went quiet after writing the marker (its driver
died); sweep_abandoned_stages removes the folders of jobs that never decided to commit. The
daemon's reaper runs both (actors/reaper.py), so neither waits for another Spark write; a
Spark commit rolls forward too, but never removes another job's folder (docs/PIPELINE.md).

Publishing is idempotent and safe to run concurrently: a file another committer of the same
job renamed first is skipped, and whoever finishes first removes the folder.
"""

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from mq.store import Store
from mq.store.message import CorruptMessage, decode_header
from mq.store.recovery import HEADER_BYTES
from mq.store.staging import committing_tasks, parse_staged

#: Threads that rename staged files into their queues in a commit, and files per unit of work.
PUBLISH_THREADS = 4
PUBLISH_CHUNK = 20_000
#: Seconds a COMMIT marker must go untouched before anyone but its own committer publishes the
#: job: its committer touches it after every PUBLISH_CHUNK files, so a quiet marker means the
#: driver died. Publishing alongside a live committer is safe, but splits its report's counts.
COMMIT_GRACE_SECONDS = 30.0
#: Seconds since the newest mtime of a job folder and its task folders after which a stage
#: folder without a COMMIT marker is an abandoned job's and is removed: a running task keeps
#: creating files in its folder, so a slow job's folders never all look that old.
ABANDONED_STAGE_SECONDS = 24 * 3600.0

#: dedup_window(queue): seconds a de-duplication key of that queue is remembered.
DedupWindow = Callable[[str], float]
#: tell(store, ready, delayed) -> daemons told: how a caller notifies daemons (best effort).
Tell = Callable[[object, dict, list], int]


@dataclass
class Published:
    """What publishing some staged files did."""

    count: int = 0
    duplicates: int = 0
    sources: set = field(default_factory=set)  # task folders files were renamed out of
    dirs: set = field(default_factory=set)     # folders files were renamed or keyed into
    ready: dict = field(default_factory=dict)
    delayed: list = field(default_factory=list)

    def merge(self, other: "Published") -> None:
        """Add another part's results to these."""
        self.count += other.count
        self.duplicates += other.duplicates
        self.sources |= other.sources
        self.dirs |= other.dirs
        for queue, ids in other.ready.items():
            self.ready.setdefault(queue, []).extend(ids)
        self.delayed.extend(other.delayed)


def publish_job(store: Store, folder: str, tasks: list[str], dedup_window: DedupWindow,
                tell: Tell | None = None) -> dict:
    """Rename the staged files of the listed tasks into their queues; flush; post notices;
    remove the folder; return a report (messages, duplicates, delayed, queues, daemons_told).

    Renames run on PUBLISH_THREADS threads: each is a system call that releases the GIL, and
    the commit of a big job is otherwise one process renaming a million files alone.
    """
    chunks: list[tuple[str, list[str]]] = []
    for task in tasks:
        task_dir = os.path.join(folder, task)
        try:
            names = os.listdir(task_dir)
        except FileNotFoundError:
            continue  # Published already by another committer, or an earlier interrupted one.
        chunks.extend((task_dir, names[i:i + PUBLISH_CHUNK]) for i in range(0, len(names), PUBLISH_CHUNK))

    def publish(chunk) -> Published:
        """Publish one chunk, then show any other committer that this one is alive."""
        part = publish_chunk(store, dedup_window, *chunk)
        store.staging.touch_commit_marker(folder)  # Still publishing: roll forwards keep out.
        return part

    with ThreadPoolExecutor(PUBLISH_THREADS) as pool:
        parts = list(pool.map(publish, chunks))
    total = Published()
    for part in parts:
        total.merge(part)
    _flush(store, total)
    try:
        store.staging.remove_stage(folder)
    except OSError:
        pass  # Everything is published; the marker left behind makes a later roll forward remove it.
    # Notices reach daemons on every host within a second; tell, those the caller knows at once.
    for queue in total.ready:
        store.notices.post(queue)
    if total.delayed:
        store.notices.post()
    told = tell(store, total.ready, total.delayed) if tell and (total.ready or total.delayed) else 0
    return {"messages": total.count, "duplicates": total.duplicates, "delayed": len(total.delayed),
            "queues": {q: len(ids) for q, ids in sorted(total.ready.items())}, "daemons_told": told}


def _flush(store: Store, total: Published) -> None:
    """Make the renames durable: the folders they entered, then the task folders they left."""
    if not total.dirs:
        return
    store.flush(total.dirs | {store.folder("queues")})
    if store.sync == "file":
        for task_dir in sorted(total.sources):
            try:
                store.disk.fsync_dir(task_dir)
            except FileNotFoundError:
                # Another committer of the job removed it, after flushing it: each committer
                # flushes every task folder it listed before it removes the job's folder.
                continue


def publish_chunk(store: Store, dedup_window: DedupWindow, task_dir: str, names: list[str]) -> Published:
    """Publish some of one task's staged files; a file another committer took is skipped."""
    out = Published(sources={task_dir})
    now = time.time()
    known_queues: set[str] = set()
    for name in names:
        parsed = parse_staged(name)
        if parsed is None:
            continue  # Not a message file (nothing else is staged, but never publish junk).
        queue, message_id, is_delayed, keyed = parsed
        if queue not in known_queues:
            # One check per queue and chunk, not per file; a delayed message needs its queue too.
            store.queues.create_queue(queue)
            known_queues.add(queue)
        try:
            if keyed and _is_duplicate(store, dedup_window, task_dir, name, queue, message_id, now, out.dirs):
                out.duplicates += 1
                continue
            due = os.stat(os.path.join(task_dir, name)).st_mtime if is_delayed else None
        except FileNotFoundError:
            continue  # Published by another committer of the same job.
        target = store.staging.publish_staged(task_dir, name, parsed)
        if target is None:
            continue
        out.dirs.add(target)
        out.count += 1
        if is_delayed:
            out.delayed.append((queue, message_id, 0, due))
        else:
            out.ready.setdefault(queue, []).append((message_id, 0))
    return out


def _is_duplicate(store, dedup_window, task_dir, name, queue, message_id, now, dirs) -> bool:
    """Record the staged message's dedup key; True (and the file dropped) when it was taken.

    Two committers of one job record the same id for the key, so neither drops the file.
    """
    path = os.path.join(task_dir, name)
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    try:
        digest = decode_header(queue, message_id, head)[0].get("dk", "")
    except CorruptMessage:
        digest = ""  # The task wrote it whole and flushed it: never seen, but publish as is.
    if not digest:
        return False
    earlier = store.dedup.record_digest(queue, digest, message_id, dedup_window(queue), now)
    dirs.add(store.dedup_dir(queue))
    if earlier is None or earlier == message_id:
        return False
    try:
        store.disk.unlink(path)
    except FileNotFoundError:
        pass  # Dropped by another committer of the job.
    return True


def roll_forward(store: Store, dedup_window: DedupWindow, skip: str = "",
                 grace_seconds: float = COMMIT_GRACE_SECONDS, tell: Tell | None = None,
                 on_error: Callable[[str, Exception], None] | None = None) -> dict[str, dict]:
    """Finish the jobs whose COMMIT marker has gone untouched for grace_seconds (their driver
    died while publishing); return each finished job's report. Folders without a marker are
    never touched here.

    A job that fails is passed to on_error and skipped: one bad folder must neither stop the
    others nor fail the caller (a Spark commit that already published its own job, a reaper
    that would otherwise fail the same way at every pass).
    """
    finished = {}
    for job, folder, _ in store.staging.list_stages():
        if job == skip:
            continue
        touched = store.staging.commit_marker_mtime(folder)
        if touched is None or time.time() - touched < grace_seconds:
            continue
        tasks = committing_tasks(folder)
        if tasks is None:
            continue  # Torn by a crash before its fsync: the job never decided to commit.
        try:
            finished[job] = publish_job(store, folder, tasks, dedup_window, tell)
        except Exception as err:  # noqa: BLE001 -- see the docstring: any failure is per job.
            if on_error is not None:
                on_error(job, err)
    return finished


def sweep_abandoned_stages(store: Store, min_age_seconds: float = ABANDONED_STAGE_SECONDS) -> list[str]:
    """Remove the stage folders without a COMMIT marker whose job folder and task folders all
    have an mtime older than min_age_seconds; return their jobs.

    abort() removes a failed job's folder itself; this is for the rest: a driver that died
    before its commit, files a task Spark was still cancelling staged after abort().
    """
    removed = []
    for job, folder, mtime in store.staging.list_stages():
        if committing_tasks(folder) is not None:
            continue  # Decided to commit: roll_forward's, never removed unpublished.
        cutoff = time.time() - min_age_seconds
        if mtime >= cutoff:
            continue  # Young job folder: no need to look at its task folders.
        newest = store.staging.stage_newest_mtime(folder)
        if newest is None or newest >= cutoff:
            continue
        try:
            store.staging.remove_stage(folder)
        except OSError:
            continue  # Left for the next pass.
        removed.append(job)
    return removed
