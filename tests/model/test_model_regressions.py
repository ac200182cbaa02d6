"""Focused tests of rules the model's state machines once found the daemon or mq.local
breaking: each holds one such rule in a few steps, so that it stays fixed even in a run whose
machines do not happen to reach it."""

import json
import os
import signal
import time
import urllib.parse

import pytest

import root_view
from model_runs import start_daemon
from fronts_more import Sqs
from support import poll_for


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """The module's daemon (--peers=0)."""
    daemon = start_daemon(tmp_path_factory.mktemp("regressions"))
    yield daemon
    daemon.cleanup()


def wait_until(when: float) -> None:
    """Return once time.time() has passed `when`: a timer the test set is due (the test then
    polls for its effect)."""
    while (left := when - time.time()) > 0:
        time.sleep(min(left, 0.05))


def fifo_queue_with_one_group(daemon, name: str, count: int = 2) -> Sqs:
    """A fifo queue made through SQS holding `count` messages of one group."""
    sqs = Sqs(daemon)
    sqs.create_queue(name, {"timeout": 600, "retry": -1})
    for n in range(count):
        sqs.add(name, f"m{n}", group="g")
    return sqs


def accumulating_queue(daemon, name: str, limit: int | None = None) -> None:
    """A queue with a 0.5 s window (and a body limit)."""
    props = {"accum": 0.5, **({"max_body_bytes": limit} if limit else {})}
    assert daemon.request("PUT", f"/{name}").status == 201
    assert daemon.request("PUT", f"/{name}/properties", json.dumps(props).encode()).status == 200


def test_local_get_never_hands_out_a_message_past_retention(tmp_path):
    """mq.local alone on a root: a message older than its queue's retention is not handed out."""
    from mq.local import LocalClient
    client = LocalClient(tmp_path / "root", create_root=True)
    client.set_properties("old", retention=1)
    client.put("old", b"x")
    added = time.time()
    wait_until(added + 1.2)
    assert client.get("old") is None


def test_local_get_holds_back_a_group_in_flight(daemon):
    """mq.local on a fifo queue: the group's second message waits while the first is out."""
    from mq.local import LocalClient
    fifo_queue_with_one_group(daemon, "local-groups.fifo")
    client = LocalClient(daemon.root, strict_fifo=True)
    assert client.get("local-groups.fifo").body == b"m0"
    assert client.get("local-groups.fifo") is None


def test_batch_fetch_says_a_compound_is_one(daemon):
    """A batch fetch's part for a compound says X-Message-Kind: compound, as a fetch does."""
    accumulating_queue(daemon, "batch-compound")
    due = daemon.request("POST", "/batch-compound/messages", b"part").json()["due"]
    wait_until(due)
    resp = poll_for(lambda: (r := daemon.request("GET", "/batch-compound/messages?max=10"))
                    .status == 200 and r, 10, what="the compound")
    assert b"X-Message-Kind: compound" in resp.body


def test_a_refused_batch_add_leaves_no_part(daemon):
    """A batch add to an accumulating queue refused for one body over the queue's limit
    leaves nothing in the window (it is refused before anything is written)."""
    accumulating_queue(daemon, "batch-parts", limit=64)
    lines = b'{"body": "fits"}\n{"body": "%s"}' % (b"x" * 65)
    resp = daemon.request("POST", "/batch-parts/messages", lines,
                          {"Content-Type": "application/x-ndjson"})
    assert resp.status == 413, resp.body
    assert root_view.files(daemon.root, "batch-parts") == {}


def test_a_huge_batch_fetch_max_is_400(daemon):
    """?max= far past 100 is refused with 400, like 101."""
    assert daemon.request("PUT", "/huge-max").status == 201
    resp = daemon.request("GET", "/huge-max/messages?max=" + urllib.parse.quote("1" + "0" * 30))
    assert resp.status == 400, (resp.status, resp.body)


def test_a_daemon_returns_a_message_whose_timer_mq_local_shortened(daemon):
    """A claim by mq.local that the daemon's mover already times, then extended by mq.local
    to 0.3 s: the daemon returns the message after 0.3 s, not after the first timer."""
    from mq.local import LocalClient
    # Made through the daemon: its statistics then list the queue at once, not at the fetch
    # actors' next listing of queues/ (every 5 s), which `timed` below would wait for.
    assert daemon.request("PUT", "/shortened").status == 201
    client = LocalClient(daemon.root)
    client.set_properties("shortened", timeout=600)
    client.put("shortened", b"x")
    message = client.get("shortened")

    def timed():
        """The mover counts the claim in flight: it has timed it."""
        stats = daemon.request("GET", "/_mq/stats").json()["queues"].get("shortened", {})
        return stats.get("in_flight") == 1

    poll_for(timed, 10, what="the mover to time the claim")
    due = client.extend(message, 0.3)
    wait_until(due)
    poll_for(lambda: root_view.files(daemon.root, "shortened") == {message.id: ("ready", 1)}, 30,
             what="the message back in its queue")


def test_pull_any_answers_204_when_every_group_is_held(daemon):
    """Pull-any over a fifo queue whose only ready message is held back answers 204 at once
    (it once spun instead)."""
    fifo_queue_with_one_group(daemon, "pull-any-groups.fifo")
    assert daemon.request("GET", "/pull-any-groups.fifo/messages").status == 200
    started = time.monotonic()
    resp = daemon.request("GET", "/_mq/messages?qre=pull-any-groups%5C.fifo", timeout=30)
    assert resp.status == 204 and time.monotonic() - started < 10


def test_a_returned_message_keeps_its_group_before_the_fetch_actor_is_told(daemon):
    """A fifo message whose timer ran out: the mover renames it back to its queue, then tells
    the fetch actor. A fetch in between must not hand out the group's next message (it once
    did: the group was free as soon as the in-flight name was gone). The mover is stopped and
    its rename done here, so that the fetch lands in that window every time."""
    queue = "returned-first.fifo"
    sqs = Sqs(daemon)
    sqs.create_queue(queue, {"timeout": 1, "retry": -1})
    for n in range(2):
        sqs.add(queue, f"m{n}", group="g")
    first = daemon.request("GET", f"/{queue}/messages")
    assert (first.status, first.body) == (200, b"m0")
    message_id = first.header("X-Message-Id")
    claimed = time.time()
    in_flight = daemon.root / "delay" / f"{queue}:{message_id}.1"
    back = daemon.root / "queues" / queue / f"{message_id}.1"

    def timed():
        """The mover counts the claim in flight: it has timed it."""
        stats = daemon.request("GET", "/_mq/stats").json()["queues"].get(queue, {})
        return stats.get("in_flight") == 1

    poll_for(timed, 10, what="the mover to time the claim")
    mover = daemon.pid_of("mover-0")
    os.kill(mover, signal.SIGSTOP)
    try:
        wait_until(claimed + 1.1)
        os.rename(in_flight, back)  # The mover's first step; its "ready" is not sent yet.
        held = daemon.request("GET", f"/{queue}/messages")
        assert held.status == 204, (held.status, held.body)
        os.rename(back, in_flight)  # Undone: the mover returns it itself once let go on.
    finally:
        os.kill(mover, signal.SIGCONT)

    def returned():
        """The next fetch's answer once the mover has returned m0 (None while it has not)."""
        resp = daemon.request("GET", f"/{queue}/messages")
        return None if resp.status == 204 else resp

    again = poll_for(returned, 10, what="m0 back from the mover")
    assert (again.status, again.body) == (200, b"m0")
    assert daemon.request("GET", f"/{queue}/messages").status == 204  # m1 waits for m0.
