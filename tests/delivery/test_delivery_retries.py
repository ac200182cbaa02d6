"""Retries and dead letters: past `retry` redeliveries a message moves, never vanishes."""

from delivery_support import (added, fetch, fetch_when_ready, fetched, fresh_queue, names_of,
                              reply, restart, set_props, shared_mq, start_killed)  # noqa: F401
import pytest
from support import fetch_actor_for, poll_for, queue_owned_by

#: The module's tests on one xdist worker: spread over the workers, each started its shared daemon.
pytestmark = pytest.mark.xdist_group("delivery-retries")


def deliver_and_let_time_out(mq, queue: str, message_id: str, times: int) -> None:
    """Fetch the message `times` times, never acknowledging it."""
    for n in range(1, times + 1):
        resp, _ = fetch_when_ready(mq, queue)
        assert (resp.header("X-Message-Id"), resp.header("X-Attempts")) == (message_id, str(n))


def test_past_retry_a_timed_out_message_goes_to_the_dead_letter_queue(shared_mq):
    queue = fresh_queue("retry")
    set_props(shared_mq, queue, {"retry": 1})
    message_id = added(shared_mq, queue, b"poison", headers={"Content-Type": "text/plain"})
    deliver_and_let_time_out(shared_mq, queue, message_id, 2)
    dead = f"{queue}.dead"
    poll_for(lambda: names_of(shared_mq, message_id) == [f"queues/{dead}/{message_id}"], 30,
             what="the message to reach the dead-letter queue")
    assert fetch(shared_mq, queue).status == 204
    resp = fetched(shared_mq, dead)
    assert (resp.header("X-Message-Id"), resp.body) == (message_id, b"poison")
    assert resp.header("Content-Type") == "text/plain"
    assert resp.header("X-Attempts") == "1", "a dead letter starts its own count"


def test_retry_zero_sends_it_to_the_dead_letter_queue_after_the_first_delivery(shared_mq):
    queue = fresh_queue("retry0")
    set_props(shared_mq, queue, {"retry": 0})
    message_id = added(shared_mq, queue, b"once")
    deliver_and_let_time_out(shared_mq, queue, message_id, 1)
    dead = f"{queue}.dead"
    poll_for(lambda: names_of(shared_mq, message_id) == [f"queues/{dead}/{message_id}"], 30,
             what="the message to reach the dead-letter queue")
    assert fetched(shared_mq, dead).header("X-Message-Id") == message_id
    assert fetch(shared_mq, queue).status == 204


def test_a_nack_past_retry_dead_letters_at_once_into_the_named_queue(shared_mq):
    queue, graveyard = fresh_queue("nack"), fresh_queue("graveyard")
    set_props(shared_mq, queue, {"retry": 1, "dead_letter_queue": graveyard, "timeout": 60})
    message_id = added(shared_mq, queue, b"bad input")
    assert reply(shared_mq, queue, message_id, "nack", fetched(shared_mq, queue).header("X-Receipt")
                 ).status == 204
    second = fetched(shared_mq, queue)
    assert second.header("X-Attempts") == "2"
    resp = reply(shared_mq, queue, message_id, "nack", second.header("X-Receipt"))
    assert resp.status == 200
    assert resp.json() == {"id": message_id, "dead_letter_queue": graveyard}
    assert names_of(shared_mq, message_id) == [f"queues/{graveyard}/{message_id}"]
    assert fetched(shared_mq, graveyard).header("X-Message-Id") == message_id
    assert fetch(shared_mq, queue).status == 204


def test_redrive_moves_dead_letters_back_as_new_messages(shared_mq):
    queue = fresh_queue("redrive")
    set_props(shared_mq, queue, {"retry": 0, "timeout": 60})
    ids = [added(shared_mq, queue, b"%d" % n) for n in range(3)]
    for message_id in ids:
        resp = fetched(shared_mq, queue)
        assert reply(shared_mq, queue, message_id, "nack", resp.header("X-Receipt")).status == 200
    assert fetch(shared_mq, queue).status == 204
    resp = shared_mq.request("POST", f"/{queue}/redrive")
    assert resp.status == 200
    assert resp.json() == {"queue": queue, "dead_letter_queue": f"{queue}.dead", "moved": 3}
    got = [fetched(shared_mq, queue) for _ in ids]
    assert sorted(r.header("X-Message-Id") for r in got) == sorted(ids)
    assert {r.header("X-Attempts") for r in got} == {"1"}
    assert fetch(shared_mq, f"{queue}.dead").status == 204
    again = shared_mq.request("POST", f"/{queue}/redrive")
    assert again.json()["moved"] == 0


def stored_bytes(mq, queue: str) -> int:
    """The bytes of the queue's message files on disk."""
    folder = mq.root / "queues" / queue
    return sum(path.stat().st_size for path in folder.iterdir() if not path.name.startswith("."))


def ready_and_bytes(mq, queue: str) -> tuple[int, int]:
    """A queue's ready count (GET /{queue}) and its bytes (/_mq/stats)."""
    ready = mq.request("GET", f"/{queue}").json()["ready"]
    return ready, mq.request("GET", "/_mq/stats").json()["queues"].get(queue, {}).get("bytes", 0)


@pytest.mark.parametrize("owners", [(0, 0), (0, 1), (1, 0)], ids=["same", "other", "other-back"])
def test_a_redrive_leaves_the_dead_letter_queue_counted_empty(shared_mq, owners):
    # The dead-letter queue's ready count and bytes follow the move at once, whichever fetch
    # actor owns it; the queue's follow it too.
    queue = queue_owned_by(owners[0], shared_mq.workers, prefix=fresh_queue("back"))
    dead = queue_owned_by(owners[1], shared_mq.workers, prefix=fresh_queue("dlq"))
    set_props(shared_mq, queue, {"retry": 0, "timeout": 60, "dead_letter_queue": dead})
    ids = [added(shared_mq, queue, b"x" * (100 * n)) for n in range(1, 4)]
    for message_id in ids:
        resp = fetched(shared_mq, queue)
        assert reply(shared_mq, queue, message_id, "nack", resp.header("X-Receipt")).status == 200
    own = added(shared_mq, queue, b"its own")  # The queue's index is not empty: no re-listing.
    size, own_size = stored_bytes(shared_mq, dead), stored_bytes(shared_mq, queue)
    assert size > 600
    poll_for(lambda: ready_and_bytes(shared_mq, dead) == (3, size), 30,
             what="the dead letters counted in their queue")
    assert ready_and_bytes(shared_mq, queue) == (1, own_size)
    assert shared_mq.request("POST", f"/{queue}/redrive").json()["moved"] == 3
    assert stored_bytes(shared_mq, dead) == 0 and stored_bytes(shared_mq, queue) == own_size + size
    poll_for(lambda: ready_and_bytes(shared_mq, dead) == (0, 0), 10,
             what="the dead-letter queue counted empty after the redrive")
    assert ready_and_bytes(shared_mq, queue) == (4, own_size + size)
    got = [fetched(shared_mq, queue).header("X-Message-Id") for _ in range(4)]
    assert sorted(got) == sorted([own, *ids])


# -- across kill -9 of the whole tree ------------------------------------------------------


def test_dead_lettering_and_redrive_survive_kill_9(start_killed):
    mq = start_killed(workers=2, timeout=1)
    queue = fresh_queue("deadcrash")
    set_props(mq, queue, {"retry": 1})
    message_id = added(mq, queue, b"keeps failing")
    deliver_and_let_time_out(mq, queue, message_id, 2)
    # Killed while delivery 2 (the last one allowed) is in flight.
    mq.kill_tree()
    assert names_of(mq, message_id) == [f"delay/{queue}:{message_id}.2"]
    mq.start().wait_ready()
    dead = f"{queue}.dead"
    poll_for(lambda: names_of(mq, message_id) == [f"queues/{dead}/{message_id}"], 30,
             what="the message to be dead-lettered after the restart")
    assert fetch(mq, queue).status == 204
    restart(mq)
    assert names_of(mq, message_id) == [f"queues/{dead}/{message_id}"]
    assert mq.request("POST", f"/{queue}/redrive").json()["moved"] == 1
    restart(mq)
    resp = fetched(mq, queue)
    assert (resp.header("X-Message-Id"), resp.body, resp.header("X-Attempts")) == (
        message_id, b"keeps failing", "1")


def test_retry_minus_one_redelivers_forever_past_the_probed_counts(shared_mq):
    queue = fresh_queue("forever")
    set_props(shared_mq, queue, {"retry": -1, "timeout": 60})
    message_id = added(shared_mq, queue, b"again")
    for n in range(1, 104):  # Past 101 deliveries, the most a `retry` count allows.
        resp = fetched(shared_mq, queue)
        assert resp.header("X-Attempts") == str(n)
        assert reply(shared_mq, queue, message_id, "nack", resp.header("X-Receipt")).status == 204
    set_props(shared_mq, queue, {"timeout": 0.2})
    assert fetched(shared_mq, queue).header("X-Attempts") == "104"
    resp, _ = fetch_when_ready(shared_mq, queue)  # The timer ran out: back, not dead.
    assert resp.header("X-Attempts") == "105"
    assert reply(shared_mq, queue, message_id, "ack", resp.header("X-Receipt")).status == 204
    assert names_of(shared_mq, message_id) == []
    assert shared_mq.request("GET", f"/{queue}.dead").status == 404


def nacked_past_the_probed_counts(mq, queue: str, message_id: str, times: int = 102) -> None:
    """Fetch and nack a message `times` times (no delay, so fast), leaving it ready."""
    for n in range(1, times + 1):
        resp = fetched(mq, queue)
        assert (resp.header("X-Message-Id"), resp.header("X-Attempts")) == (message_id, str(n))
        assert reply(mq, queue, message_id, "nack", resp.header("X-Receipt")).status == 204


def restarted_fetch_actor(mq, queue: str) -> None:
    """kill -9 the queue's fetch actor and wait until its successor answers."""
    owner = f"fetch-{fetch_actor_for(queue, 2)}"
    mq.wait_for_new_pid(owner, mq.kill_child(owner))
    poll_for(lambda: mq.request("GET", f"/{queue}").status != 503, 30,
             what="the restarted fetch actor to answer")


def test_retry_minus_one_a_message_past_101_deliveries_is_found_by_id(start_killed):
    """Without a receipt (a reply, a DELETE by id) the message is found at any delivery count,
    also by a fetch actor restarted since it handed the message out."""
    mq = start_killed(workers=2, timeout=60)
    queue = fresh_queue("far")
    set_props(mq, queue, {"retry": -1})
    message_id = added(mq, queue, b"again and again")
    nacked_past_the_probed_counts(mq, queue, message_id)
    assert fetched(mq, queue).header("X-Attempts") == "103"
    resp = reply(mq, queue, message_id, "ext", seconds=30)
    assert resp.status == 200, (resp.status, resp.body)
    assert resp.header("X-Receipt") == f"{message_id}.103"
    # The restarted actor never handed it out: in flight as delivery 103, in delay/ only.
    restarted_fetch_actor(mq, queue)
    resp = reply(mq, queue, message_id, "ext", seconds=30)
    assert resp.status == 200, (resp.status, resp.body)
    assert resp.header("X-Receipt") == f"{message_id}.103"
    stale = reply(mq, queue, message_id, "ack", f"{message_id}.3")
    assert stale.status == 409, (stale.status, stale.body)
    assert reply(mq, queue, message_id, "nack").status == 204
    assert names_of(mq, message_id) == [f"queues/{queue}/{message_id}.103"]
    restarted_fetch_actor(mq, queue)
    assert reply(mq, queue, message_id, "ext").status == 409  # Ready, not in flight.
    assert fetched(mq, queue).header("X-Attempts") == "104"
    restarted_fetch_actor(mq, queue)
    resp = mq.request("DELETE", f"/{queue}/messages/{message_id}")
    assert resp.status == 204, (resp.status, resp.body)
    assert names_of(mq, message_id) == []
    assert mq.request("DELETE", f"/{queue}/messages/{message_id}").status == 404
