"""One queue served by two fetch actors of one daemon: while its own fetch actor is behind
(HOT_WAITING requests waiting on it), the front sends its fetches and acks to the next one,
which claims by the same exclusive rename peers use (docs/DELIVERY.md, "Hot queues").

The owner is made to fall behind for real: SIGSTOP, while requests pile up on it; whatever
is answered meanwhile was served by the other actor.
"""

import contextlib
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import fetch_actor_for, poll_for, queue_owned_by, ready_daemon

from mq.http.actor_links import HOT_WAITING

#: The daemon's --timeout: a delivery whose answer was lost comes back this soon.
TIMEOUT = 3


@pytest.fixture(scope="module")
def hot_tree(tmp_path_factory):
    """Two fetch actors, one front; room for requests that wait on a stopped actor, which the
    supervisor does not take for hung (the tests stop it on purpose). One for the module:
    each test has queues of its own, resumes what it stopped, and checks only its own
    queues' figures."""
    yield from ready_daemon(tmp_path_factory.mktemp("hot"), workers=2, timeout=TIMEOUT,
                            args=("--actor-timeout=60", "--fronts=1", "--hang-timeout=0"))


@pytest.fixture
def hot_mq(hot_tree):
    """The module's daemon once every actor answers (one a test killed may be starting)."""
    return hot_tree.wait_ready()


@contextlib.contextmanager
def stopped(mq, name: str):
    """The child stopped (SIGSTOP) until the block ends."""
    pid = mq.pid_of(name)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


class Ledger:
    """What consumers were handed and what they acked, checked for exactly-once delivery."""

    def __init__(self):
        self.lock = threading.Lock()
        self.handed: list[tuple[str, str]] = []  # (id, attempts) of every 200
        self.acked: list[str] = []  # answered 204
        self.unsure: list[str] = []  # the ack's answer was lost (503: its actor was killed)

    def took(self, resp) -> tuple[str, str]:
        """Record a fetch's answer; return (id, receipt)."""
        message_id = resp.header("X-Message-Id")
        with self.lock:
            self.handed.append((message_id, resp.header("X-Attempts")))
        return message_id, resp.header("X-Receipt")

    def done(self, ids: set[str]) -> bool:
        """Whether every id was acked, or its ack sent and the answer lost."""
        with self.lock:
            return ids <= set(self.acked) | set(self.unsure)

    def check(self, ids: set[str]) -> None:
        """Every id acked once (or its ack's answer lost, and the message gone: settled());
        no delivery (id and its number) handed out twice."""
        assert len(set(self.acked)) == len(self.acked) and set(self.acked) <= ids
        assert ids <= set(self.acked) | set(self.unsure)
        assert len(set(self.handed)) == len(self.handed), "a delivery was handed out twice"


def settled(mq, queue: str, ledger: Ledger) -> None:
    """Ack what comes back (a delivery whose ack's answer was lost and that was not acked)
    until nothing of the queue is ready or in flight."""
    def empty():
        while (resp := mq.fetch(queue)).status == 200:
            message_id, receipt = ledger.took(resp)
            assert ack(mq, queue, message_id, receipt) == 204
            ledger.acked.append(message_id)
        figures = mq.request("GET", "/_mq/stats").json()["queues"][queue]
        return figures["ready"] == figures["in_flight"] == 0
    poll_for(empty, 60, interval=0.2, what="the queue to be empty")


def add_many(mq, queue: str, count: int) -> list[str]:
    """Add count messages in one batch; their ids in order."""
    lines = [{"body": f"m{n}"} for n in range(count)]
    resp = mq.request("POST", f"/{queue}/messages",
                      b"".join(json.dumps(line).encode() + b"\n" for line in lines),
                      {"Content-Type": "application/x-ndjson"})
    assert resp.status == 201, (resp.status, resp.body)
    return [m["id"] for m in resp.json()["messages"]]


def sqs(mq, operation: str, **params) -> dict:
    """One call of the SQS API (JSON protocol; the daemon checks no signature by default)."""
    resp = mq.request("POST", "/", json.dumps(params).encode(), {
        "X-Amz-Target": f"AmazonSQS.{operation}", "Content-Type": "application/x-amz-json-1.0"})
    assert resp.status == 200, (resp.status, resp.body)
    return resp.json()


def ack(mq, queue: str, message_id: str, receipt: str, timeout: float = 15.0) -> int:
    """POST reply=ack with the receipt; the status."""
    return mq.request("POST", f"/{queue}/messages/{message_id}?reply=ack&receipt={receipt}",
                      timeout=timeout).status


def consume(mq, queue: str, ledger: Ledger, until, seconds: float = 90) -> None:
    """Fetch and ack until until() is true (or `seconds` passed: the check then says what is
    missing); 503 (an actor being restarted) is tried again."""
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        try:
            resp = mq.fetch(queue)
        except OSError:
            continue
        if resp.status != 200:
            assert resp.status in (204, 503), (resp.status, resp.body)
            continue
        message_id, receipt = ledger.took(resp)
        try:
            status = ack(mq, queue, message_id, receipt, timeout=60)
        except OSError:
            status = 503
        # 409: its timer ran out first, it comes back; 503: its actor was killed, before or
        # after the ack's rename.
        assert status in (204, 409, 503), status
        with ledger.lock:
            (ledger.acked if status == 204 else ledger.unsure if status == 503 else []).append(
                message_id)


def pile_up(pool: ThreadPoolExecutor, mq, queue: str) -> list:
    """HOT_WAITING fetches that wait on the stopped owner."""
    return [pool.submit(mq.fetch, queue) for _ in range(HOT_WAITING)]


def served_while_stopped(mq, queue: str):
    """A fetch answered 200 while the owner is stopped: by the other fetch actor. Until the
    pile-up has reached the front, a fetch may still go to the owner and wait: given up on
    (by the client) after a second, it adds to the owner's load all the same."""
    def one():
        resp = mq.request("GET", f"/{queue}/messages", timeout=1)
        return resp if resp.status == 200 else None
    return poll_for(one, 60, what="a fetch served by the other fetch actor", ignore=(OSError,))


def test_a_busy_queue_is_served_by_the_next_fetch_actor_and_its_receipts_work_on_either(hot_mq):
    queue = queue_owned_by(0, 2, prefix="hot-a")
    ids = set(add_many(hot_mq, queue, 40))
    ledger = Ledger()
    with ThreadPoolExecutor(HOT_WAITING) as pool:
        with stopped(hot_mq, "fetch-0"):
            piled = pile_up(pool, hot_mq, queue)
            first = ledger.took(served_while_stopped(hot_mq, queue))
            # The ack of a delivery the other actor handed out, while the owner is stopped.
            assert ack(hot_mq, queue, *first) == 204
            ledger.acked.append(first[0])
            second = ledger.took(served_while_stopped(hot_mq, queue))
            third = ledger.took(served_while_stopped(hot_mq, queue))
        # The owner again: a nack and an extend of deliveries the other actor handed out.
        nacked = hot_mq.request("POST", f"/{queue}/messages/{second[0]}?reply=nack&receipt={second[1]}")
        assert nacked.status == 204, nacked.body
        extended = hot_mq.request("POST", f"/{queue}/messages/{third[0]}?reply=ext&seconds=30"
                                  f"&receipt={third[1]}")
        assert extended.status == 200, extended.body
        assert ack(hot_mq, queue, third[0], extended.header("X-Receipt")) == 204
        ledger.acked.append(third[0])
        for future in piled:  # Answered once the owner runs again.
            resp = future.result(60)
            assert resp.status == 200, (resp.status, resp.body)
            assert ack(hot_mq, queue, *ledger.took(resp)) == 204
            ledger.acked.append(resp.header("X-Message-Id"))
    consume(hot_mq, queue, ledger, lambda: ledger.done(ids))
    ledger.check(ids)
    assert not ledger.unsure
    assert hot_mq.fetch(queue).status == 204
    # The figures of both actors: the owner's index dropped what the other one claimed.
    poll_for(lambda: (s := hot_mq.request("GET", "/_mq/stats").json()["queues"][queue])["ready"] == 0
             and s["totals"]["acks"] == len(ids) and s["totals"]["fetches"] >= len(ids), 10,
             what="the queue's figures")


def test_concurrent_consumers_of_one_queue_on_two_fetch_actors_get_each_message_once(hot_mq):
    queue = queue_owned_by(1, 2, prefix="hot-b")
    ids = set(add_many(hot_mq, queue, 300))
    ledger = Ledger()
    done = lambda: ledger.done(ids)  # noqa: E731
    consumers = HOT_WAITING + 8
    with ThreadPoolExecutor(consumers) as pool:
        running = [pool.submit(consume, hot_mq, queue, ledger, done) for _ in range(consumers)]
        poll_for(lambda: len(ledger.acked) >= 50, 60, what="the consumers to start")
        with stopped(hot_mq, "fetch-1"):
            # The consumers beyond those waiting on the owner go on, on the other actor.
            mark = len(ledger.acked)
            poll_for(lambda: len(ledger.acked) >= mark + 20, 60,
                     what="acks while the queue's own fetch actor is stopped")
        for future in running:
            future.result(120)
    ledger.check(ids)
    assert not ledger.unsure


def test_a_fifo_queue_stays_on_its_own_fetch_actor_and_keeps_each_group_in_order(hot_mq):
    queue = next(q for n in range(1000) if fetch_actor_for(q := f"hot-c{n}.fifo", 2) == 0)
    url = sqs(hot_mq, "CreateQueue", QueueName=queue, Attributes={"FifoQueue": "true"})["QueueUrl"]
    ids = [sqs(hot_mq, "SendMessage", QueueUrl=url, MessageBody=f"m{n}", MessageGroupId=f"g{n % 2}",
               MessageDeduplicationId=str(n))["MessageId"] for n in range(20)]
    first = hot_mq.fetch(queue)  # The owner holds g0 until it is acked; its groups are loaded.
    assert first.header("X-Message-Id") == ids[0]
    assert ack(hot_mq, queue, ids[0], first.header("X-Receipt")) == 204
    ledger = Ledger()
    with ThreadPoolExecutor(HOT_WAITING) as pool:
        with stopped(hot_mq, "fetch-0"):
            piled = pile_up(pool, hot_mq, queue)
            # Beyond the pile-up the other actor is asked: it refuses the fifo queue and the
            # front sends these to the queue's own too. Served by the other one, they would
            # take the groups' next messages while the owner holds none of them.
            for _ in range(HOT_WAITING):
                with contextlib.suppress(OSError):  # Waits on the stopped owner: given up.
                    resp = hot_mq.request("GET", f"/{queue}/messages", timeout=0.25)
                    assert resp.status != 200, "served by another actor than the fifo queue's"
        for future in piled:
            if (resp := future.result(60)).status == 200:
                message_id, receipt = ledger.took(resp)
                assert ack(hot_mq, queue, message_id, receipt) == 204
                ledger.acked.append(message_id)
    # Whatever the requests given up on claimed comes back after its timer, first in its group.
    settled(hot_mq, queue, ledger)
    ledger.check(set(ids[1:]))
    for group in (0, 1):  # Each group acked in the order of its adds, one at a time.
        assert [i for i in ledger.acked if ids.index(i) % 2 == group] == ids[group::2][group == 0:]


@pytest.mark.parametrize("victim", ["fetch-1", "fetch-0"])
def test_kill_9_of_either_fetch_actor_of_a_busy_queue_loses_nothing(hot_mq, victim):
    owner = "fetch-0"
    queue = queue_owned_by(0, 2, prefix=f"hot-d{victim[-1]}")
    ids = set(add_many(hot_mq, queue, 200))
    ledger = Ledger()
    done = lambda: ledger.done(ids)  # noqa: E731
    consumers = HOT_WAITING + 8
    with ThreadPoolExecutor(consumers) as pool:
        running = [pool.submit(consume, hot_mq, queue, ledger, done) for _ in range(consumers)]
        poll_for(lambda: len(ledger.acked) >= 20, 60, what="the consumers to start")
        stop = stopped(hot_mq, owner) if victim != owner else contextlib.nullcontext()
        with stop:
            mark = len(ledger.acked)
            poll_for(lambda: len(ledger.acked) >= mark + 10, 60, what="acks on the other actor")
            old = hot_mq.kill_child(victim)
        hot_mq.wait_for_new_pid(victim, old)
        for future in running:
            future.result(120)
    settled(hot_mq, queue, ledger)
    ledger.check(ids)
