"""mq.local.LocalClient: the broker-less library, with real processes on real roots, beside real
daemons. Run as a script, this file is also the worker those tests start (see worker())."""

import dataclasses
import http.client
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from support import body_is_whole, checked_body, create_root, poll_for
from repo_support import REPO, script_env

from mq.client.errors import ConflictError, InvalidError, NotFoundError, TooLargeError, UnavailableError
from mq.local import LocalClient

README = REPO / "docs" / "CLIENTS.md"


# -- worker processes: `python test_local.py ROLE ARGS...` ------------------------------------

def seq_of(body: bytes) -> int:
    """The sequence number a body made by checked_body carries."""
    return int(body.split(b":", 1)[0])


def produce_local(root: str, queue: str, first: int, step: int, total: int) -> None:
    """Put the bodies of sequence numbers first, first+step, ... below total."""
    client = LocalClient(root)
    for seq in range(int(first), int(total), int(step)):
        client.put(queue, checked_body(seq, 16 + seq % 200))


def produce_http(port: str, queue: str, first: int, step: int, total: int) -> None:
    """Add the same bodies through a daemon, on one kept-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    for seq in range(int(first), int(total), int(step)):
        conn.request("POST", f"/{queue}/messages", checked_body(seq, 16 + seq % 200))
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 201, resp.status


def consume_local(root: str, queue: str, out: str, stop: str) -> None:
    """Get, record and ack until the stop file exists; a record is 'id seq attempts whole'."""
    client = LocalClient(root)
    with open(out, "a", buffering=1) as records:
        while not os.path.exists(stop):
            message = client.get(queue, wait=0.2)
            if message is not None:
                records.write(f"{message.id} {seq_of(message.body)} {message.attempts} "
                              f"{int(body_is_whole(message.body))}\n")
                client.ack(message)


def consume_http(port: str, queue: str, out: str, stop: str) -> None:
    """The same through a daemon: fetch with a long poll, record, ack by receipt."""
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    with open(out, "a", buffering=1) as records:
        while not os.path.exists(stop):
            conn.request("GET", f"/{queue}/messages?wait=0.2")
            resp = conn.getresponse()
            body = resp.read()
            if resp.status == 204:
                continue
            assert resp.status == 200, (resp.status, body)
            message_id = resp.getheader("X-Message-Id")
            records.write(f"{message_id} {seq_of(body)} {resp.getheader('X-Attempts')} "
                          f"{int(body_is_whole(body))}\n")
            conn.request("POST", f"/{queue}/messages/{message_id}?reply=ack",
                         headers={"X-Receipt": resp.getheader("X-Receipt")})
            ack = conn.getresponse()
            assert ack.status == 204, (ack.status, ack.read())
            ack.read()


def claim_and_hang(root: str, queue: str) -> None:
    """Claim one message, say which (id and the earliest its timer can run out), and wait to
    be killed. The time is taken before the claim: one taken after it was later than the
    timer's by as long as the claim took to return, past the test's margin on a loaded machine."""
    client = LocalClient(root)
    timeout = client.properties(queue)["timeout"]
    before_claim = time.time()
    message = client.get(queue, wait=10)
    print(message.id, before_claim + timeout, flush=True)
    time.sleep(3600)


def delete_until(root: str, queue: str, stop: str) -> None:
    """Delete the queue again and again (a put re-creates it) until the stop file exists."""
    client = LocalClient(root)
    while not os.path.exists(stop):
        try:
            client.delete_queue(queue)
        except NotFoundError:
            pass


ROLES = {f.__name__: f for f in (produce_local, produce_http, consume_local, consume_http,
                                 claim_and_hang, delete_until)}


def worker(role: str, *args) -> subprocess.Popen:
    """Start this file as a process playing one role (it inherits PYTHONPATH, so the mq
    under test, with tests/ added for support.py)."""
    return subprocess.Popen([sys.executable, __file__, role, *map(str, args)],
                            stdout=subprocess.PIPE, text=True, env=script_env())


def finished(procs: list[subprocess.Popen], timeout: float) -> None:
    """Wait for processes to exit, and assert each exited with 0."""
    poll_for(lambda: all(p.poll() is not None for p in procs), timeout,
             what=f"{len(procs)} worker(s) to finish")
    assert [p.returncode for p in procs] == [0] * len(procs)


def records(paths) -> list[tuple[str, int, int, int]]:
    """The complete record lines consumers wrote so far."""
    out = []
    for path in paths:
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines(keepends=True):
            if line.endswith("\n"):
                message_id, seq, attempts, whole = line.split()
                out.append((message_id, int(seq), int(attempts), int(whole)))
    return out


# -- many processes, half through a daemon --------------------------------------------------

#: Enough for every pair of producer and consumer kinds to race many times over: 250 messages
#: from each producer, taken by four consumers polling at once, so each kind of consumer meets
#: each kind of producer hundreds of times. Each message is a flush on two loaded cores: 4,000
#: took 90 s on a loaded machine (past the producers' wait) and checked nothing more.
TOTAL = 1_000


@pytest.mark.slow
# Never beside the other heavy modules (the dashboard's 10,000 queues, the queue churn): on two
# cores together they starved each other past their waits.
@pytest.mark.xdist_group("heavy")
@pytest.mark.timeout(200)  # 80 s on two cores under a load of 20; the waits below bound it.
def test_thousands_of_messages_through_local_and_daemon_producers_and_consumers(start_mq, tmp_path):
    daemon = start_mq(workers=2, timeout=60, args=("--peers=1",))
    root, queue, stop = daemon.root, "moved", tmp_path / "stop"
    LocalClient(root).create_queue(queue)
    outs = [tmp_path / f"consumer-{i}.txt" for i in range(4)]
    consumers = [worker("consume_local", root, queue, outs[0], stop),
                 worker("consume_local", root, queue, outs[1], stop),
                 worker("consume_http", daemon.port, queue, outs[2], stop),
                 worker("consume_http", daemon.port, queue, outs[3], stop)]
    producers = [worker("produce_local", root, queue, 0, 4, TOTAL),
                 worker("produce_local", root, queue, 1, 4, TOTAL),
                 worker("produce_http", daemon.port, queue, 2, 4, TOTAL),
                 worker("produce_http", daemon.port, queue, 3, 4, TOTAL)]
    try:
        finished(producers, 80)
        poll_for(lambda: len({r[1] for r in records(outs)}) >= TOTAL, 60,
                 what=f"all {TOTAL} messages to be consumed")
    finally:
        stop.touch()
        finished(consumers, 20)
    got = records(outs)
    ids = [r[0] for r in got]
    assert len(set(ids)) == len(ids) == TOTAL, "a message was delivered twice"
    assert sorted(r[1] for r in got) == list(range(TOTAL))
    assert all(r[2] == 1 for r in got), "a message came back although no timer ran out"
    assert all(r[3] for r in got), "a body came back changed"
    local, remote = records(outs[:2]), records(outs[2:])
    assert local and remote, "both kinds of consumer must have taken part"
    assert {r[1] % 4 for r in local} == {r[1] % 4 for r in remote} == {0, 1, 2, 3}, \
        "each kind of consumer must have received from both kinds of producer"
    # Nothing is left in any state: every ack removed its message.
    assert LocalClient(root).purge(queue) == 0


def test_a_put_racing_deletions_of_its_queue_re_creates_it_or_says_the_deletion_took_it(tmp_path):
    # A deletion can take the queue's folder between a put's check that the queue exists and
    # its rename into it: the put creates the queue again, as an add to a missing one does.
    # Only a file the deletion moved out of new/ may fail the put (503: it was never stored).
    root, queue, stop = tmp_path / "root", "churn", tmp_path / "stop"
    client = LocalClient(root, create_root=True)
    deleter = worker("delete_until", root, queue, stop)
    failures, deadline = [], time.monotonic() + 4
    try:
        while time.monotonic() < deadline:
            try:
                client.put(queue, b"x")
            except UnavailableError as err:
                failures.append(str(err))
    finally:
        stop.touch()
        finished([deleter], 20)
    assert not [f for f in failures if "is gone from new/" not in f], failures[:3]


# -- order ----------------------------------------------------------------------------------

def test_a_strict_fifo_consumer_receives_in_creation_order(tmp_path):
    root, queue = tmp_path / "root", "fifo"
    LocalClient(root, create_root=True).create_queue(queue)
    finished([worker("produce_local", root, queue, first, 2, 300) for first in (0, 1)], 30)
    consumer = LocalClient(root, strict_fifo=True)
    other = LocalClient(root, strict_fifo=True)
    ready = [m.id for m in consumer.peek(queue, max=1000)]
    assert len(ready) == 300 and ready == sorted(ready)
    received = []
    while ready:
        if len(received) % 40 == 7:
            # Another consumer takes the oldest, and puts it back after this one's next get:
            # it is then the oldest again, and must come next whatever was listed before.
            taken = other.get(queue)
            assert taken.id == ready.pop(0)
            message = consumer.get(queue)
            assert message.id == ready.pop(0)
            received.append(message)
            other.nack(taken)
            ready.insert(0, taken.id)
            consumer.ack(message)
        message = consumer.get(queue)
        assert message.id == ready.pop(0), "not the oldest ready message"
        received.append(message)
        consumer.ack(message)
    assert len(received) == 300 and consumer.get(queue) is None


# -- crashes --------------------------------------------------------------------------------

@pytest.mark.parametrize("beside", ["daemon", "alone"])
def test_a_message_claimed_by_a_killed_local_consumer_comes_back_after_its_timer(
        beside, start_mq, tmp_path):
    daemon = start_mq(workers=2, timeout=60, args=("--peers=1",)) if beside == "daemon" else None
    root, queue = tmp_path / "root", "jobs"
    client = LocalClient(root, create_root=True)
    client.set_properties(queue, timeout=1.5)
    message_id = client.put(queue, b"work")
    hanging = worker("claim_and_hang", root, queue)
    claimed, due = hanging.stdout.readline().split()
    assert claimed == message_id
    hanging.send_signal(signal.SIGKILL)
    hanging.wait()
    if daemon:
        # Only the daemon's mover can bring it back: nothing here touches delay/.
        resp = poll_for(lambda: (r := daemon.request("GET", f"/{queue}/messages?wait=1")).status == 200 and r,
                        20, what="the message to come back through the daemon")
        back_id, attempts, body = resp.header("X-Message-Id"), int(resp.header("X-Attempts")), resp.body
    else:
        if time.time() < float(due) - 0.3:  # A slow machine may be past the timer already.
            assert client.get(queue) is None, "handed out again before its timer ran out"
        back = poll_for(lambda: client.get(queue, wait=1), 20, what="the message to come back")
        back_id, attempts, body = back.id, back.attempts, back.body
    assert time.time() >= float(due) - 0.1, "handed out again before its timer ran out"
    assert (back_id, attempts, body) == (message_id, 2, b"work")


def test_notices_tell_a_daemons_mover_of_local_claims_and_delays(start_mq, tmp_path):
    # --peers=0: the mover never rescans delay/ on its own, so only the notices tell it.
    daemon = start_mq(workers=2, timeout=60, args=("--peers=0",))
    client, queue = LocalClient(daemon.root), "noticed"
    client.set_properties(queue, timeout=1.0)
    delayed = client.put(queue, b"later", delay=0.5)
    resp = daemon.request("GET", f"/{queue}/messages?wait=10")
    assert (resp.status, resp.header("X-Message-Id")) == (200, delayed)
    assert daemon.delete(queue, delayed).status == 204
    claimed = client.put(queue, b"claimed")
    assert client.get(queue).id == claimed  # Never acked: its timer runs out in 1 s.
    resp = daemon.request("GET", f"/{queue}/messages?wait=10")
    assert (resp.status, resp.header("X-Message-Id"), resp.header("X-Attempts")) == \
        (200, claimed, "2")


# -- the contract's answers -----------------------------------------------------------------

@pytest.mark.parametrize("sync", ["fs", "file"])
def test_receipts_stale_and_missing_answers(sync, tmp_path):
    client, queue = LocalClient(tmp_path / "root", sync=sync, timeout=30, create_root=True), "answers"
    message_id = client.put(queue, "text body")
    first = client.get(queue)
    assert (first.id, first.body, first.content_type, first.attempts) == \
        (message_id, b"text body", "text/plain; charset=utf-8", 1)
    due = client.extend(first, 60)
    assert 59 < due - time.time() <= 60
    client.nack(first)
    second = client.get(queue)
    assert (second.id, second.attempts, second.receipt) == (message_id, 2, f"{message_id}.2")
    with pytest.raises(ConflictError) as stale:
        client.ack(first)
    assert stale.value.status == 409 and "in_flight (delivery 2)" in stale.value.message
    with pytest.raises(ConflictError):
        client.extend(first)
    client.ack(second)
    with pytest.raises(NotFoundError):
        client.ack(second)
    with pytest.raises(NotFoundError):
        client.revoke(queue, message_id)
    with pytest.raises(NotFoundError) as missing:
        client.get("no-such-queue")
    assert (missing.value.status, missing.value.kind) == (404, "not_found")
    with pytest.raises(InvalidError):
        client.put("bad:name", b"x")
    client.set_properties(queue, max_body_bytes=4)
    with pytest.raises(TooLargeError):
        client.put(queue, b"12345")


def test_delays_dedup_revoke_dead_letters_peek_and_purge(tmp_path):
    client, queue = LocalClient(tmp_path / "root", create_root=True), "features"
    assert client.create_queue(queue) and not client.create_queue(queue)
    hidden = client.put(queue, b"in an hour", delay=3600)
    assert client.get(queue) is None
    client.revoke(queue, hidden)
    first = client.put(queue, b"once", dedup_id="k")
    assert client.put(queue, b"twice", dedup_id="k") == first
    assert [m.id for m in client.peek(queue)] == [first]
    soon = client.put(queue, b"soon", at=time.time() + 0.3)
    assert [m.body for m in client.peek(queue, max=5)] == [b"once"]
    client.set_properties(queue, retry=0)
    message = client.get(queue)
    client.nack(message)  # Its only delivery is used up: a dead letter.
    dead = client.get(f"{queue}.dead")
    assert (dead.id, dead.body) == (first, b"once")
    due = client.get(queue, wait=5)
    assert due.id == soon
    client.ack(due)
    assert client.stat(queue) == {"queue": queue, "ready": 0,
                                  "properties": client.properties(queue)}
    for n in range(3):
        client.put(queue, b"%d" % n)
    client.get(queue)
    assert client.purge(queue) == 3 and client.queue_exists(queue)
    assert client.get(queue) is None and client.properties(queue)["retry"] == 0
    client.delete_queue(queue)
    assert not client.queue_exists(queue)


def test_retry_minus_one_a_message_past_101_deliveries_is_found_by_id(tmp_path):
    """A reply without a receipt and a revoke find a message however often it was delivered."""
    client, queue = LocalClient(tmp_path / "root", timeout=60, create_root=True), "forever"
    client.set_properties(queue, retry=-1)
    message_id = client.put(queue, b"again")
    for n in range(1, 103):  # Past 101 deliveries, the most a `retry` count allows.
        message = client.get(queue)
        assert (message.id, message.attempts) == (message_id, n)
        client.nack(message)
    message = client.get(queue)
    assert message.attempts == 103
    by_id = dataclasses.replace(message, receipt=None)
    client.extend(by_id, 30)
    assert by_id.receipt == f"{message_id}.103"
    with pytest.raises(ConflictError):
        client.ack(dataclasses.replace(message, receipt=f"{message_id}.3"))
    client.nack(dataclasses.replace(message, receipt=None))
    with pytest.raises(ConflictError):
        client.extend(dataclasses.replace(message, receipt=None))  # Ready, not in flight.
    client.revoke(queue, message_id)
    assert client.get(queue) is None
    with pytest.raises(NotFoundError):
        client.revoke(queue, message_id)


# -- opening a root -------------------------------------------------------------------------

def test_a_folder_without_format_is_refused_and_nothing_is_written_into_it(tmp_path):
    # The empty mount point of a shared file system not mounted: a root made there would be a
    # second one, its messages lost to the daemons of the real root.
    mount, missing = tmp_path / "mnt", tmp_path / "missing"
    mount.mkdir()
    for path in (mount, missing):
        with pytest.raises(UnavailableError) as raised:
            LocalClient(path)
        assert raised.value.status == 503 and raised.value.kind == "unavailable"
        assert f"{path} is not an mq root (no FORMAT file)" in raised.value.message
        assert "mq --create-root" in raised.value.message and "create_root=True" in raised.value.message
    assert os.listdir(mount) == [] and not missing.exists()


def test_create_root_makes_a_root_in_a_missing_or_empty_folder_only(tmp_path):
    empty, missing, home = tmp_path / "empty", tmp_path / "missing" / "root", tmp_path / "home"
    empty.mkdir()
    for root in (empty, missing):
        LocalClient(root, create_root=True).put("q", b"first")
        assert (root / "FORMAT").read_text() == "mq-format 1\n"
        # A root now: opened as it is, with or without the opt-in.
        LocalClient(root, create_root=True).put("q", b"second")
        assert [m.body for m in LocalClient(root).peek("q")] == [b"first", b"second"]
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    with pytest.raises(InvalidError, match="neither empty nor an mq root"):
        LocalClient(home, create_root=True)
    assert os.listdir(home) == ["notes.txt"]


def test_a_root_made_by_the_daemon_s_command_opens_and_root_id_checks_it(tmp_path):
    root = tmp_path / "root"
    made = create_root(root)
    assert made.returncode == 0, made.stderr
    root_id = made.stdout.strip()
    LocalClient(root, root_id=root_id).put("q", b"x")
    other = "00000000-0000-7000-8000-000000000000"
    with pytest.raises(UnavailableError, match=f"another root \\(ID {root_id}, not {other}"):
        LocalClient(root, root_id=other)
    assert LocalClient(root).stat("q")["ready"] == 1


# -- the README's examples ------------------------------------------------------------------

def test_the_readme_examples_run_as_written(tmp_path):
    section = README.read_text().split("## Broker-less library", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the section has no python example"
    env = {**os.environ, "MQ_ROOT": str(tmp_path / "root")}
    for block in blocks:
        run = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True,
                             text=True, timeout=30)
        assert run.returncode == 0, (block, run.stderr)


if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
