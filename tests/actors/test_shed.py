"""Load shed before work, in-process on real files: a request past its deadline is refused
before its handler touches the disk, and an add whose deadline passes while its files are
written is discarded before it is renamed into view (actors/pace.py).
tests/powercut/test_shed_load.py shows it on a slow file system."""

import os
import time

from actor_support import Actors, request
from disks import FailingDisk

from mq.actors.pace import Pace
from mq.errors import Unavailable


class SlowDisk(FailingDisk):
    """A real disk whose every file creation takes `seconds` more (a distributed one's)."""

    def __init__(self, seconds: float):
        super().__init__("fs")
        self.seconds = seconds

    def create(self, path, data, mtime=None):
        """Create the file, slowly."""
        time.sleep(self.seconds)
        super().create(path, data, mtime)


def batch(n: int, due: float | None) -> object:
    """An add_batch request of n messages with a deadline."""
    fields = {"queue": "q", "messages": [{"body": f"m{i}".encode()} for i in range(n)]}
    if due is not None:
        fields["deadline"] = due
    return request("add_batch", **fields)


def stored(actors: Actors) -> list[str]:
    """The files in new/ and in the queue's folder."""
    queue = os.listdir(actors.store.queue_dir("q")) if actors.store.queues.queue_exists("q") else []
    return os.listdir(actors.store.folder("new")) + queue


def test_a_request_past_its_deadline_is_refused_before_its_handler_touches_the_disk(tmp_path):
    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk=disk)
    disk.calls.clear()
    [result] = actors.save.handle([batch(3, time.monotonic() - 0.1)]).results
    assert isinstance(result, Unavailable) and result.retry_after >= 1, result
    assert "deadline" in result.message
    assert disk.calls == {}, disk.calls
    assert stored(actors) == []


def test_an_add_whose_deadline_passes_while_it_is_written_is_discarded_before_the_renames(
        tmp_path):
    actors = Actors(tmp_path, disk=SlowDisk(0.02))
    [result] = actors.save.handle([batch(10, time.monotonic() + 0.1)]).results
    assert isinstance(result, Unavailable), result
    assert stored(actors) == []
    [result] = actors.save.handle([batch(10, time.monotonic() + 30)]).results
    assert len(result["messages"]) == 10, result
    assert len(stored(actors)) == 10


def test_a_fetch_actor_refuses_nothing_and_a_save_actor_only_what_is_late(tmp_path):
    # A fetch actor's requests differ widely in cost (the statistics of 10,000 queues beside
    # an ack): the pace of one says nothing of the next, and its late work adds no message.
    pace = Pace(refuses="none")
    pace.record(1, 100.0)  # a pace that would refuse everything after the first
    now = time.monotonic()
    requests = [batch(1, now + 1.0), batch(1, now + 1.0), batch(1, now - 0.1)]
    admitted, refused, _ = pace.admit(requests)
    assert admitted == requests and refused == []
    pace.begin()
    assert all(pace.start(r.payload) is None for r in requests)
    late = Pace(refuses="late")
    late.record(1, 100.0)
    admitted, refused, _ = late.admit(requests)
    assert admitted == requests[:2] and refused == requests[2:]
