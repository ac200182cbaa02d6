"""The supervisor: every process visible by title, the dead restarted, a crash-looping front fatal."""

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from mq.config import Options
from mq.supervisor import tree
from doc_blocks import assert_shows, shown
from support import files_in, poll_for, queue_owned_by, ready_daemon


@pytest.fixture(scope="module")
def calm_mq(tmp_path_factory):
    """One daemon (as the `mq` fixture's) for the tests that stop or restart none of its
    processes."""
    yield from ready_daemon(tmp_path_factory.mktemp("calm"), workers=2, timeout=1)


def test_every_process_of_the_tree_is_visible_in_ps_with_a_clear_title(calm_mq):
    mq = calm_mq
    names = {"front-0", "mover-0", "reaper-0", "save-0", "save-1", "fetch-0", "fetch-1"}
    assert set(mq.children()) == names
    pids = [str(mq.pid)] + [str(p.pid) for p in mq.children().values()]
    ps = subprocess.run(["ps", "-ww", "-o", "args=", "-p", ",".join(pids)], capture_output=True,
                        text=True, check=True).stdout.splitlines()
    root = str(mq.root)
    expected = [f"mq: supervisor [{root}] 127.0.0.1:{mq.port}", f"mq: front [{root}]",
                f"mq: mover actor 0 [{root}]", f"mq: reaper actor 0 [{root}]",
                f"mq: save actor 0 [{root}]", f"mq: save actor 1 [{root}]",
                f"mq: fetch actor 0 [{root}]", f"mq: fetch actor 1 [{root}]"]
    assert sorted(line.strip() for line in ps) == sorted(expected)


def test_health_json_lists_every_child_with_its_pid(calm_mq):
    mq = calm_mq
    def published():
        health = mq.health()
        return {c["name"]: c for c in health["children"]} if health["supervisor_pid"] == mq.pid else None

    children = poll_for(lambda: (h := published()) and all(c["alive"] for c in h.values()) and h, 30)
    assert {name: c["pid"] for name, c in children.items()} == {
        name: p.pid for name, p in mq.children().items()}


@pytest.fixture(scope="module")
def restarted_tree(tmp_path_factory):
    """One daemon (as the `mq` fixture's) for the tests that each kill a different child once
    and check only that child and their own queues."""
    yield from ready_daemon(tmp_path_factory.mktemp("restarted"), workers=2, timeout=1)


@pytest.fixture
def restarted_mq(restarted_tree):
    """That daemon once every actor answers (one a test killed may be starting)."""
    return restarted_tree.wait_ready()


def kill_and_time_restart(mq, name: str) -> float:
    """kill -9 a child; return the seconds until a new process with its title runs."""
    old = mq.kill_child(name)
    killed = time.monotonic()
    mq.wait_for_new_pid(name, old, timeout=2.0)
    return time.monotonic() - killed


def test_killed_mover_is_restarted_within_2_s_and_times_messages_again(restarted_mq):
    mq = restarted_mq
    message_id = mq.add("timed", b"comes back")
    assert mq.fetch("timed").status == 200
    assert kill_and_time_restart(mq, "mover-0") < 2.0
    # The new mover learns the in-flight message from delay/ and releases it after --timeout.
    back = poll_for(lambda: (r := mq.fetch("timed")).status == 200 and r, 30)
    assert back.header("X-Message-Id") == message_id


def test_killed_reaper_is_restarted_within_2_s_and_unlinks_again(restarted_mq):
    mq = restarted_mq
    assert kill_and_time_restart(mq, "reaper-0") < 2.0
    message_id = mq.add("gone", b"delete me")
    assert mq.delete("gone", message_id).status == 204
    poll_for(lambda: files_in(mq.root / "remove") == [], 30, what="the new reaper to unlink")


@pytest.mark.parametrize("index", [0, 1])
def test_killed_fetch_actor_is_restarted_within_2_s_and_serves_its_queues(start_mq, index):
    mq = start_mq(workers=2, timeout=60)  # the first message stays in flight throughout
    queue = queue_owned_by(index, 2)
    first = mq.add(queue, b"one")
    second = mq.add(queue, b"two")
    assert mq.fetch(queue).header("X-Message-Id") == first
    mq.add("orders", b"hello")
    assert kill_and_time_restart(mq, f"fetch-{index}") < 2.0
    # The new actor rebuilds its index from the folder, oldest first.
    resp = poll_for(lambda: (r := mq.fetch(queue)).status == 200 and r, 30)
    assert resp.header("X-Message-Id") == second
    if index == 1:  # docs/OPERATIONS.md, "Logs", shows these lines, its root /tmp/mq-demo.
        log = mq.log_path.read_bytes()[mq.log_offset:].decode()
        assert_shows(shown("OPERATIONS.md", "tests/daemons/test_supervision.py", '{"method"'),
                     log.replace(str(mq.run_dir()), f"/tmp/mq-demo/run/vm-{mq.pid}"))


def test_killed_save_actor_is_restarted_within_2_s_and_adds_again(start_mq):
    mq = start_mq(workers=2, timeout=1, args=("--log-level=debug",))
    old = mq.kill_child("save-0")  # The one that takes every add while it has room.
    killed = time.monotonic()
    new = mq.wait_for_new_pid("save-0", old, timeout=2.0)
    assert time.monotonic() - killed < 2.0
    # Adds go on (to save-1 while save-0 is down), then to the new save-0 once it is connected.
    poll_for(lambda: mq.request("POST", "/again/messages", b"x").status == 201
             and any(e.get("pid") == new for e in mq.events("actor.batch")), 30,
             what="the restarted save actor to add")


def test_health_counts_restarts(restarted_mq):
    mq = restarted_mq
    kill_and_time_restart(mq, "fetch-0")
    poll_for(lambda: {c["name"]: c for c in mq.health()["children"]}["fetch-0"]["restarts"] == 1,
             30, what="health.json to count the restart")


def test_killed_front_is_restarted_and_the_service_answers_again(restarted_mq):
    mq = restarted_mq
    message_id = mq.add("kept", b"survives the front")
    assert kill_and_time_restart(mq, "front-0") < 2.0
    resp = poll_for(lambda: (r := mq.fetch("kept")).status == 200 and r, 10,
                    what="the new front to answer", ignore=(OSError,))
    assert resp.header("X-Message-Id") == message_id


def test_a_front_that_finds_its_port_taken_says_why_and_serves_once_it_is_free(mq):
    taker = socket.socket()
    taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def take_port():
        try:
            taker.bind(("127.0.0.1", mq.port))
            return True
        except OSError:
            return False

    try:
        # The supervisor stopped, so that the port is taken before it restarts the front.
        os.kill(mq.pid, signal.SIGSTOP)
        try:
            mq.kill_child("front-0")
            poll_for(take_port, 10, what="the killed front's port to be free")
            taker.listen()
        finally:
            os.kill(mq.pid, signal.SIGCONT)
        [failed] = poll_for(lambda: mq.events("front.listen_failed"), 10,
                            what="the restarted front to say its port is taken")
        assert (failed["level"], failed["port"], failed["error"]) == ("error", mq.port,
                                                                       "Address already in use")
    finally:
        taker.close()
    poll_for(lambda: mq.fetch("q").status in (204, 404), 30, what="a front to serve again",
             ignore=(OSError,))
    assert "Traceback" not in mq.log_path.read_text()


def test_a_front_that_keeps_crashing_makes_the_supervisor_exit_non_zero(mq):
    children = mq.tree_processes()
    for _ in range(tree.FRONT_MAX_CRASHES - 1):
        old = mq.kill_child("front-0")
        mq.wait_for_new_pid("front-0", old, timeout=10)
    os.kill(mq.pid_of("front-0"), signal.SIGKILL)
    assert mq.proc.wait(30) == 1
    assert mq.events("supervisor.give_up")
    # docs/OPERATIONS.md shows these log lines.
    assert_shows(shown("OPERATIONS.md", "tests/daemons/test_supervision.py", '{"child":"front-0"'),
                 mq.log_path.read_bytes()[mq.log_offset:].decode())
    poll_for(lambda: not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE
                             for c in children + mq.tree_processes()), 10,
             what="every child to be stopped")


def test_sighup_without_a_log_file_restarts_nothing(calm_mq):
    mq = calm_mq
    before = {name: p.pid for name, p in mq.children().items()}
    health = mq.run_dir() / "health.json"
    written = [health.stat().st_mtime_ns]
    mq.proc.send_signal(signal.SIGHUP)

    def rewritten_twice():
        mtime = health.stat().st_mtime_ns
        if mtime != written[-1]:
            written.append(mtime)
        return len(written) >= 3

    # Two health.json rewrites after the signal: a child killed by it would have been noticed.
    poll_for(rewritten_twice, 30, ignore=(FileNotFoundError,))
    assert not mq.events("supervisor.crash")
    assert {name: p.pid for name, p in mq.children().items()} == before
    assert mq.running()


def test_killing_the_supervisor_alone_stops_its_children(start_mq):
    mq = start_mq(workers=1)
    children = mq.tree_processes()
    os.kill(mq.pid, signal.SIGKILL)
    mq.proc.wait(10)
    poll_for(lambda: not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE
                             for c in children), 10, what="the orphans to exit")
    again = start_mq(workers=1)
    assert again.add("after", b"restart")


# -- restart and backoff rules, on real short-lived processes ---------------------------------


@pytest.fixture
def supervisor_tree(tmp_path):
    """A Tree that is never run: its check() is driven by hand on real processes."""
    return tree.Tree(Options(root=str(tmp_path), workers=1), str(tmp_path))


def died(child: tree.Child, started: float) -> None:
    """Give child a real process that has exited (with status 3)."""
    child.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    child.proc.wait()
    child.started = started


def test_a_child_that_keeps_dying_quickly_waits_twice_as_long_each_time_up_to_the_maximum(
        supervisor_tree):
    child = tree.Child("fetch", 0)
    now, waits = 1000.0, []
    for _ in range(9):
        died(child, started=now - 0.5)
        assert supervisor_tree.check(child, now)
        assert child.proc is None
        waits.append(round(child.restart_at - now, 3))
        now += 1
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert child.restarts == 9


def test_a_child_that_ran_stably_is_restarted_after_the_minimum_wait(supervisor_tree):
    child = tree.Child("save", 0)
    child.restarts, child.backoff = 6, tree.MAX_BACKOFF_SECONDS
    died(child, started=1000.0)
    now = 1000.0 + tree.STABLE_SECONDS + 1
    assert supervisor_tree.check(child, now)
    assert child.restart_at - now == pytest.approx(tree.MIN_BACKOFF_SECONDS)
    assert child.backoff == tree.MIN_BACKOFF_SECONDS


def test_a_live_child_is_left_alone(supervisor_tree):
    child = tree.Child("mover", 0)
    child.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert supervisor_tree.check(child, time.monotonic())
        assert child.proc is not None and child.restarts == 0
    finally:
        child.proc.kill()
        child.proc.wait()


def test_the_front_may_crash_4_times_a_minute_but_not_5(supervisor_tree):
    front = tree.Child("front", 0, critical=True)
    now = 5000.0
    for _ in range(tree.FRONT_MAX_CRASHES - 1):
        died(front, started=now - 0.2)
        assert supervisor_tree.check(front, now)
        now += 1
    died(front, started=now - 0.2)
    assert not supervisor_tree.check(front, now)


def test_front_crashes_spread_over_more_than_a_minute_are_tolerated(supervisor_tree):
    front = tree.Child("front", 0, critical=True)
    now = 5000.0
    for _ in range(3 * tree.FRONT_MAX_CRASHES):
        died(front, started=now - 0.2)
        assert supervisor_tree.check(front, now)
        now += tree.FRONT_WINDOW_SECONDS / (tree.FRONT_MAX_CRASHES - 1) + 0.1


def test_a_crashing_actor_never_stops_the_tree(supervisor_tree):
    child = tree.Child("save", 0)
    for n in range(3 * tree.FRONT_MAX_CRASHES):
        died(child, started=100.0 + n - 0.1)
        assert supervisor_tree.check(child, 100.0 + n)
