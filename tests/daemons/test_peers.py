"""Several daemons on one root (--peers): each message handed out once per timer, none lost."""

import threading

import pytest

from support import Daemon, poll_for


def start_peer(tmp_path, name, **kwargs) -> Daemon:
    """A ready daemon on the shared root tmp_path/root, with its own logs in tmp_path/name."""
    return start_peers(tmp_path, name, **kwargs)[0]


def start_peers(tmp_path, *names, rescan: float = 5, **kwargs) -> list[Daemon]:
    """Daemons on the shared root tmp_path/root, started together, each ready when returned;
    rescan: their --peer-rescan."""
    daemons = []
    try:
        for name in names:
            workdir = tmp_path / name
            workdir.mkdir()
            daemons.append(Daemon(tmp_path / "root", workdir, workers=2,
                                  args=("--peers=1", f"--peer-rescan={rescan:g}"),
                                  **kwargs).start())
        for daemon in daemons:
            daemon.wait_ready()
    except BaseException:
        for daemon in daemons:
            daemon.cleanup()
        raise
    return daemons


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two daemons on one root with a 60 s timer, shared by the tests that only add, fetch and
    watch, each on queues of its own."""
    daemons = start_peers(tmp_path_factory.mktemp("pair"), "a", "b", timeout=60)
    yield daemons
    for daemon in daemons:
        daemon.cleanup()


def consume(daemon: Daemon, queue: str, seen: list, stop: threading.Event) -> None:
    """Fetch without deleting until told to stop, recording every id handed out."""
    while not stop.is_set():
        resp = daemon.fetch(queue)
        if resp.status == 200:
            seen.append(resp.header("X-Message-Id"))
        elif resp.status == 204:
            stop.wait(0.05)


def test_two_daemons_on_one_root_hand_out_each_message_once_within_its_timer(pair):
    a, b = pair
    ids = {a.add("shared", b"from a %d" % i) for i in range(60)}
    ids |= {b.add("shared", b"from b %d" % i) for i in range(60)}
    seen: list[str] = []
    stop = threading.Event()
    threads = [threading.Thread(target=consume, args=(d, "shared", seen, stop))
               for d in (a, b, a, b)]
    for t in threads:
        t.start()
    try:
        poll_for(lambda: set(seen) >= ids, 30, what="every message to be handed out")
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    duplicates = {i for i in seen if seen.count(i) > 1}
    assert not duplicates, f"handed out twice within the timer: {sorted(duplicates)[:5]}"
    assert set(seen) == ids


def test_any_daemon_on_a_shared_root_can_die_without_losing_acknowledged_messages(tmp_path):
    # a's mover lists delay/ every second (not 5) to find what b had in flight.
    a, b = start_peers(tmp_path, "a", "b", timeout=2, rescan=1)
    try:
        ids = {a.add("jobs", b"a%d" % i) for i in range(40)}
        ids |= {b.add("jobs", b"b%d" % i) for i in range(40)}
        taken_by_b = [b.fetch("jobs") for _ in range(10)]
        assert all(r.status == 200 for r in taken_by_b)
        b.kill_tree()
        # What b had in flight comes back through a's mover once its timer runs out.
        seen = a.drain("jobs", ids, timeout=30)
        assert set(seen) == ids
    finally:
        a.cleanup()
        b.cleanup()


def test_a_second_daemon_without_peers_on_a_root_in_use_is_refused(tmp_path):
    from test_config_cli import run_mq
    from support import free_port

    a = start_peer(tmp_path, "a")
    try:
        message_id = a.add("kept", b"mine")
        # Alone on a root, a daemon would remove the other's files in new/ as crash leftovers.
        refused = run_mq(f"--root={tmp_path / 'root'}", f"--port={free_port()}", "--peers=0")
        assert refused.returncode == 2, refused
        assert "in use by 1 other daemon" in refused.stderr and "--peers" in refused.stderr
        assert "Traceback" not in refused.stderr
        # The refused daemon took its own folder away again: only a's is left.
        assert [p.name for p in (tmp_path / "root" / "run").iterdir()] == [a.run_dir_name()]
        assert a.fetch("kept").header("X-Message-Id") == message_id
        assert a.stop() == 0, a.stderr()
    finally:
        a.cleanup()
    # A daemon that stopped took its folder out of run/ on its way out: nothing there claims
    # the root, whatever its pid has become since.
    assert not list((tmp_path / "root" / "run").iterdir())
    alone = Daemon(tmp_path / "root", tmp_path, workers=1)
    try:
        alone.start().wait_ready()
        assert alone.add("kept", b"again")
    finally:
        alone.cleanup()


def test_a_daemon_of_another_host_counts_from_the_moment_its_folder_is_made(tmp_path):
    """Before its first health.json a starting daemon of another host is seen by its folder;
    a folder that has shown no sign of life for a while blocks nothing."""
    import os
    import time

    from test_config_cli import run_mq
    from support import create_root, free_port

    from mq.supervisor.run_dirs import LIVE_HEALTH_SECONDS, live_daemons

    root = tmp_path / "root"
    assert create_root(root).returncode == 0
    starting = root / "run" / "another-host.example-4242"
    starting.mkdir(parents=True)
    refused = run_mq(f"--root={root}", f"--port={free_port()}", "--peers=0")
    assert refused.returncode == 2, refused
    assert "in use by 1 other daemon" in refused.stderr and starting.name in refused.stderr
    # Gone quiet (its host died before it wrote anything): it no longer counts.
    quiet = time.time() - LIVE_HEALTH_SECONDS - 5
    os.utime(starting, (quiet, quiet))
    assert live_daemons(str(root)) == []
    # Its health.json, once written, counts as much as the folder does.
    (starting / "health.json").write_text("{}")
    os.utime(starting, (quiet, quiet))
    assert live_daemons(str(root)) == [starting.name]


def test_a_starting_daemon_makes_its_folder_before_it_looks_for_the_others(tmp_path, monkeypatch):
    """Of two daemons started at once, the one that looks last sees the other's folder
    (looking before making its own, each could see none and both run alone)."""
    import os
    import shutil
    import socket

    from mq.config import read_command_line
    from mq.supervisor import main as supervisor

    root = tmp_path / "root"
    options, _ = read_command_line([f"--root={root}", "--peers=0"])
    own = root / "run" / f"{socket.gethostname()}-{os.getpid()}"
    looked = []

    def live_daemons(path):
        looked.append(own.is_dir())
        return real(path)

    real = supervisor.live_daemons
    monkeypatch.setattr(supervisor, "live_daemons", live_daemons)
    prepared = supervisor.prepare(options, options.sync)
    try:
        assert looked == [True], "looked for the others before its own folder was there"
    finally:
        shutil.rmtree(prepared[3])


def test_a_run_folder_whose_pid_now_belongs_to_another_program_does_not_block_the_root(tmp_path):
    import socket
    import subprocess

    from mq.store import Store

    root = tmp_path / "root"
    Store(str(root)).init()
    # As after a reboot: a supervisor's run folder left behind, its pid now another program's.
    other = subprocess.Popen(["sleep", "60"])
    try:
        (root / "run" / f"{socket.gethostname()}-{other.pid}").mkdir()
        alone = Daemon(root, tmp_path, workers=1).start().wait_ready()
        try:
            assert alone.add("free", b"started")
            # The stale folder is cleaned, so nothing (the pipeline's notifications) looks for
            # sockets in it.
            assert not (root / "run" / f"{socket.gethostname()}-{other.pid}").exists()
        finally:
            alone.stop()
    finally:
        other.kill()
        other.wait()


#: Longest time, in seconds, before a daemon's index holds a message added through a peer:
#: the notice is read every 0.5 s, after a batch or a 0.5 s poll timeout (docs/CLUSTER.md).
VISIBILITY_BOUND_SECONDS = 1.0


def test_a_daemon_sees_messages_added_through_a_peer_within_the_bound(pair):
    import time

    a, b = pair
    b.add("seen", b"through b")
    # b has indexed the queue and it is not empty, so b lists the folder again only when
    # told to: nothing but a's notice can bring a's adds into b's index.
    assert b.request("GET", "/seen").json()["ready"] == 1
    worst = 0.0
    for n in range(2, 7):
        a.add("seen", b"through a %d" % n)
        added = time.monotonic()
        poll_for(lambda: b.request("GET", "/seen").json()["ready"] == n, 5,
                 what=f"b to index a's add number {n}")
        worst = max(worst, time.monotonic() - added)
    # Twice the bound: the machine running the suite is shared and loaded.
    assert worst <= 2 * VISIBILITY_BOUND_SECONDS, f"slowest add seen after {worst:.2f} s"
