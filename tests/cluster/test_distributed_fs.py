"""Three daemons on a real distributed file system, each on its own mount (its own client, as
another host would have): GlusterFS (replica 3, its bricks on this host) and JuiceFS (Redis
metadata, a local folder as its object store). Producers and consumers talk to any daemon
while actors, daemons and the file system's servers (a GlusterFS brick, JuiceFS's Redis) are
killed with kill -9 and restarted; after a drain, nothing acknowledged is lost,
nothing unexpected or corrupted arrives, no message goes to two consumers within its timer,
and no request is answered 500 (bench/cluster_run.py runs the same for longer).

The volumes are the session's (conftest.py): each test has a root folder of its own on them.
Needs root and the packages `make test-packages` installs; skipped with one line otherwise.
"""

import os
import time
from pathlib import Path

import pytest

from repo_support import bench_importable

bench_importable()

from cluster import Node  # noqa: E402
from cluster_fs import VOLUMES, GlusterVolume  # noqa: E402
from cluster_run import run, server_errors  # noqa: E402
from group_consumers import groups_across  # noqa: E402
from support import Daemon  # noqa: E402
from total_queue import MUST_BE_ZERO, table  # noqa: E402
from workload import call  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")  # One glusterd per host: one test at a time.
@pytest.mark.timeout(420)
@pytest.mark.parametrize("kind", sorted(VOLUMES))
def test_three_daemons_on_three_mounts_hand_each_message_to_one_consumer_at_a_time(
        tmp_path, kind, shared_volumes):
    volume = shared_volumes.get(kind)
    said = []
    # Faults go on until each of the three was made (every_fault: the nemesis makes them in
    # a random order, each once a round, so one round is what a short run can promise) and
    # more adds than asserted below were acknowledged (a loaded host's mounts are slow), and
    # stop then: the drain after them checks what each fault left, and a longer run only
    # repeats faults (bench/cluster_run.py runs for minutes), while the bricks and clients
    # of the volume burn CPU for every second of traffic. What a fault can break is what is
    # in flight when it strikes, a few messages with two producers and three consumers
    # however many went before; 30 adds say that traffic flowed across the faults (on
    # JuiceFS, whose adds crawl while Redis restarts, waiting for 60 once kept the faults
    # going for 14 s after the third).
    # Movers list delay/ every second (--peer-rescan), which the drain waits for.
    counts = run(volume, seconds=1, workdir=str(tmp_path), timeout=3.0, fault_interval=1.0,
                 faults=("kill actor", "kill daemon", "kill server"), adds_per_second=20,
                 say=said.append, every_fault=True, root_name=tmp_path.name, min_adds=30,
                 peer_rescan=1.0)
    faults, statuses = counts.pop("faults"), counts.pop("statuses")
    counts.pop("client errors")
    errors = "\n".join(counts.pop("error lines"))
    odd = "\n".join(map(str, counts.pop("odd answers")))
    shown = (f"faults {faults}\nanswers {statuses}\n{table(counts)}\n{errors}\n{odd}\n"
             + "\n".join(said))
    assert counts.pop("drained"), f"the cluster did not drain\n{shown}"
    assert counts["acknowledged adds"] >= 25, shown  # A server down stalls adds for seconds.
    assert set(faults) == {"kill actor", "kill daemon", "kill server"}, shown
    for name in MUST_BE_ZERO:
        assert counts[name] == 0, f"{name}\n{shown}"
    assert server_errors(statuses) == 0, f"answered 500\n{shown}"


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")
@pytest.mark.timeout(180)
def test_a_daemon_started_while_its_file_system_is_away_waits_for_it(tmp_path, shared_volumes):
    shared_volumes.get("glusterfs")  # Its glusterd serves this test's volume (conftest.py).
    # One brick: what is waited out is a mount with no server to answer (ENOTCONN), which a
    # volume without copies shows as well, with a third of the brick processes to start.
    with GlusterVolume(str(tmp_path), mounts=1, replica=1) as volume:
        root = os.path.join(volume.mounts[0], "mq")
        os.mkdir(root)
        volume.stop_volume()  # Every brick away: the mount answers ENOTCONN.
        node = Node("daemon", root, str(tmp_path), peers=0, timeout=3.0,
                    extra=(f"--run-dir={tmp_path / 'run'}",)).start()
        try:
            log = Path(node.log_path)
            deadline = time.monotonic() + 60
            while "supervisor.root_unavailable" not in (log.read_text() if log.exists() else ""):
                assert node.running(), "the daemon exited instead of waiting for its file system"
                assert time.monotonic() < deadline, "no supervisor.root_unavailable logged"
                time.sleep(0.2)
            assert node.running() and not node.answers()
            volume.start_volume()
            node.wait_answering(60)
            status, headers, _ = call(node.port, "POST", "/q/messages", b"after the outage")
            assert status == 201
            status, _, body = call(node.port, "GET", "/q/messages")
            assert (status, body) == (200, b"after the outage")
        finally:
            node.stop()


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(VOLUMES))
def test_two_daemons_on_two_mounts_hold_each_fifo_group_between_them(tmp_path, kind,
                                                                    shared_volumes):
    """Consumers of two daemons, each on its own mount of one volume, never have one group's
    messages in flight on both at once, and each group comes in the order sent."""
    volume = shared_volumes.get(kind)
    daemons = {}
    try:
        for n, mount in enumerate(volume.mounts[:2]):
            (tmp_path / f"d{n}").mkdir()
            # One worker pair: the one queue has one fetch actor in each daemon however many
            # there are (by its name), and each pair more is processes to start on the mount.
            daemons[f"d{n}"] = Daemon(Path(mount) / tmp_path.name, tmp_path / f"d{n}", workers=1,
                                      timeout=60, args=("--peers=1", f"--run-dir={tmp_path}/run{n}"))
            daemons[f"d{n}"].start()
        for daemon in daemons.values():  # Started together, each waits on its own mount.
            daemon.wait_ready(60)
        model = groups_across(daemons, per_group=8)
    finally:
        for daemon in daemons.values():
            daemon.cleanup()
    assert not model.broken, model.broken[:5]
    assert model.received == model.sent
