"""GET /_mq/stats and `mqctl status` against a real daemon: every depth and counter follows the
messages through their states, and queues nobody fetched from yet are counted too."""

import json
import os
import re
import subprocess
import time

import pytest

from mq.actors.counters import WINDOW_SECONDS, Counters
from mq.client import Client
from mq.errors import Unavailable
from mq.flush_times import FlushTimes
from mq.http.figures import EVENTS, merge
from mq.local import LocalClient
from cli_support import run_ctl
from support import command, poll_for, ready_daemon

#: Messages written straight into the root before the daemon starts.
WRITTEN_EARLIER = 3


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon; its root already holds a queue no fetch actor has indexed."""
    workdir = tmp_path_factory.mktemp("stats")
    local = LocalClient(str(workdir / "root"), create_root=True)
    for n in range(WRITTEN_EARLIER):
        local.put("early", f"old {n}")
    local.close()
    yield from ready_daemon(workdir, workers=2, timeout=30)


@pytest.fixture(scope="module")
def client(daemon):
    """A client of the daemon."""
    with Client(f"http://127.0.0.1:{daemon.port}") as c:
        yield c


def stats(daemon) -> dict:
    """The statistics as the daemon answers them."""
    resp = daemon.request("GET", "/_mq/stats")
    assert resp.status == 200, resp.body
    return resp.json()


def queue_reaches(daemon, queue: str, **want):
    """Poll the stats until the queue's figures (depths, or totals as totals={...}) match."""
    def matches():
        figures = stats(daemon)["queues"].get(queue)
        if figures is None:
            return None
        totals = want.get("totals", {})
        depths = {k: v for k, v in want.items() if k != "totals"}
        ok = all(figures[k] == v for k, v in depths.items()) and \
            all(figures["totals"][k] == v for k, v in totals.items())
        return figures if ok else None
    return poll_for(matches, 10, what=f"stats of {queue} to be {want}")


def test_a_queue_written_before_the_start_is_counted_without_any_fetch(daemon):
    figures = queue_reaches(daemon, "early", ready=WRITTEN_EARLIER, delayed=0, in_flight=0)
    # Its ids were made when the messages were written, before the daemon started.
    started = json.loads((daemon.run_dir() / "health.json").read_text())["started"]
    assert figures["oldest_ready_age_s"] >= time.time() - started - 1
    assert figures["totals"] == {event: 0 for event in EVENTS}


def test_depths_and_counters_follow_a_message_through_every_state(daemon, client):
    for n in range(4):
        client.put("orders", f"m{n}")
    client.put("orders", "later", delay=60)
    first, second = client.get("orders"), client.get("orders")
    queue_reaches(daemon, "orders", ready=2, delayed=1, in_flight=2,
                  totals={"adds": 5, "fetches": 2})
    client.ack(first)
    client.nack(second)
    queue_reaches(daemon, "orders", ready=3, delayed=1, in_flight=0,
                  totals={"acks": 1, "nacks": 1, "redeliveries": 0})
    again = client.get("orders")
    assert again.id == second.id
    queue_reaches(daemon, "orders", ready=2, in_flight=1, totals={"fetches": 3, "redeliveries": 1})
    client.revoke("orders", again.id)  # DELETE without a receipt: counted as an ack
    figures = queue_reaches(daemon, "orders", ready=2, delayed=1, in_flight=0, totals={"acks": 2})
    assert figures["rates"]["adds"] == pytest.approx(5 / WINDOW_SECONDS, abs=0.002)
    assert figures["rates"]["fetches"] == pytest.approx(3 / WINDOW_SECONDS, abs=0.002)


def test_dead_letters_from_a_nack_and_from_a_timer_are_counted(daemon, client):
    client.set_properties("jobs", retry=0)
    client.put("jobs", "nacked")
    client.nack(client.get("jobs"))
    figures = queue_reaches(daemon, "jobs", ready=0, dead=1, totals={"dead_letters": 1, "nacks": 1})
    assert figures["dead_letter_queue"] == "jobs.dead"
    queue_reaches(daemon, "jobs.dead", ready=1)
    # The mover's dead letters: the message's timer runs out after its only delivery.
    client.set_properties("jobs", timeout=0.2)
    client.put("jobs", "forgotten")
    client.get("jobs")
    queue_reaches(daemon, "jobs", in_flight=0, dead=2, totals={"dead_letters": 2})


def test_purge_and_delete_empty_every_depth(daemon, client):
    stats(daemon)  # The fetch actors list queues/ now, and not again for 5 s.
    client.create_queue("purged")
    # Shown at once, not at the fetch actor's next listing of queues/.
    assert stats(daemon)["queues"]["purged"]["ready"] == 0
    client.put("purged", "a")
    client.put("purged", "b")
    client.put("purged", "c", delay=60)
    client.get("purged")
    queue_reaches(daemon, "purged", ready=1, delayed=1, in_flight=1)
    assert client.purge("purged") == 3
    assert stats(daemon)["queues"]["purged"]["ready"] == 0
    queue_reaches(daemon, "purged", ready=0, delayed=0, in_flight=0)
    client.delete_queue("purged")
    poll_for(lambda: "purged" not in stats(daemon)["queues"], 10, what="the deleted queue to go")


def test_every_actor_answers(daemon):
    figures = stats(daemon)
    assert figures["complete"] is True
    assert figures["actors"] == {name: "ok" for name in
                                 ("save-0", "save-1", "fetch-0", "fetch-1", "mover-0")}


def test_mqctl_status_prints_the_processes_the_root_and_the_queues(daemon, client):
    client.put("status-q", "x")
    queue_reaches(daemon, "status-q", ready=1)
    url = f"http://127.0.0.1:{daemon.port}"
    run = run_ctl(["--url", url, "status"])
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    assert lines[0] == f"mq at {url}: ok"
    assert f"root {daemon.root}, supervisor pid {daemon.pid}, up " in lines[1]
    rows = {line.split()[0]: line.split() for line in lines[2:] if line.strip()}
    for name in ("mover-0", "reaper-0", "fetch-0", "fetch-1", "save-0", "save-1", "front-0"):
        assert rows[name][1] == str(daemon.children()[name].pid)
    assert rows["QUEUE"][:3] == ["QUEUE", "READY", "DELAYED"]
    assert rows["status-q"][:5] == ["status-q", "1", "0", "0", "0"]
    as_json = run_ctl(["--url", url, "status", "--json"])
    assert json.loads(as_json.stdout)["stats"]["queues"]["status-q"]["ready"] == 1


def test_mqctl_status_shows_the_roots_free_space_and_each_queues_bytes(daemon, client):
    client.put("status-bytes", "y" * 300)
    size = queue_reaches(daemon, "status-bytes", ready=1)["bytes"]
    assert size > 300  # The header counts too.
    url = f"http://127.0.0.1:{daemon.port}"
    run = run_ctl(["--url", url, "status"])
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    found = re.fullmatch(r"root's file system: ([0-9.]+) (B|KiB|MiB|GiB|TiB) free, (\d+) inodes free",
                         lines[2])
    assert found, lines[2]
    st = os.statvfs(daemon.root)
    # Other tests write on the same file system meanwhile: close, not equal.
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[found[2]]
    assert abs(float(found[1]) * scale - st.f_bavail * st.f_frsize) < 64 * 2**20 + scale / 10
    assert abs(int(found[3]) - st.f_favail) < 10_000
    heading = next(line for line in lines if line.startswith("QUEUE "))
    row = next(line for line in lines if line.startswith("status-bytes "))
    start = heading.index("BYTES")
    assert row[start:].split("  ")[0] == f"{size} B"


def test_the_statistics_carry_the_roots_free_bytes_and_inodes(daemon):
    root = stats(daemon)["root"]
    st = os.statvfs(daemon.root)
    assert abs(root["free_bytes"] - st.f_bavail * st.f_frsize) < 64 * 2**20
    assert abs(root["free_inodes"] - st.f_favail) < 10_000


def test_mqctl_status_without_a_daemon_says_so_and_exits_4(tmp_path):
    # The installed console script itself, not main() in this process: its exit status.
    run = subprocess.run([command("mqctl"), "--url", "http://127.0.0.1:9", "--retries", "0",
                          "status"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 4
    assert run.stderr.startswith("mqctl: ") and len(run.stderr.splitlines()) == 1


def test_merge_marks_the_statistics_incomplete_when_an_actor_did_not_answer():
    answers = [{"queues": {"q": {"totals": {"adds": 2}, "rates": {"adds": 0.033}}},
                "flush": FlushTimes().snapshot()},
               Unavailable("fetch actor 0 is not running; it is being restarted"),
               {"queues": {"q": {"delayed": 1, "in_flight": 0, "totals": {}, "rates": {}}}}]
    merged = merge(["save-0", "fetch-0", "mover-0"], answers, 1.0)
    assert merged["complete"] is False
    assert merged["actors"]["fetch-0"].startswith("fetch actor 0 is not running")
    # Without every fetch actor's list of queues, queues the others count are kept.
    assert merged["queues"]["q"]["totals"]["adds"] == 2 and merged["queues"]["q"]["delayed"] == 1
    # Flush times are per actor, of those that answered with them.
    assert list(merged["flush"]) == ["save-0"] and merged["flush"]["save-0"]["count"] == 0


def test_flush_times_fill_cumulative_buckets_whose_bounds_are_inclusive():
    times = FlushTimes()
    for seconds in (0.001, 0.0011, 20.0):
        times.observe(seconds)
    snapshot = times.snapshot()
    buckets = {bound: n for bound, n in snapshot["buckets"]}
    chosen = (0.0005, 0.001, 0.0025, 10.0, None)
    assert [buckets[bound] for bound in chosen] == [0, 1, 2, 2, 3]
    assert snapshot["count"] == 3 and snapshot["sum_s"] == pytest.approx(20.0021)


def test_rates_count_only_the_last_minute():
    now = [1000.0]
    counters = Counters(clock=lambda: now[0])
    counters.count("q", "adds", 30)
    now[0] += WINDOW_SECONDS - 1
    counters.count("q", "adds", 30)
    assert counters.rate("q", "adds") == pytest.approx(60 / WINDOW_SECONDS)
    now[0] += 1
    assert counters.rate("q", "adds") == pytest.approx(30 / WINDOW_SECONDS)
    assert counters.snapshot()["q"]["totals"] == {"adds": 60}


def test_mqctl_status_says_so_when_the_root_cannot_be_read_and_sizes_read_short():
    from mq.ctl.status import render, size
    health = {"status": "ok", "down": [], "root": "/r", "supervisor_pid": 1, "children": []}
    stats = {"actors": {}, "queues": {}, "root": None}
    assert render("http://x", health, stats, 0.0).splitlines()[2] == \
        "root's file system: free space unknown"
    assert [size(n) for n in (0, 1023, 1024, 1536, 2**20, 5 * 2**30, 2**41)] == \
        ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "1.0 MiB", "5.0 GiB", "2.0 TiB"]
