"""Durability with real kill -9, full disks and injected I/O errors."""

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter

import psutil
import pytest

from mq.store import Store
from support import (Daemon, body_is_whole, checked_body, files_in, poll_for, queue_owned_by,
                     ready_daemon, unix_socket_unread_bytes)

#: A request that takes longer than this counts as hung (the daemon's --actor-timeout is 5).
CLIENT_TIMEOUT = 10.0


class Traffic:
    """Threads adding and fetching against one daemon, recording every answer they get."""

    def __init__(self, daemon: Daemon, queues: list[str], sizes=(0, 100, 5_000, 60_000)):
        self.daemon = daemon
        self.queues = queues
        self.sizes = sizes
        self.acked: dict[str, bytes] = {}      # id -> body, for every 201
        self.sent: set[bytes] = set()          # every body ever posted
        self.fetched: dict[str, bytes] = {}    # id -> body, for every 200
        self.statuses: Counter = Counter()
        self.problems: list[str] = []
        self.slowest = 0.0
        self.stop = threading.Event()
        #: Set before the whole tree is killed: from then on a refused or cut connection is expected.
        self.tree_down = threading.Event()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def call(self, method, path, body=None):
        """One request; a client error or time-out is recorded as a problem, never raised."""
        started = time.monotonic()
        try:
            resp = self.daemon.request(method, path, body, timeout=CLIENT_TIMEOUT)
        except OSError as err:
            if not self.stop.is_set() and not self.tree_down.is_set():
                self.problems.append(f"{method} {path} raised {err!r} after "
                                     f"{time.monotonic() - started:.1f} s")
            if self.tree_down.is_set():
                self.stop.wait(0.05)
            return None
        with self.lock:
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.statuses[(method, resp.status)] += 1
        if resp.status == 503 and not (resp.header("Retry-After") or "").isdigit():
            self.problems.append(f"{method} {path}: 503 without an integer Retry-After")
        if resp.status >= 400 and not (resp.header("Content-Type") or "").startswith("application/json"):
            self.problems.append(f"{method} {path}: {resp.status} without a JSON body")
        return resp

    def adder(self, n: int) -> None:
        seq = 0
        while not self.stop.is_set():
            queue = self.queues[seq % len(self.queues)]
            body = checked_body(n * 1_000_000 + seq, self.sizes[seq % len(self.sizes)])
            seq += 1
            self.sent.add(body)
            resp = self.call("POST", f"/{queue}/messages", body)
            if resp is None:
                continue
            if resp.status == 201:
                self.acked[resp.header("X-Message-Id")] = body
            elif resp.status != 503:
                self.problems.append(f"add answered {resp.status}: {resp.body[:200]!r}")

    def fetcher(self, queue: str, delete: bool) -> None:
        while not self.stop.is_set():
            resp = self.call("GET", f"/{queue}/messages")
            if resp is None or resp.status == 503:
                continue
            if resp.status == 204:
                self.stop.wait(0.01)
                continue
            if resp.status != 200:
                self.problems.append(f"fetch answered {resp.status}: {resp.body[:200]!r}")
                continue
            message_id = resp.header("X-Message-Id")
            if not body_is_whole(resp.body) or resp.body not in self.sent:
                self.problems.append(f"fetch of {message_id} returned a partial or foreign body")
            self.fetched[message_id] = resp.body
            if delete:
                done = self.call("DELETE", f"/{queue}/messages/{message_id}")
                if done is not None and done.status not in (204, 404, 503):
                    self.problems.append(f"delete answered {done.status}")

    def start(self, adders: int = 3, fetchers: int = 0, delete: bool = True) -> "Traffic":
        for queue in self.queues:
            assert self.daemon.request("PUT", f"/{queue}").status in (200, 201)
        self.threads = [threading.Thread(target=self.adder, args=(n,)) for n in range(adders)]
        self.threads += [threading.Thread(target=self.fetcher, args=(self.queues[n % len(self.queues)], delete))
                         for n in range(fetchers)]
        for thread in self.threads:
            thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(CLIENT_TIMEOUT + 5)
        assert not any(t.is_alive() for t in self.threads), "a client thread hung"


def drain_all(daemon: Daemon, queues: list[str], want: set[str], timeout: float) -> dict[str, bytes]:
    """Fetch and delete from every queue until every wanted id was seen; return id -> body."""
    seen: dict[str, bytes] = {}
    answers: Counter = Counter()
    last: dict = {}

    def step():
        for queue in queues:
            while (resp := daemon.fetch(queue)).status == 200:
                seen[resp.header("X-Message-Id")] = resp.body
                deleted = daemon.delete(queue, resp.header("X-Message-Id"))
                answers[("DELETE", deleted.status)] += 1
            answers[("GET", resp.status)] += 1
            last[resp.status] = resp.body[:200]
            # 503 while a restarted actor is not reachable yet: retry, as its Retry-After says.
            assert resp.status != 503 or resp.header("Retry-After"), resp.body
        return want <= set(seen)

    try:
        poll_for(step, timeout, interval=0.05, what="every acknowledged message")
    except AssertionError:
        missing = want - set(seen)
        raise AssertionError(
            f"{len(missing)} of {len(want)} acknowledged messages never came back, e.g. "
            f"{sorted(missing)[:3]}; the drain got {dict(answers)}, last bodies {last}; "
            f"folders: { {f: len(files_in(daemon.root / f)) for f in ('new', 'delay', 'remove')} }, "
            f"queues: { {q: len(files_in(daemon.root / 'queues' / q)) for q in queues} }") from None
    assert set(s for _, s in answers) <= {200, 204, 404, 503}, answers
    return seen


# -- (a) and (c): kill -9 of the whole tree ------------------------------------------------


def test_acknowledged_add_survives_kill_9_of_the_tree_byte_for_byte(start_mq, tmp_path):
    queues = ["orders", "audit"]
    mq = start_mq(workers=2, timeout=30, args=("--actor-timeout=5",))
    traffic = Traffic(mq, queues).start(adders=4)
    poll_for(lambda: len(traffic.acked) >= 150, 30, what="150 acknowledged adds")
    traffic.tree_down.set()
    mq.kill_tree()
    traffic.finish()
    assert not traffic.problems, traffic.problems[:5]

    again = start_mq(workers=2, timeout=30, port=None)
    assert files_in(again.root / "new") == []
    seen = drain_all(again, queues, set(traffic.acked), timeout=30)
    for message_id, body in traffic.acked.items():
        assert seen[message_id] == body, f"{message_id} changed"
    for message_id, body in seen.items():
        assert body_is_whole(body) and body in traffic.sent, f"{message_id} is partial or foreign"


def test_no_fetch_returns_a_partial_body_while_large_adds_are_cut_by_kill_9(start_mq):
    queues = ["big"]
    mq = start_mq(workers=2, timeout=2, args=("--actor-timeout=5",))
    traffic = Traffic(mq, queues, sizes=(1_000_000, 300_000, 2_000_000, 1)).start(
        adders=3, fetchers=2, delete=True)
    poll_for(lambda: len(traffic.fetched) >= 10 and len(traffic.acked) >= 20, 40,
             what="large messages to be added and fetched")
    traffic.tree_down.set()
    mq.kill_tree()
    traffic.finish()
    assert not traffic.problems, traffic.problems[:5]

    again = start_mq(workers=2, timeout=2)
    seen = drain_all(again, queues, set(traffic.acked) - set(traffic.fetched), timeout=30)
    for message_id, body in {**traffic.fetched, **seen}.items():
        assert body_is_whole(body), f"{message_id}: partial body of {len(body)} bytes"
        assert body in traffic.sent
    for message_id in set(traffic.acked) & set(seen):
        assert seen[message_id] == traffic.acked[message_id]


# -- (b): kill -9 of a save and a fetch actor during a burst ---------------------------------


def test_killing_a_save_and_a_fetch_actor_mid_burst_loses_nothing_and_hangs_nothing(start_mq):
    mq = start_mq(workers=2, timeout=1, args=("--actor-timeout=5",))
    queue = queue_owned_by(1, 2, prefix="burst")
    traffic = Traffic(mq, [queue], sizes=(10, 1000, 20_000)).start(adders=3, fetchers=2)
    poll_for(lambda: len(traffic.acked) >= 100 and len(traffic.fetched) >= 30, 30,
             what="the burst to get going")

    restarts = {}
    for name in ("save-0", "fetch-1"):
        old = mq.kill_child(name)
        killed_at = time.monotonic()
        mq.wait_for_new_pid(name, old, timeout=2.0)
        restarts[name] = time.monotonic() - killed_at
    acked_before = len(traffic.acked)
    poll_for(lambda: len(traffic.acked) > acked_before + 50, 20,
             what="adds to be acknowledged again after the restarts")
    traffic.finish()

    assert not traffic.problems, traffic.problems[:5]
    assert set(s for _, s in traffic.statuses) <= {200, 201, 204, 404, 503}, traffic.statuses
    assert traffic.slowest < CLIENT_TIMEOUT
    seen = drain_all(mq, [queue], set(traffic.acked) - set(traffic.fetched), timeout=15)
    everything = {**traffic.fetched, **seen}
    for message_id, body in traffic.acked.items():
        assert everything[message_id] == body
    assert all(t < 2.0 for t in restarts.values()), restarts


@pytest.fixture(scope="module")
def fetch_killed_tree(tmp_path_factory):
    """A daemon as the `mq` fixture's, for the tests that each kill fetch-0 once, on queues
    of their own."""
    yield from ready_daemon(tmp_path_factory.mktemp("fetch-killed"), workers=2, timeout=1)


@pytest.fixture
def fetch_killed_mq(fetch_killed_tree):
    """That daemon once every actor answers (the other test's fetch-0 may be starting)."""
    return fetch_killed_tree.wait_ready()


def test_a_message_hidden_by_a_fetch_actor_killed_before_it_told_the_mover_comes_back(
        fetch_killed_mq):
    mq = fetch_killed_mq
    queue = queue_owned_by(0, 2, prefix="hidden")
    message_id = mq.add(queue, b"claimed, then the claimer died")
    # The first half of a fetch, as the fetch actor does it: rename into delay/ with a due time.
    assert Store(str(mq.root)).states.claim(queue, message_id, time.time() + 0.5) is not None
    # ...and the fetch actor dies before its notification to the mover goes out.
    old = mq.kill_child("fetch-0")
    mq.wait_for_new_pid("fetch-0", old)
    back = poll_for(lambda: (r := mq.fetch(queue)).status == 200 and r, 10,
                    what="the hidden message to come back after its timeout")
    assert back.header("X-Message-Id") == message_id


@pytest.fixture(scope="module")
def patient_tree(tmp_path_factory):
    """One worker pair that the front waits a minute for, for the tests that each kill a
    different actor once."""
    yield from ready_daemon(tmp_path_factory.mktemp("patient"), workers=1, timeout=1,
                            args=("--actor-timeout=60",))


@pytest.fixture
def patient_mq(patient_tree):
    """That daemon once every actor answers (one a test killed may be starting)."""
    return patient_tree.wait_ready()


@pytest.mark.parametrize("name, method, body", [("fetch-0", "GET", None), ("save-0", "POST", b"y")])
def test_a_request_waiting_on_an_actor_that_is_killed_gets_503_with_retry_after_at_once(
        patient_mq, name, method, body):
    mq = patient_mq
    mq.add("q", b"x")
    actor = mq.children()[name]
    actor.suspend()  # the request below waits on it
    result = {}

    def call():
        try:
            result["resp"] = mq.request(method, "/q/messages", body, timeout=CLIENT_TIMEOUT)
        except OSError as err:
            result["error"] = err
        result["done"] = time.monotonic()

    thread = threading.Thread(target=call)
    thread.start()
    try:
        poll_for(lambda: _front_has_request_in_flight(mq), 30, what="the front to take the request")
    finally:
        actor.kill()
    killed = time.monotonic()
    thread.join(CLIENT_TIMEOUT + 5)
    assert "resp" in result, f"the request hung: {result.get('error')!r}"
    resp = result["resp"]
    assert resp.status == 503, resp.body
    assert resp.header("Retry-After").isdigit()
    assert resp.json()["error"] == "unavailable"
    assert result["done"] - killed < 20, "the 503 waited for --actor-timeout instead of the death"
    mq.wait_for_new_pid(name, actor.pid)


def test_requests_while_an_actor_is_down_get_503_and_succeed_once_it_is_back(fetch_killed_mq):
    mq = fetch_killed_mq
    queue = queue_owned_by(0, 2, prefix="down")
    message_id = mq.add(queue, b"x")
    supervisor = psutil.Process(mq.pid)
    supervisor.suspend()  # nothing restarts the actor until we say so
    try:
        old = mq.kill_child("fetch-0")
        # Until the front sees the actor gone its fetches answer 503; from then on the next
        # fetch actor serves the queue while its own restarts (docs/DELIVERY.md, "Hot queues").
        resp = poll_for(lambda: (r := mq.fetch(queue)).status in (200, 503) and r, 30)
        if resp.status == 503:
            assert resp.header("Retry-After").isdigit()
            assert "restarted" in resp.json()["message"]
        else:
            assert resp.header("X-Message-Id") == message_id  # back at its timer (1 s)
        assert mq.add("other-queue", b"saves still work")
    finally:
        supervisor.resume()
    mq.wait_for_new_pid("fetch-0", old)
    back = poll_for(lambda: (r := mq.fetch(queue)).status == 200 and r, 30)
    assert back.header("X-Message-Id") == message_id


# -- (d): a full disk, and injected I/O errors ----------------------------------------------


def mount_tmpfs(path, size: str) -> None:
    """Mount a small tmpfs, or skip the test saying why."""
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); "
                    "tests/actors/test_actor_batches.py covers the same path on a failing disk")


def fill(path) -> None:
    """Append to a file until the file system says ENOSPC."""
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def assert_nothing_half_written(mq, queue: str) -> None:
    """Nothing in new/, nothing in the queue, and a fetch finds nothing."""
    assert files_in(mq.root / "new") == []
    poll_for(lambda: files_in(mq.root / "queues" / queue) == [], 30,
             what=f"queues/{queue} to hold nothing")
    assert mq.fetch(queue).status in (204, 404)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted at the end."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "2m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_full_disk_answers_503_with_retry_after_and_leaves_nothing_half_written(start_mq, small_disk):
    # The run folder (sockets, health.json) on the same disk: the supervisor writes there too.
    mq = start_mq(root=small_disk / "root", workers=1, timeout=1,
                  args=(f"--run-dir={small_disk / 'run'}",))
    mq.request("PUT", "/full")
    filler = small_disk / "filler"
    fill(filler)
    # Top the disk up as the supervisor frees a page by replacing health.json, until it fails.
    def full_and_still_up():
        fill(filler)
        assert mq.running(), f"the supervisor died on a full disk: {mq.stderr()[-500:]}"
        return mq.events("supervisor.health_unwritten")

    poll_for(full_and_still_up, 30,
             what="the supervisor to fail writing health.json on the full disk")
    for size in (100_000, 10_000, 500):
        resp = mq.request("POST", "/full/messages", os.urandom(size))
        assert resp.status == 503, (size, resp.status, resp.body)
        assert resp.header("Retry-After").isdigit()
        assert resp.json()["error"] == "unavailable"
        assert "space" in resp.json()["message"]
    assert_nothing_half_written(mq, "full")
    assert mq.running()

    filler.unlink()
    message_id = mq.add("full", b"room again")
    assert mq.fetch("full").header("X-Message-Id") == message_id


# -- (e): SIGTERM drains; leftovers in new/ are cleaned at start ------------------------------


def test_sigterm_drains_a_request_in_flight_and_exits_0(mq):
    queue = queue_owned_by(0, 2)
    message_id = mq.add(queue, b"in flight at shutdown")
    fetch_actor = mq.children()["fetch-0"]
    fetch_actor.suspend()  # the fetch below now waits in the front for this actor
    result = {}
    thread = threading.Thread(target=lambda: result.update(resp=mq.fetch(queue)))
    thread.start()
    try:
        poll_for(lambda: _front_has_request_in_flight(mq), 30, what="the front to take the fetch")
        mq.proc.send_signal(signal.SIGTERM)
        poll_for(lambda: not _listening(mq), 30, what="the front to stop accepting")
    finally:
        fetch_actor.resume()
    thread.join(15)
    assert result["resp"].status == 200
    assert result["resp"].header("X-Message-Id") == message_id
    assert mq.proc.wait(20) == 0
    assert mq.tree_processes() == []


def _front_has_request_in_flight(mq) -> bool:
    """True when the front holds an accepted connection from a client."""
    front = mq.children().get("front-0")
    if front is None:
        return False
    return any(c.status == psutil.CONN_ESTABLISHED and c.laddr.port == mq.port
               for c in front.net_connections(kind="tcp"))


def _listening(mq) -> bool:
    """True while the front accepts new connections."""
    front = mq.children().get("front-0")
    if front is None:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == mq.port
               for c in front.net_connections(kind="tcp"))


def test_files_left_in_new_by_a_crash_are_cleaned_at_start(start_mq, tmp_path):
    root = tmp_path / "root"
    for name in ("new", "queues/left"):
        (root / name).mkdir(parents=True)
    leftovers = [f"left:{uuid.uuid4()}" for _ in range(5)]
    for name in leftovers:
        (root / "new" / name).write_bytes(b"MQ\x01 half written")
    (root / "new" / "not-a-message-name").write_bytes(b"junk")

    mq = start_mq(root=root, workers=1, timeout=1)
    assert mq.events("supervisor.start")[0]["cleaned_new"] == 6
    assert files_in(root / "new") == []
    poll_for(lambda: files_in(root / "remove") == [], 30, what="the reaper to unlink them")
    assert mq.fetch("left").status == 204
    for name in leftovers:
        assert mq.delete("left", name.split(":")[1]).status == 404


def test_an_overloaded_daemon_refuses_adds_at_once_with_503_and_stores_what_it_accepted(start_mq):
    mq = start_mq(workers=1, timeout=30, args=("--max-waiting-adds=3", "--actor-timeout=30"))
    saver = mq.pid_of("save-0")
    inbox = next(line["endpoint"] for line in mq.events("actor.start")
                 if line.get("process") == "save-0").removeprefix("ipc://")
    os.kill(saver, signal.SIGSTOP)  # A save actor that cannot keep up: its adds wait.
    answers: list[tuple[int, str]] = []
    try:
        waiting = [threading.Thread(target=lambda i=i: answers.append(
            ((r := mq.request("POST", "/busy/messages", b"kept %d" % i, timeout=40)).status,
             r.header("X-Message-Id")))) for i in range(3)]
        for i, t in enumerate(waiting):
            # The front counts an add as waiting before it sends it to the save actor, and the
            # stopped actor reads nothing: once the bytes on its socket grow, this add waits.
            unread = unix_socket_unread_bytes(inbox)
            t.start()
            poll_for(lambda unread=unread: unix_socket_unread_bytes(inbox) > unread, 10,
                     what=f"add {i} to reach the stopped save actor's socket")
        started = time.monotonic()
        refused = mq.request("POST", "/busy/messages", b"refused")
        assert time.monotonic() - started < 10.0  # At once, not after --actor-timeout.
        assert refused.status == 503 and refused.header("Retry-After") == "1"
        assert refused.json()["error"] == "unavailable" and "overloaded" in refused.json()["message"]
    finally:
        os.kill(saver, signal.SIGCONT)
    for t in waiting:
        t.join(40)
    assert sorted(status for status, _ in answers) == [201, 201, 201]
    # What was accepted is stored; what was refused is not.
    bodies = []
    while (resp := mq.fetch("busy")).status == 200:
        bodies.append(resp.body)
    assert sorted(bodies) == [b"kept 0", b"kept 1", b"kept 2"]
