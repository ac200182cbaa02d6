"""Every long poll is answered by its own deadline (docs/DELIVERY.md, "Long polls"), through
every front end: a short poll behind a longer one on the same queue is not held up by it, and
any mix of waits, clients going away and adds on one queue answers each poll in its time,
with no message lost or handed out twice. A drain (SIGTERM) answers the polls still waiting.
"""

import signal
import socket
import threading
import time

import pytest
from delivery_support import added, fresh_queue
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from poll_clients import KINDS, Poll
from support import free_port, poll_for, ready_daemon

#: Seconds a poll may be answered past its own deadline on a loaded machine.
LATE = 1.5
#: The queues' visibility timeout: a message claimed for a client that went away is back then.
TIMEOUT = 4


def start_args(rpc_port: int) -> tuple:
    """Debug lines (a poll seen waiting: fetch.wait) and the RPC server on rpc_port."""
    return ("--log-level=debug", f"--rpc-port={rpc_port}")


@pytest.fixture(scope="module")
def polled(tmp_path_factory):
    """One daemon for the module, with the RPC server; its rpc_port set."""
    rpc_port = free_port()
    for daemon in ready_daemon(tmp_path_factory.mktemp("deadlines"), workers=2,
                               timeout=TIMEOUT, args=start_args(rpc_port)):
        daemon.rpc_port = rpc_port
        poll_for(lambda: socket.create_connection(("127.0.0.1", rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        yield daemon


def new_queue(mq, prefix: str) -> str:
    """A fresh, created queue."""
    queue = fresh_queue(prefix)
    assert mq.request("PUT", f"/{queue}").status == 201
    return queue


def poll(mq, kind: str, queue: str, wait: float) -> Poll:
    """A long poll sent now."""
    return Poll(kind, mq.port, queue, wait, mq.rpc_port)


def acked(mq, queue: str, deliveries: list) -> None:
    """Delete each delivery by its receipt (a stale one is 409: the test took too long)."""
    for message_id, receipt in deliveries:
        status = mq.request("DELETE", f"/{queue}/messages/{message_id}?receipt={receipt}").status
        assert status in (204, 409), status


@pytest.mark.parametrize("kind", KINDS)
def test_a_short_poll_behind_a_longer_one_is_answered_by_its_own_deadline(polled, kind):
    queue = new_queue(polled, f"short-{kind}")
    first = poll(polled, "rest", queue, 20)
    polled.wait_for_events("fetch.wait", 1, queue=queue)
    second = poll(polled, kind, queue, 1)
    got = second.answer(limit=10)
    took = got.at - second.sent
    assert got.empty, (got.status, got.body)
    assert 0.9 <= took <= 1 + LATE, f"a 1 s poll behind a 20 s one answered after {took:.2f} s"
    # The longer poll still waits, and is first in line for the next message.
    message_id = added(polled, queue, b"for the first in line")
    answer = first.answer(limit=5)
    assert [d[0] for d in answer.deliveries] == [message_id]
    assert answer.at - first.sent < 20


# -- any mix of polls, clients going away and adds on one queue ------------------------------

#: Waits a poll draws from: SQS counts whole seconds. Starts within the first half second, so
#: a short poll behind a 4 s one would be answered at least 2.5 s late if it waited for it.
#: The draws favour what hides a poll behind another: long polls, few cancels, adds late or none.
WAITS = {"sqs": (4, 1, 0), "other": (4, 0.5, 1, 0)}
STARTS = (0, 0.25, 0.5)
CANCELS = (None, None, 0.3, 0.7)
ADDS = (3.0, 1.5, 0.3, 0.0)


@st.composite
def polls(draw):
    """One poll: (kind, start, wait, cancel after this share of its wait or None)."""
    kind = draw(st.sampled_from(KINDS))
    wait = draw(st.sampled_from(WAITS["sqs" if kind == "sqs" else "other"]))
    cancel = draw(st.sampled_from(CANCELS)) if wait else None
    return kind, draw(st.sampled_from(STARTS)), wait, cancel


def scenario(mq, queue: str, plan: list, adds: list) -> tuple[list, dict]:
    """Run the polls and adds of a plan at their times (the draw's timing, not a wait for a
    condition); per poll (its Poll, its Answer or None when its client went away first), and
    the ids added (id -> the add's number)."""
    t0 = time.monotonic() + 0.1
    outcomes: list = [None] * len(plan)
    ids: dict = {}
    failures: list = []

    def run_poll(n: int, kind: str, start: float, wait: float, cancel) -> None:
        try:
            time.sleep(max(0.0, t0 + start - time.monotonic()))
            sent = poll(mq, kind, queue, wait)
            answer = sent.answer(None if cancel is None else sent.sent + cancel * wait)
            if answer is not None and not answer.failed:
                acked(mq, queue, answer.deliveries)
            outcomes[n] = (sent, answer)
        except BaseException as err:  # Reported by the test thread.
            failures.append(err)

    def run_adds() -> None:
        try:
            for n, at in enumerate(sorted(adds)):
                time.sleep(max(0.0, t0 + at - time.monotonic()))
                ids[added(mq, queue, b"m%d" % n)] = n
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=run_poll, args=(n, *p)) for n, p in enumerate(plan)]
    threads.append(threading.Thread(target=run_adds))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if failures:
        raise failures[0]
    return outcomes, ids


@pytest.mark.slow
@settings(max_examples=8, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate],  # Shrinking replays runs for minutes.
          suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(polls(), min_size=2, max_size=5),
       adds=st.lists(st.sampled_from(ADDS), max_size=2))
@example(plan=[("rest", 0, 4, None), ("sqs", 0.25, 1, None), ("rest_batch", 0.25, 0.5, 0.7),
               ("rpc", 0.5, 0.5, None)], adds=[])
def test_any_mix_of_polls_cancels_and_adds_answers_each_poll_in_its_own_time(polled, plan, adds):
    queue = new_queue(polled, "mix")
    outcomes, ids = scenario(polled, queue, plan, adds)
    delivered: list = []
    for (kind, start, wait, cancel), (sent, answer) in zip(plan, outcomes):
        if answer is None:
            continue  # Its client went away unanswered.
        what = f"{kind} poll of {wait} s (starting at {start}, cancel {cancel})"
        assert not answer.failed, f"{what}: {answer.status} {answer.body!r}"
        took = answer.at - sent.sent
        assert took <= wait + LATE, f"{what} answered after {took:.2f} s"
        if answer.empty:
            assert took >= wait - 0.05, f"{what} answered empty after {took:.2f} s"
        delivered += answer.deliveries
    # A message claimed for a client that went away comes back after TIMEOUT: take what is left.
    deadline = time.monotonic() + TIMEOUT + 5
    while set(ids) - {d[0] for d in delivered} and time.monotonic() < deadline:
        answer = poll(polled, "rest_batch", queue, 1).answer()
        assert not answer.failed, (answer.status, answer.body)
        acked(polled, queue, answer.deliveries)
        delivered += answer.deliveries
    assert {d[0] for d in delivered} == set(ids), "a message was lost"
    receipts = [receipt for _, receipt in delivered]
    assert len(receipts) == len(set(receipts)), f"a delivery was handed out twice: {delivered}"
    if not any(cancel for _, _, _, cancel in plan):
        assert len(delivered) == len(ids), f"a message was handed out twice: {delivered}"


# -- a drain answers the polls still waiting ------------------------------------------------


def test_sigterm_answers_every_waiting_poll_empty_and_exits_at_once(start_mq):
    rpc_port = free_port()
    mq = start_mq(workers=2, timeout=TIMEOUT, args=start_args(rpc_port))
    mq.rpc_port = rpc_port
    poll_for(lambda: socket.create_connection(("127.0.0.1", rpc_port)).close() or True,
             10, what="the RPC port to accept", ignore=(OSError,))
    queue = new_queue(mq, "drained")
    waiting = [poll(mq, kind, queue, 20) for kind in KINDS]
    mq.wait_for_events("fetch.wait", len(KINDS), queue=queue)
    waiting.append(poll(mq, "rest_any", queue, 20))
    mq.wait_for_events("fetch.watch", 1, queue=queue)
    signalled = time.monotonic()
    mq.proc.send_signal(signal.SIGTERM)
    for sent in waiting:
        answer = sent.answer(limit=10)
        late = answer.at - signalled
        assert answer.empty, (sent.kind, answer.status, answer.body)
        assert late < 5, f"{sent.kind}: answered {late:.2f} s after SIGTERM"
    assert mq.proc.wait(20) == 0
    took = time.monotonic() - signalled
    assert took < 8, f"the daemon took {took:.1f} s to stop"
    # The access log says what the clients saw: every poll answered, none cut (500).
    polls = [(line["method"], line["status"]) for line in mq.events("http.request")
             if line["path"] in (f"/{queue}/messages", "/_mq/messages", "/")]
    assert sorted(polls) == [("GET", 204)] * 3 + [("POST", 200)], polls
    assert [line["unfinished"] for line in mq.events("front.stop")] == [0]
