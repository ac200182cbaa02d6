"""Pull-any, GET /_mq/messages?qre=REGEX: the oldest ready message among the matching queues,
whichever fetch actor owns them, its queue in X-Queue; no queue starves; a long poll answers
as soon as any matching queue gets a message; a client that hangs up claims nothing.

The daemon runs with --log-level=debug: fetch actors log "fetch.watch" when a pull-any starts
waiting on them, so a test adds only once the poll is known to wait, never after a sleep.
"""

import itertools
import json
import socket
import threading
import time
from urllib.parse import quote

import pytest

from mq.local import LocalClient
from mq.operations import MAX_QUEUES
from support import fetch_actor_for, queue_owned_by, ready_daemon

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("pull_any")

prefixes = (f"pa{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def any_mq(tmp_path_factory):
    """One daemon for the module (each test uses its own queue names)."""
    yield from ready_daemon(tmp_path_factory.mktemp("pull-any"), workers=2, timeout=30,
                            args=("--log-level=debug",))


def pull_any(mq, pattern: str, wait: float | None = None, timeout: float = 30):
    """GET /_mq/messages?qre=pattern[&wait=N]."""
    query = f"qre={quote(pattern)}" + (f"&wait={wait}" if wait is not None else "")
    return mq.request("GET", f"/_mq/messages?{query}", timeout=timeout)


def sqs(mq, operation: str, **params) -> dict:
    """One call of the SQS API (JSON protocol; the daemon checks no signature by default)."""
    resp = mq.request("POST", "/", json.dumps(params).encode(), {
        "X-Amz-Target": f"AmazonSQS.{operation}", "Content-Type": "application/x-amz-json-1.0"})
    assert resp.status == 200, (resp.status, resp.body)
    return resp.json()


def two_queues(mq, owners=(0, 1)) -> tuple[str, str, str]:
    """(pattern, first queue, second queue), both created, owned by these fetch actors."""
    prefix = next(prefixes)
    first, second = (queue_owned_by(owner, 2, prefix=f"{prefix}-{tag}-")
                     for owner, tag in zip(owners, "ab"))
    for queue in (first, second):
        assert mq.request("PUT", f"/{queue}").status == 201
    return f"{prefix}-.*", first, second


#: Two queues on different fetch actors, and two on one.
OWNERS = pytest.mark.parametrize("owners", [(0, 1), (1, 1)], ids=["two-actors", "one-actor"])


def test_a_pull_any_over_more_queues_of_one_fetch_actor_than_one_fetch_any_names(any_mq):
    """MAX_QUEUES bounds what one fetch_any or watch names; the front asks an actor that owns
    more in several, so a pattern may match any number of queues (qre=.* is every queue)."""
    prefix = next(prefixes)
    names = (f"{prefix}-{n:05d}" for n in itertools.count())
    queues = list(itertools.islice((q for q in names if fetch_actor_for(q, 2) == 1), MAX_QUEUES + 2))
    local = LocalClient(any_mq.root)
    for queue in queues:
        local.create_queue(queue)
    first, last = queues[0], queues[-1]  # In the first group of MAX_QUEUES, and past it.
    older, younger = any_mq.add(last, b"older"), any_mq.add(first, b"younger")
    for queue, message_id in ((last, older), (first, younger)):
        resp = pull_any(any_mq, f"{prefix}-.*")
        assert resp.status == 200, (resp.status, resp.body)
        assert (resp.header("X-Queue"), resp.header("X-Message-Id")) == (queue, message_id)
    assert pull_any(any_mq, f"{prefix}-.*").status == 204
    answer = {}
    poll = threading.Thread(target=lambda: answer.update(resp=pull_any(any_mq, f"{prefix}-.*", 15)))
    poll.start()
    any_mq.wait_for_events("fetch.watch", 1, queue=first)
    any_mq.wait_for_events("fetch.watch", 1, queue=queues[MAX_QUEUES])  # A watch per group.
    coming = any_mq.add(last, b"coming")
    poll.join(15)
    assert (answer["resp"].status, answer["resp"].header("X-Message-Id")) == (200, coming)


@OWNERS
def test_the_oldest_ready_message_of_any_matching_queue_comes_first(any_mq, owners):
    pattern, first, second = two_queues(any_mq, owners)
    added = [(queue, any_mq.add(queue, f"{queue} {n}".encode()))
             for n, queue in enumerate([second, first, second, first, first])]
    got = []
    for _ in added:
        resp = pull_any(any_mq, pattern)
        assert resp.status == 200
        assert resp.body == f"{resp.header('X-Queue')} {len(got)}".encode()
        got.append((resp.header("X-Queue"), resp.header("X-Message-Id")))
        assert resp.header("X-Receipt") == f"{got[-1][1]}.1"
    assert got == added
    assert pull_any(any_mq, pattern).status == 204


@OWNERS
def test_two_queues_kept_full_are_both_served(any_mq, owners):
    pattern, first, second = two_queues(any_mq, owners)
    for n in range(5):
        any_mq.add(first, b"f")
        any_mq.add(second, b"s")
    served = []
    for _ in range(20):
        # Both queues stay full: each pull is followed by one more message in each.
        resp = pull_any(any_mq, pattern)
        assert resp.status == 200
        served.append(resp.header("X-Queue"))
        any_mq.add(first, b"f")
        any_mq.add(second, b"s")
    assert served.count(first) == served.count(second) == 10


def test_a_long_poll_answers_when_any_matching_queue_gets_a_message(any_mq):
    pattern, first, second = two_queues(any_mq)
    answer = {}
    poll = threading.Thread(target=lambda: answer.update(resp=pull_any(any_mq, pattern, 15)))
    poll.start()
    any_mq.wait_for_events("fetch.watch", 1, queue=first)
    any_mq.wait_for_events("fetch.watch", 1, queue=second)
    added_at = time.monotonic()
    message_id = any_mq.add(second, b"wake up")
    poll.join(15)
    resp = answer["resp"]
    assert (resp.status, resp.header("X-Queue"), resp.header("X-Message-Id"), resp.body) == \
        (200, second, message_id, b"wake up")
    assert time.monotonic() - added_at < 5
    # The watch on the other fetch actor is withdrawn, not left to run out.
    any_mq.wait_for_events("fetch.watch_cancelled", 1, queue=first)


def test_a_long_poll_with_nothing_coming_answers_204_after_its_wait(any_mq):
    pattern, _, _ = two_queues(any_mq)
    started = time.monotonic()
    assert pull_any(any_mq, pattern, 0.5).status == 204
    assert 0.45 <= time.monotonic() - started < 5


def test_a_pull_any_whose_client_hung_up_claims_nothing(any_mq):
    pattern, first, second = two_queues(any_mq)
    with socket.create_connection(("127.0.0.1", any_mq.port)) as sock:
        sock.sendall(f"GET /_mq/messages?qre={quote(pattern)}&wait=15 HTTP/1.1\r\n"
                     "Host: x\r\n\r\n".encode())
        for queue in (first, second):
            any_mq.wait_for_events("fetch.watch", 1, queue=queue)
    # The client hung up; a message comes at once, before the front's next look at the
    # connection: the watch on its queue answers, and the front, seeing the client gone
    # right before it would claim, claims nothing and withdraws the other watch.
    message_id = any_mq.add(first, b"for a live consumer")
    any_mq.wait_for_events("fetch.watch_cancelled", 1, queue=second)
    got = any_mq.fetch(first)
    assert got.status == 200 and got.header("X-Message-Id") == message_id


@pytest.mark.timeout(60)
def test_a_pull_any_over_a_fifo_group_in_flight_answers_204_and_its_actor_serves_on(any_mq):
    prefix = next(prefixes)
    queue = f"{prefix}-jobs.fifo"
    url = sqs(any_mq, "CreateQueue", QueueName=queue, Attributes={"FifoQueue": "true"})["QueueUrl"]
    for n in range(2):
        sqs(any_mq, "SendMessage", QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g",
            MessageDeduplicationId=str(n))
    first = any_mq.fetch(queue)
    assert first.body == b"m0"  # In flight: m1 waits for it.
    pattern = f"{prefix}-jobs.*"
    # Short client timeouts: an actor looping over the held message never answers.
    assert pull_any(any_mq, pattern, timeout=10).status == 204
    assert pull_any(any_mq, pattern, 0.5, timeout=10).status == 204
    # The long poll parked a watch (a front and actor passing the held message back and forth
    # until the wait ran out would answer 204 too, without one).
    any_mq.wait_for_events("fetch.watch", 1, queue=queue)
    neighbour = queue_owned_by(fetch_actor_for(queue, 2), 2, prefix=f"{prefix}-n")
    added = any_mq.add(neighbour, b"served")
    assert any_mq.fetch(neighbour).header("X-Message-Id") == added
    # A long poll waits for the group, and answers once m0 is done.
    answer = {}
    poll = threading.Thread(target=lambda: answer.update(resp=pull_any(any_mq, pattern, 15)))
    poll.start()
    any_mq.wait_for_events("fetch.watch", 2, queue=queue)
    assert any_mq.delete(queue, first.header("X-Message-Id")).status == 204
    poll.join(20)
    second = answer["resp"]
    assert (second.status, second.header("X-Queue"), second.body) == (200, queue, b"m1")


@pytest.mark.parametrize("query, status, why", [
    ("qre=nothing-matches-this", 404, "no queue matches"),
    ("qre=pa-(", 400, "bad regular expression"),
    ("qre=", 400, "qre"),
    ("qre=pa.*&wait=21", 400, "wait"),
    ("qre=pa.*&wait=soon", 400, "wait"),
])
def test_bad_pull_any_requests_get_json_errors(any_mq, query, status, why):
    two_queues(any_mq)
    resp = any_mq.request("GET", f"/_mq/messages?{query}")
    assert resp.status == status and why in resp.json()["message"]
