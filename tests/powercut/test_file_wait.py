"""A daemon's save actor overlaps its file calls when they wait on the file system, as measured,
and not on the local disk (actors/overlap.py): lazyfs with every create, rename and fsync under
the root made slow (lazyfs.FaultyLazyFS, "+MS"), against a root on this host's disk, both taking
the same concurrent adds. Either way every add answered 201 is in its queue and new/ is empty.
tests/actors/test_overlap.py shows the batches' semantics when overlapped, in-process."""

import json
import os
import threading

import pytest

from support import Daemon, poll_for
from test_message_path_faults import Faults
from test_power_cut import LazyMount, fuse_missing

pytestmark = pytest.mark.slow

QUEUE = "wait"
#: Concurrent clients, and the adds each sends in turn.
CLIENTS, ADDS = 8, 6
#: Every create, rename and fsync under the root waits this long.
SLOW = ("create /root/* +2", "rename /root/* +2", "fsync /root/* +2")


def file_calls(daemon: Daemon) -> list[dict]:
    """The save actors' save.file_calls events so far: when their file calls began or
    stopped overlapping."""
    with open(daemon.log_file) as f:
        return [event for line in f if '"save.file_calls"' in line
                for event in [json.loads(line)]]


def add_rounds(daemon: Daemon) -> list[str]:
    """CLIENTS threads each adding ADDS messages, one after another; the ids answered 201."""
    ids: list[str] = []

    def client(n: int) -> None:
        for i in range(ADDS):
            resp = daemon.request("POST", f"/{QUEUE}/messages", f"{n}-{i}".encode(), timeout=60)
            assert resp.status == 201, (resp.status, resp.body)
            ids.append(resp.header("X-Message-Id"))
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == CLIENTS * ADDS
    return ids


def stored(daemon: Daemon) -> set[str]:
    """The names in the queue's folder; new/ must be empty."""
    assert not os.listdir(daemon.root / "new"), os.listdir(daemon.root / "new")
    return set(os.listdir(daemon.root / "queues" / QUEUE))


@pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}")
@pytest.mark.timeout(120)
def test_adds_on_a_slow_file_system_overlap_their_file_calls(tmp_path):
    backing, mountpoint, run = tmp_path / "backing", tmp_path / "mnt", tmp_path / "run"
    for folder in (backing, mountpoint, run):
        folder.mkdir()
    faults = tmp_path / "faults"
    lazy = LazyMount(backing, mountpoint, tmp_path / "lazyfs.log", faults=faults).mount()
    try:
        daemon = Daemon(mountpoint / "root", tmp_path, workers=1, args=(f"--run-dir={run}",),
                        log_file=tmp_path / "mq.log").start()
        try:
            daemon.wait_ready()
            with Faults(faults, *SLOW):
                ids: list[str] = []
                poll_for(lambda: ids.extend(add_rounds(daemon)) or file_calls(daemon), 90,
                         interval=0, what="the save actor to overlap its file calls")
            [event] = file_calls(daemon)
            assert event["overlap"] is True and event["wait_per_file_ms"] >= 2, event
            ids.extend(add_rounds(daemon))  # overlapped
            assert stored(daemon) == set(ids)
        finally:
            daemon.cleanup()
    finally:
        lazy.cleanup()


@pytest.mark.timeout(120)
def test_adds_on_the_local_disk_make_their_file_calls_one_at_a_time(tmp_path):
    daemon = Daemon(tmp_path / "root", tmp_path, workers=1, log_file=tmp_path / "mq.log").start()
    try:
        daemon.wait_ready()
        ids = [i for _ in range(4) for i in add_rounds(daemon)]
        assert stored(daemon) == set(ids)
        assert file_calls(daemon) == []
    finally:
        daemon.cleanup()
