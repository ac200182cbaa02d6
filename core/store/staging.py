"""Spark staging: stage/{job}/{task}/ folders of a write job, their files and COMMIT marker.

A staged file becomes a message only by the rename in its job's commit (docs/PIPELINE.md).
"""

import os

import orjson

from mq.errors import Invalid, Unavailable
from mq.ids import is_id
from mq.store.disk import Disk
from mq.store.names import QUEUE_PATTERN, validate_id
from mq.store.queues import Queues
from mq.store.root import Root

#: Marker file whose presence in a stage folder means "this job decided to commit".
COMMIT_MARKER = "COMMIT"


class Staging:
    """The files of Spark write jobs: a member of Store (store.staging), given the root's
    paths, its Disk and its queues (a staged message's queue deleted meanwhile is made again)."""

    def __init__(self, paths: Root, disk: Disk, queues: Queues):
        self.paths = paths
        self.disk = disk
        self.queues = queues

    def stage_folder(self, job: str, task: str = "") -> str:
        """{root}/stage/{job}[/{task}]: where a Spark write job's task stages its files."""
        validate_id(job)
        if task:
            validate_id(task)
        return self.paths.stage_dir(job, task)

    def write_staged(self, folder: str, name: str, data: bytes, due: float | None) -> str:
        """Create one staged file (exclusive create, whole write, due time as mtime); return its
        path. With sync=file the file is fsynced here; with sync=fs the task flushes at its end."""
        path = os.path.join(folder, name)
        self.disk.create(path, data, due)
        return path

    def publish_staged(self, folder: str, name: str,
                       parsed: tuple[str, str, bool, bool] | None = None) -> str | None:
        """Rename a staged file into its queue (or delay/ when delayed); return the folder it
        entered.

        The caller makes sure the queue exists (a delayed message needs it to become ready in);
        one deleted meanwhile is created again. None when the staged file is gone (another
        committer of the same job published it first). `parsed` is parse_staged(name), if known.
        """
        parsed = parsed or parse_staged(name)
        if parsed is None:
            raise Invalid(f"{name!r} is not the name of a staged message")
        queue, message_id, delayed, _ = parsed
        target = (self.paths.delay_path(queue, message_id) if delayed
                  else self.paths.ready_path(queue, message_id))
        source = os.path.join(folder, name)
        for _ in range(3):
            try:
                self.disk.rename(source, target)
                return os.path.dirname(target)
            except FileExistsError:
                return None  # Another committer published it at the same moment.
            except FileNotFoundError:
                if not os.path.exists(source):
                    return None
                self.queues.create_queue(queue)  # False when another thread or process created it first.
        raise Unavailable(f"cannot publish {source}: queue {queue!r} keeps disappearing")

    def list_stages(self) -> list[tuple[str, str, float]]:
        """(job, folder, folder mtime) of every stage folder under the root."""
        base = self.paths.stage_dir()
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return []
        found = []
        for job in names:
            folder = os.path.join(base, job)
            try:
                found.append((job, folder, os.stat(folder).st_mtime))
            except FileNotFoundError:
                continue
        return found

    def stage_newest_mtime(self, folder: str) -> float | None:
        """The newest mtime of a job's stage folder and its task folders; None when it is gone
        or not a folder.

        A running task keeps creating files in its own folder, which bumps that folder's mtime
        and not the job folder's: only the newest of them all tells a job's last sign of life.
        """
        try:
            newest = os.stat(folder).st_mtime
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
                    except FileNotFoundError:
                        continue  # Removed by its job's commit or abort meanwhile.
        except (FileNotFoundError, NotADirectoryError):
            return None
        return newest

    def commit_marker_mtime(self, folder: str) -> float | None:
        """When a stage folder's COMMIT marker was written or last touched; None without one."""
        try:
            return os.stat(os.path.join(folder, COMMIT_MARKER)).st_mtime
        except (FileNotFoundError, NotADirectoryError):
            return None

    def touch_commit_marker(self, folder: str) -> None:
        """Set a COMMIT marker's mtime to now: the committer's sign that it is still publishing.

        Not through the disk and never flushed: a heartbeat lost in a crash only lets the
        roll forward start sooner, which is what a crash calls for.
        """
        try:
            os.utime(os.path.join(folder, COMMIT_MARKER))
        except FileNotFoundError:
            pass  # Another committer of the job finished and removed the folder.

    def make_stage_folder(self, job: str, task: str = "") -> str:
        """Create stage/{job}[/{task}] (each new folder's name made durable); return its path."""
        path = self.stage_folder(job, task)
        for folder in (self.paths.stage_dir(), self.paths.stage_dir(job), path):
            if not os.path.isdir(folder):
                self.disk.mkdir(folder)
        return path

    def remove_stage(self, folder: str) -> None:
        """Remove a job's stage folder; one already removed (by another committer) is fine."""
        for _ in range(3):
            try:
                self.disk.remove_tree(folder)
                return
            except FileNotFoundError:
                # Another committer removing it too took an entry first: go again for the rest.
                if not os.path.lexists(folder):
                    return
        self.disk.remove_tree(folder)

    def mark_committing(self, job: str, tasks: list[str]) -> None:
        """Record durably that a job's tasks' staged files are to be published (roll forward
        after a crash). Failed attempts' folders in the same job folder are never published."""
        folder = self.stage_folder(job)
        self.disk.create(os.path.join(folder, COMMIT_MARKER), orjson.dumps(tasks))
        self.disk.flush(self.paths.root, {folder})


def staged_name(queue: str, message_id: str, delayed: bool, keyed: bool) -> str:
    """A staged file's name: two flag letters (r/d: ready/delayed, k/-: has a dedup key), '.',
    queue:id."""
    return f"{'d' if delayed else 'r'}{'k' if keyed else '-'}.{queue}:{message_id}"


def parse_staged(name: str) -> tuple[str, str, bool, bool] | None:
    """(queue, id, delayed, keyed) of a staged file's name; None when it is not one."""
    if len(name) < 4 or name[2] != "." or name[0] not in "rd" or name[1] not in "k-":
        return None
    queue, sep, message_id = name[3:].rpartition(":")
    if not sep or not is_id(message_id) or not QUEUE_PATTERN.fullmatch(queue):
        return None
    return queue, message_id, name[0] == "d", name[1] == "k"


def committing_tasks(folder: str) -> list[str] | None:
    """The task ids a stage folder's commit marker lists; None when it has none."""
    try:
        with open(os.path.join(folder, COMMIT_MARKER), "rb") as f:
            return orjson.loads(f.read())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except orjson.JSONDecodeError:
        return None  # Torn by a crash before its fsync: the job never decided to commit.
