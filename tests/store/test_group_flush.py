"""Group flush: one syncfs(2) covers the changes of several actors, and never one started
before a change it is counted for.

The unit tests run each actor's side in its own thread, with real files, real flock(2) and
real syncfs(2); the waits are on /proc/locks (a thread blocked on the group's lock), never on
a bare sleep. The daemon test counts a real tree's syncfs calls against its flush requests.
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mq.store.disk import Disk
from mq.store.group_flush import GroupFlush, flush_file, read_counts
from support import poll_for, request


def lock_waiters(path: str) -> int:
    """How many lock requests on path's inode are blocked now (lines with "->" in /proc/locks)."""
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return sum(1 for line in f if "->" in line and line.split()[6].endswith(f":{inode}"))


class Actor:
    """One actor's side of a group: its Disk on the shared counters, a log of what it did."""

    def __init__(self, name: str, root: str, log: list, lock: threading.Lock):
        self.name, self.root, self.log, self.lock = name, root, log, lock
        self.disk = Disk("fs")
        self.disk.share_flushes(GroupFlush(flush_file(root)))
        real = self.disk.syncfs_now
        self.gate: threading.Event | None = None

        def syncfs_now(anchor):
            self.note("syncfs start")
            if self.gate is not None:
                self.gate.wait(30)
            real(anchor)
            self.note("syncfs end")

        self.disk.syncfs_now = syncfs_now

    def note(self, what: str) -> None:
        with self.lock:
            self.log.append((self.name, what))

    def write(self) -> None:
        """A batch's change: a new file."""
        self.disk.create(os.path.join(self.root, f"{self.name}.msg"), b"x" * 100)
        self.note("write")

    def flush_and_reply(self) -> None:
        """The batch's flush, then its reply."""
        self.disk.syncfs(self.root)
        self.note("reply")


def covered_before_reply(log: list, name: str) -> bool:
    """True when a syncfs that started after name's write ended before name's reply."""
    wrote = log.index((name, "write"))
    replied = log.index((name, "reply"))
    starts = {}
    for pos, (who, what) in enumerate(log):
        if what == "syncfs start":
            starts[who] = pos
        elif what == "syncfs end" and wrote < starts[who] and pos < replied:
            return True
    return False


@pytest.fixture
def group(tmp_path):
    """Actors a, b, c on one folder; their shared log; the threads started are joined."""
    log, lock, threads = [], threading.Lock(), []
    actors = {n: Actor(n, str(tmp_path), log, lock) for n in "abc"}

    def start(target) -> threading.Thread:
        thread = threading.Thread(target=target, daemon=True)
        threads.append(thread)
        thread.start()
        return thread

    yield actors, log, start
    for actor in actors.values():
        if actor.gate is not None:
            actor.gate.set()
    for thread in threads:
        thread.join(30)


def test_one_syncfs_covers_the_batches_of_actors_that_waited_for_it(group, tmp_path):
    actors, log, start = group
    a, b, c = actors["a"], actors["b"], actors["c"]
    a.gate = threading.Event()
    a.write()
    start(a.flush_and_reply)
    poll_for(lambda: ("a", "syncfs start") in log, what="a's syncfs")
    # b and c write while a's syncfs runs (it started before them: it cannot count for them).
    b.write()
    c.write()
    start(b.flush_and_reply)
    start(c.flush_and_reply)
    flush_path = flush_file(str(tmp_path))
    poll_for(lambda: lock_waiters(flush_path) == 2, what="b and c waiting on the group's lock")
    a.gate.set()
    poll_for(lambda: sum(what == "reply" for _, what in log) == 3, what="three replies")
    syncfs_calls = [who for who, what in log if what == "syncfs start"]
    assert len(syncfs_calls) == 2, log  # a's, then one for both b and c.
    assert read_counts(flush_path) == {"started": 2, "completed": 2, "covered": 1}
    for name in "abc":
        assert covered_before_reply(log, name), (name, log)


def test_a_syncfs_started_before_the_writes_does_not_count_for_them(group, tmp_path):
    actors, log, start = group
    a, b = actors["a"], actors["b"]
    a.gate = threading.Event()
    start(a.flush_and_reply)  # a flushes with nothing of b's written yet
    poll_for(lambda: ("a", "syncfs start") in log, what="a's syncfs")
    b.write()
    start(b.flush_and_reply)
    poll_for(lambda: lock_waiters(flush_file(str(tmp_path))) == 1, what="b waiting on the lock")
    a.gate.set()
    poll_for(lambda: ("b", "reply") in log, what="b's reply")
    assert covered_before_reply(log, "b"), log
    assert [who for who, what in log if what == "syncfs start"] == ["a", "b"]


def test_a_failed_syncfs_covers_nothing(tmp_path):
    log, lock = [], threading.Lock()
    a, b = Actor("a", str(tmp_path), log, lock), Actor("b", str(tmp_path), log, lock)

    def failing(anchor):
        raise OSError(5, "Input/output error")

    a.disk.syncfs_now = failing
    with pytest.raises(OSError):
        a.disk.syncfs(str(tmp_path))
    # Started, never completed: a flush that read the count before it still needs another.
    assert read_counts(flush_file(str(tmp_path))) == {"started": 1, "completed": 0, "covered": 0}
    b.write()
    b.flush_and_reply()
    assert read_counts(flush_file(str(tmp_path)))["completed"] == 2
    assert covered_before_reply(log, "b"), log


def test_a_daemons_actors_share_their_syncfs_calls(start_mq):
    # Four save actors, each add to the least busy: their batches overlap, and one syncfs
    # serves several of them.
    daemon = start_mq(workers=4, args=("--sync=fs", "--flush-group", "--save-batch=0",
                                       "--no-access-log"))
    flush_path = str(daemon.run_dir() / "flush")

    def add(n: int) -> int:
        return request(daemon.port, "POST", "/grouped/messages", f"m{n}".encode()).status

    with ThreadPoolExecutor(32) as pool:
        for _ in range(20):
            statuses = list(pool.map(add, range(64)))
            assert statuses == [201] * 64
            counts = read_counts(flush_path)
            if counts["covered"] > 0:
                break
    assert counts["covered"] > 0, counts
    assert counts["completed"] <= counts["started"]


def test_without_flush_group_each_actor_flushes_alone(start_mq):
    daemon = start_mq(workers=1, args=("--sync=fs",))
    assert request(daemon.port, "POST", "/alone/messages", b"m").status == 201
    assert not (daemon.run_dir() / "flush").exists()


def lock_holders(path: str) -> list[int]:
    """The pids holding a lock on path's inode now (/proc/locks lines without "->")."""
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return [int(line.split()[4]) for line in f
                if "->" not in line and line.split()[5].endswith(f":{inode}")]


def test_an_actor_killed_in_its_syncfs_leaves_no_lock_behind(tmp_path):
    path = flush_file(str(tmp_path))
    GroupFlush(path).close()  # The file exists before the child runs.
    pid = os.fork()
    if pid == 0:  # An actor whose syncfs never returns (a hung disk).
        try:
            GroupFlush(path).sync(lambda: threading.Event().wait(60))
        finally:
            os._exit(0)
    try:
        poll_for(lambda: lock_holders(path) == [pid], what="the child holding the lock")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    ran = []
    assert GroupFlush(path).sync(lambda: ran.append(1)) is True
    # The killed one's syncfs never completed: it covers nobody.
    assert ran == [1] and read_counts(path) == {"started": 2, "completed": 2, "covered": 0}


def test_an_actor_never_reads_a_counter_half_written(tmp_path):
    # Another actor's STARTED read while one writes it (lock-free, as sync() reads it first):
    # struct.pack_into zeroed the counter before writing it, and a reader that took 0 for it
    # counted a syncfs done before its writes as one after them.
    path = flush_file(str(tmp_path))
    GroupFlush(path).close()
    pid = os.fork()
    if pid == 0:  # An actor flushing as fast as it can, its syncfs a no-op.
        try:
            group = GroupFlush(path)
            while True:
                group.sync(lambda: None)
        finally:
            os._exit(0)
    reader = GroupFlush(path)
    try:
        poll_for(lambda: reader._get(0) > 0, 10, what="the other actor to flush")
        highest, fell, until = 0, [], time.monotonic() + 2.0
        while time.monotonic() < until and not fell:
            for _ in range(10_000):
                seen = reader._get(0)
                if seen < highest:
                    fell.append((highest, seen))
                highest = max(highest, seen)
        assert not fell, f"STARTED read lower than before: {fell[:3]}"
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        reader.close()
