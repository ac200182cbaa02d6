"""A save actor's file calls run several at once only when they wait on the file system, as
measured (actors/overlap.py): on a disk whose creates and renames sleep, the batches after the
first few overlap them; on the local disk they stay one at a time. Overlapped, a batch keeps its
answers, its all-or-none batch adds and the order of a message group's renames.
tests/powercut/test_file_wait.py shows the same through a daemon on a slow FUSE mount."""

import errno
import os
import threading
import time

from actor_support import Actors, request
from disks import FailingDisk

from mq.errors import MqError


class WaitingDisk(FailingDisk):
    """A real disk whose creates and renames each sleep `seconds` first (a network file
    system's round trip), counting how many of them were ever in progress at once; a message
    whose bytes hold `poison` cannot be written (poisoned: "write") or renamed ("rename")."""

    def __init__(self, seconds: float, poison: bytes = b"", poisoned: str = ""):
        super().__init__("fs")
        self.seconds, self.poison, self.poisoned = seconds, poison, poisoned
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.renamed: list[str] = []
        self.bad: set[str] = set()  # paths in new/ of poisoned messages

    def waited(self, call):
        """Run call after the sleep, counted in progress meanwhile."""
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.seconds)
            return call()
        finally:
            with self.lock:
                self.now -= 1

    def create(self, path, data, mtime=None):
        """Create the file, after the wait."""
        if self.poison and self.poison in data:
            if self.poisoned == "write":
                raise OSError(errno.ENOSPC, "injected: no space left")
            self.bad.add(path)
        self.waited(lambda: super(WaitingDisk, self).create(path, data, mtime))

    def rename(self, source, target):
        """Rename, after the wait; the targets in the order their renames ended."""
        if source in self.bad:
            raise OSError(errno.EIO, "injected: input/output error")
        self.waited(lambda: super(WaitingDisk, self).rename(source, target))
        with self.lock:
            self.renamed.append(os.path.basename(target))


def adds(n: int, **fields) -> list[dict]:
    """n single adds to queue q, bodies a0..a(n-1)."""
    return [dict({"queue": "q", "body": f"a{i}".encode()}, **fields) for i in range(n)]


def in_queue(actors: Actors) -> set[str]:
    """The names in queue q's folder."""
    return set(os.listdir(actors.store.queue_dir("q")))


def test_file_calls_that_wait_run_several_at_once_from_the_fourth_batch_on(tmp_path):
    disk = WaitingDisk(0.005)
    actors = Actors(tmp_path, disk=disk)
    first = [r for _ in range(3) for r in actors.add(*adds(8))]
    assert disk.most == 1  # measured one call at a time
    assert actors.save.overlap.on, actors.save.overlap.wait_per_file()
    assert actors.save.overlap.wait_per_file() >= 0.005
    results = actors.add(*adds(16))
    assert disk.most > 1
    ids = [r["id"] for r in first + results]
    assert all(isinstance(r, dict) for r in first + results), results
    assert in_queue(actors) == set(ids)
    assert os.listdir(actors.store.folder("new")) == []


def test_file_calls_on_the_local_disk_stay_one_at_a_time(tmp_path):
    disk = WaitingDisk(0.0)
    actors = Actors(tmp_path, disk=disk)
    for _ in range(20):
        assert all(isinstance(r, dict) for r in actors.add(*adds(8)))
    assert not actors.save.overlap.on, actors.save.overlap.wait_per_file()
    assert actors.save.overlap.pool is None
    assert disk.most == 1
    assert len(in_queue(actors)) == 160


def test_a_group_keeps_its_order_and_a_batch_add_stays_all_or_none_when_overlapped(tmp_path):
    disk = WaitingDisk(0.005, poison=b"POISONED-BODY", poisoned="rename")
    actors = Actors(tmp_path, disk=disk)
    first = {r["id"] for _ in range(3) for r in actors.add(*adds(8))}
    assert actors.save.overlap.on
    disk.renamed.clear()
    grouped = [request("add", queue="q", body=f"g{i}".encode(), group="g") for i in range(6)]
    batch_add = request("add_batch", queue="q", messages=[
        {"body": b"b0"}, {"body": b"b1"}, {"body": b"b2 POISONED-BODY"}, {"body": b"b3"}, {"body": b"b4"}])
    results = actors.save.handle([*grouped, batch_add]).results
    assert disk.most > 1
    # One message of the batch add cannot be renamed: the request is answered its error and
    # none of its messages is kept, whichever were renamed meanwhile.
    assert isinstance(results[-1], MqError) and results[-1].kind == "unavailable", results[-1]
    group = [r["id"] for r in results[:-1]]
    assert in_queue(actors) == first | set(group)
    assert [name for name in disk.renamed if name in group] == group  # in the order added
    assert os.listdir(actors.store.folder("new")) == []


def test_a_write_that_fails_on_the_threads_fails_its_own_request_alone(tmp_path):
    disk = WaitingDisk(0.005, poison=b"POISONED-BODY", poisoned="write")
    actors = Actors(tmp_path, disk=disk)
    first = {r["id"] for _ in range(3) for r in actors.add(*adds(8))}
    assert actors.save.overlap.on
    batch_add = request("add_batch", queue="q", messages=[
        {"body": b"b0"}, {"body": b"b1 POISONED-BODY"}, {"body": b"b2"}, {"body": b"b3"}])
    results = actors.save.handle([request("add", queue="q", body=b"one"), batch_add,
                                  request("add", queue="q", body=b"two")]).results
    assert disk.most > 1
    assert isinstance(results[1], MqError) and results[1].kind == "unavailable", results[1]
    assert in_queue(actors) == first | {results[0]["id"], results[2]["id"]}
    assert os.listdir(actors.store.folder("new")) == []
