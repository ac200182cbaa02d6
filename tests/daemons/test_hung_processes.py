"""A process that stops answering without exiting (here: stopped with SIGSTOP, which also
stands for a busy loop or a deadlock: its loop stops turning) is killed and replaced once it
has gone --hang-timeout without a heartbeat; a shorter pause, or a pause of the whole daemon,
kills nothing."""

import os
import signal
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mq.config import Options
from mq.errors import Invalid
from mq.supervisor import heartbeat, tree
from doc_blocks import assert_shows, shown
from support import poll_for, queue_owned_by


def scrape(mq) -> dict:
    """{(sample name, labels as a tuple): value} of one GET /metrics."""
    resp = mq.request("GET", "/metrics")
    assert resp.status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.body.decode())
            for s in family.samples}


def resume(pid: int) -> None:
    """SIGCONT, when the process is still there."""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def health_rewritten(mq, times: int = 2) -> None:
    """Wait until the supervisor rewrote health.json `times` times (it has run that long)."""
    path = mq.run_dir() / "health.json"
    seen = [path.stat().st_mtime_ns]

    def rewritten():
        mtime = path.stat().st_mtime_ns
        if mtime != seen[-1]:
            seen.append(mtime)
        return len(seen) > times

    poll_for(rewritten, 10, ignore=(FileNotFoundError,), what="health.json to be rewritten")


@pytest.mark.parametrize("name", ["fetch-0", "front-0"])
def test_a_stopped_process_is_killed_and_replaced_after_the_hang_timeout(start_mq, name):
    mq = start_mq(workers=2, args=("--hang-timeout=4",))
    queue = queue_owned_by(0, 2)
    added = mq.add(queue, b"served again")
    old = mq.pid_of(name)
    os.kill(old, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        new = mq.wait_for_new_pid(name, old, timeout=20)
    finally:
        resume(old)
    # Not before its deadline, which counts from the child's last beat: every child beats at
    # least every 0.5 s (an idle actor's loop turns that often), so up to that before the stop.
    assert time.monotonic() - stopped >= 4.0 - heartbeat.FRONT_BEAT_SECONDS
    line = mq.wait_for_events("supervisor.hung", child=name)[0]
    assert (line["role"], line["child_pid"], line["level"]) == (name.split("-")[0], old, "error")
    assert line["silent_s"] >= 4.0  # Rounded to the millisecond: just past 4 s reads 4.0.
    resp = poll_for(lambda: (r := mq.fetch(queue)).status == 200 and r, 15, ignore=(OSError,),
                    what=f"the new {name} to serve the queue")
    assert resp.header("X-Message-Id") == added
    labels = (("process", name),)
    samples = poll_for(lambda: (s := scrape(mq)).get(("mq_process_hung_restarts_total", labels))
                       and s, 10, interval=0.1, what="the metrics to count the hung restart")
    assert samples[("mq_process_hung_restarts_total", labels)] == 1
    assert samples[("mq_process_restarts_total", labels)] == 1
    assert [c["hung"] for c in mq.health()["children"] if c["name"] == name] == [1]
    assert new == mq.pid_of(name)
    assert [e["child"] for e in mq.events("supervisor.hung")] == [name]
    if name == "fetch-0":  # docs/OPERATIONS.md shows these log lines.
        assert_shows(shown("OPERATIONS.md", "tests/daemons/test_hung_processes.py", "{"),
                     mq.log_path.read_bytes()[mq.log_offset:].decode())


def test_a_pause_shorter_than_the_hang_timeout_kills_nothing(start_mq):
    mq = start_mq(workers=1, args=("--hang-timeout=6",))
    old = mq.pid_of("fetch-0")
    os.kill(old, signal.SIGSTOP)
    try:
        # The pause itself: 1.5 s of the 6 s deadline, then the actor runs again; the rest
        # is room for a loaded machine to let it take its next turn.
        time.sleep(1.5)
    finally:
        resume(old)
    assert mq.fetch("after-the-pause").status == 404
    health_rewritten(mq)
    assert mq.pid_of("fetch-0") == old
    assert not mq.events("supervisor.hung")


def test_a_pause_of_the_whole_daemon_longer_than_the_hang_timeout_kills_nothing(start_mq):
    # A stalled machine (or SIGSTOP of the process group) stops the supervisor too: the
    # children's silence then is not theirs.
    mq = start_mq(workers=1, args=("--hang-timeout=3",))
    before = {name: p.pid for name, p in mq.children().items()}
    os.killpg(mq.pid, signal.SIGSTOP)
    try:
        time.sleep(4.0)  # The pause itself, longer than the deadline.
    finally:
        os.killpg(mq.pid, signal.SIGCONT)
    poll_for(lambda: mq.fetch("after-the-pause").status == 404, 10, ignore=(OSError,))
    health_rewritten(mq)
    assert {name: p.pid for name, p in mq.children().items()} == before
    assert not mq.events("supervisor.hung")


def test_hang_timeout_zero_turns_the_check_off_and_short_ones_are_refused():
    assert Options(hang_timeout=0).check().hang_timeout == 0
    for bad in (1.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(Invalid, match="--hang-timeout"):
            Options(hang_timeout=bad).check()


# -- the rule, on a real process whose heartbeat is set by hand -------------------------------


def sleeper() -> subprocess.Popen:
    """A real live process that never beats."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_child_silent_past_the_deadline_is_killed_then_restarted_like_a_dead_one(tmp_path):
    supervisor = tree.Tree(Options(root=str(tmp_path), workers=1, hang_timeout=5), str(tmp_path))
    child = next(c for c in supervisor.children if c.name == "save-0")
    child.proc, child.started = sleeper(), 100.0
    try:
        child.slot.stamp(100.0)
        supervisor.check_answering(child, 104.9)
        assert not child.killed_hung and child.proc.poll() is None and child.hung == 0
        supervisor.check_answering(child, 105.1)
        assert child.proc.wait(10) == -signal.SIGKILL
        assert child.hung == 0  # Counted with the restart, when check() sees it dead.
        assert supervisor.check(child, 105.2)
        assert (child.proc, child.restarts, child.hung) == (None, 1, 1)
        assert child.restart_at is not None
        assert {r["name"]: r["hung"] for r in supervisor.health()}["save-0"] == 1
    finally:
        if child.proc is not None:
            child.proc.kill()
            child.proc.wait()


def test_a_child_that_hangs_again_at_once_gets_twice_the_time_until_it_runs(tmp_path):
    supervisor = tree.Tree(Options(root=str(tmp_path), workers=1, hang_timeout=5), str(tmp_path))
    child = next(c for c in supervisor.children if c.name == "fetch-0")
    deadlines, now = [], 1000.0
    for _ in range(6):
        child.proc, child.started = sleeper(), now
        child.slot.stamp(now)
        silent = 0.0
        while not child.killed_hung:  # The deadline it gets, to a tenth of a second.
            silent += 0.1
            supervisor.check_answering(child, now + silent)
        assert child.proc.wait(10) == -signal.SIGKILL
        deadlines.append(round(silent))
        assert supervisor.check(child, now + silent)
        now += silent + 1
    assert deadlines == [5, 10, 20, 40, 80, 80]
    # A child that beats after its deadline would have passed runs normally: back to 5 s.
    child.proc, child.started = sleeper(), now
    try:
        child.slot.stamp(now + 170)
        supervisor.check_answering(child, now + 170)
        assert child.proc.poll() is None and child.hang_streak == 0
    finally:
        child.proc.kill()
        child.proc.wait()


def test_with_hang_timeout_zero_a_silent_child_is_left_alone(tmp_path):
    supervisor = tree.Tree(Options(root=str(tmp_path), workers=1, hang_timeout=0), str(tmp_path))
    child = supervisor.children[0]
    child.proc = sleeper()
    try:
        child.slot.stamp(0.0)
        supervisor.check_answering(child, 10_000.0)
        assert child.proc.poll() is None and child.hung == 0
    finally:
        child.proc.kill()
        child.proc.wait()


def test_a_beating_child_is_never_read_as_silent(tmp_path):
    # A child's stamps and the supervisor's reads race, across processes; a read between a
    # store's halves (struct.pack_into zeroes the bytes first) saw 0.0, silent since boot, and
    # the supervisor killed a child that was beating.
    supervisor = tree.Tree(Options(root=str(tmp_path), workers=1, hang_timeout=5), str(tmp_path))
    child = next(c for c in supervisor.children if c.name == "fetch-0")
    stop = supervisor.heartbeats.slot(len(supervisor.children) - 1)  # A front's: unused here.
    started = time.monotonic()
    child.slot.stamp(started)
    stop.stamp(0.0)
    pid = os.fork()
    if pid == 0:  # The child beats as fast as it can, as a busy actor's loop does.
        try:
            heartbeat.attach(child.slot)
            while not stop.read():
                heartbeat.beat()
        finally:
            os._exit(0)
    try:
        poll_for(lambda: child.slot.read() > started, 10, what="the child to beat")
        # Two seconds of reads (millions) while it beats: a torn read showed up in thousands.
        reads, low, until = 0, [], time.monotonic() + 2.0
        while time.monotonic() < until and not low:
            for _ in range(10_000):
                if (seen := child.slot.read()) < started:
                    low.append(seen)
            reads += 10_000
        assert not low, f"{len(low)} of {reads} reads older than the child's start: {low[:3]}"
    finally:
        stop.stamp(1.0)
        os.waitpid(pid, 0)
