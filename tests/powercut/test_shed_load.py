"""Load shed before work, on a slow file system: lazyfs with every create, rename and fsync
under the root made slow (lazyfs.FaultyLazyFS, "+MS"), a daemon whose front waits 4 s for an
actor, and more concurrent batch adds than its one save actor can store in that time.

Some may be stored (201), the others are refused (503 with Retry-After); every 201's messages are
in their queue, and no message of a 503 is, then or later: the save actor refused what was
past the request's deadline when it came to it, and discarded, before renaming them into
view, the files of any add whose deadline a commit would pass (actors/pace.py).
"""

import json
import os
import threading

import pytest

from support import Daemon, poll_for
from test_message_path_faults import Faults
from test_power_cut import LazyMount, fuse_missing

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}"),
]

QUEUE = "shed"
#: Concurrent batch adds, of MESSAGES each: far more than 4 s of work at SLOW.
BATCHES, MESSAGES = 24, 40
#: Every create, rename and fsync under the root waits this long (one FUSE thread: in turn).
SLOW = ("create /root/* +3", "rename /root/* +3", "fsync /root/* +3")


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    """(daemon on a FaultyLazyFS mount, its faults file)."""
    tmp = tmp_path_factory.mktemp("shed")
    backing, mountpoint, run = tmp / "backing", tmp / "mnt", tmp / "run"
    for folder in (backing, mountpoint, run):
        folder.mkdir()
    faults = tmp / "faults"
    lazy = LazyMount(backing, mountpoint, tmp / "lazyfs.log", faults=faults).mount()
    try:
        daemon = Daemon(mountpoint / "root", tmp, workers=1,
                        args=(f"--run-dir={run}", "--actor-timeout=4"),
                        log_file=tmp / "mq.log").start()
        try:
            daemon.wait_ready()
            yield daemon, faults
        finally:
            daemon.cleanup()
    finally:
        lazy.cleanup()


def add_batch(daemon: Daemon, number: int, answers: list) -> None:
    """One batch add of MESSAGES bodies naming the batch; its answer into answers."""
    lines = "".join(json.dumps({"body": f"{number}-{i}"}) + "\n" for i in range(MESSAGES))
    answers[number] = daemon.request("POST", f"/{QUEUE}/messages", lines.encode(),
                                     {"Content-Type": "application/x-ndjson"}, timeout=60)


@pytest.mark.timeout(120)
def test_a_batch_add_refused_for_time_stores_nothing_and_every_stored_one_is_there(mounted):
    daemon, faults = mounted
    answers: list = [None] * (BATCHES + 1)
    add_batch(daemon, BATCHES, answers)  # The queue exists, and the actor measured a batch.
    first = {message["id"] for message in json.loads(answers.pop().body)["messages"]}
    with Faults(faults, *SLOW):
        threads = [threading.Thread(target=add_batch, args=(daemon, n, answers))
                   for n in range(BATCHES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    stored = [resp for resp in answers if resp.status == 201]
    refused = [resp for resp in answers if resp.status == 503]
    assert len(stored) + len(refused) == BATCHES, [(r.status, r.body) for r in answers]
    # Under load every batch may be refused (none stored): what holds is that none was stored
    # for a 503, and each 201's messages are there.
    assert refused, [r.status for r in answers]
    for resp in refused:
        assert json.loads(resp.body)["error"] == "unavailable", resp.body
        assert int(resp.header("Retry-After")) >= 1, resp.headers
    # Answered after every request the save actor took before it: nothing is in hand. A
    # refused try must store nothing either.
    last = poll_for(lambda: (resp := daemon.request("POST", f"/{QUEUE}/messages", b"last")
                             ).status == 201 and resp.header("X-Message-Id"), 60,
                    interval=0.1, what="an add to be stored")
    ids = {message["id"] for resp in stored for message in json.loads(resp.body)["messages"]}
    assert len(ids) == len(stored) * MESSAGES
    names = set(os.listdir(daemon.root / "queues" / QUEUE)) - first - {last}
    assert not names - ids, f"{len(names - ids)} messages stored for adds answered 503"
    assert not ids - names, f"{len(ids - names)} messages answered 201 are missing"
    assert not os.listdir(daemon.root / "new"), os.listdir(daemon.root / "new")
