"""A busy queue's fetches and acks go to the next fetch actor too. It tells the queue's own
actor (through the mover, as `taken`) which messages it claimed; that note may come after the
message has come back ready, and the owner's index then keeps it, under its new deliveries. Its
fetches and acks count in the queue's totals, whether or not it ever listed the queue."""

import pytest
from actor_support import Actors, request
from support import queue_owned_by

from mq.actors.fetch import FetchActor
from mq.config import Options
from mq.http.figures import merge


def two_fetch_actors(tmp_path) -> tuple[Actors, FetchActor, FetchActor, str]:
    """Actors on one root, fetch actors 0 and 1 of two, and a queue fetch actor 0 owns."""
    actors = Actors(tmp_path)
    options = Options(root=actors.root, workers=2, timeout=30.0, sync=actors.disk.sync)
    return (actors, FetchActor(options, 0, actors.run_dir, actors.store),
            FetchActor(options, 1, actors.run_dir, actors.store), queue_owned_by(0, 2))


@pytest.mark.timeout(30)
def test_a_claim_told_after_its_message_came_back_ready_leaves_it_in_the_owner_s_index(tmp_path):
    actors, owner, other, queue = two_fetch_actors(tmp_path)
    sent: list = []
    other.send = lambda sock, note: sent.append(note)  # What goes to the mover, kept.
    [first] = [result["id"] for result in actors.add({"queue": queue, "body": b"1"})]
    assert owner.handle([request("peek", queue=queue)]).results[0]["messages"]  # Indexed.
    claimed = other.handle([request("fetch", queue=queue, wait=0)]).results[0]
    assert claimed["id"] == first
    [relay] = sent
    assert relay.taken and [message_id for message_id, *_ in relay.ids] == [first]
    added = actors.save.handle([request("add", queue=queue, body=b"2")])
    second = added.results[0]["id"]
    owner.handle([request("ready", queue=queue, ids=added.ready[queue])])
    # The consumer's nack reaches the owner before the other actor's note does.
    nacked = owner.handle([request("nack", queue=queue, id=first, receipt=claimed["receipt"])])
    assert nacked.results[0] == {"id": first, "dead_letter": None}
    owner.handle([request("taken", queue=relay.queue, ids=relay.ids)])
    assert owner.handle([request("stats")]).results[0]["queues"][queue]["ready"] == 2
    fetched = owner.handle([request("fetch", queue=queue, wait=0)]).results[0]
    assert fetched["id"] == first  # The oldest ready message, not passed over.
    assert owner.handle([request("fetch", queue=queue, wait=0)]).results[0]["id"] == second


@pytest.mark.timeout(30)
def test_acks_on_the_next_fetch_actor_count_in_the_queue_s_totals_when_it_never_fetched(tmp_path):
    actors, owner, other, queue = two_fetch_actors(tmp_path)
    actors.add({"queue": queue, "body": b"1"})
    claimed = owner.handle([request("fetch", queue=queue, wait=0)]).results[0]
    # The owner was busy when the consumer acked: the front sent the ack to the next actor.
    assert other.handle([request("ack", queue=queue, id=claimed["id"],
                                 receipt=claimed["receipt"])]).results[0] == {"id": claimed["id"]}
    answers = [actor.handle([request("stats")]).results[0] for actor in (owner, other)]
    totals = merge(["fetch-0", "fetch-1"], answers, 0.0)["queues"][queue]["totals"]
    assert (totals.get("fetches"), totals.get("acks")) == (1, 1), totals


@pytest.mark.timeout(30)
def test_a_long_poll_parked_on_the_next_fetch_actor_takes_nothing_of_a_queue_made_fifo(tmp_path):
    # Its groups are held in its own actor's memory: the other one, fed its parked long
    # polls, would hand out a group's next message while the owner's delivery of the
    # group's earlier one is in flight.
    actors, owner, other, queue = two_fetch_actors(tmp_path)
    actors.add({"queue": queue, "body": b"0", "group": "h"})
    owner.handle([request("props_patch", queue=queue, properties={"fifo": True})])
    for body in (b"1", b"2"):
        actors.add({"queue": queue, "body": body, "group": "g"})
    # What the other actor's parked long polls take (FetchActor.serve_waiters).
    early = other.take_or_error(other.batch_class([]), queue)
    held = owner.handle([request("fetch", queue=queue, wait=0)]).results[0]
    if held["body"] == b"0":
        held = owner.handle([request("fetch", queue=queue, wait=0)]).results[0]
    assert held["body"] == b"1"  # In flight: group g is held.
    taken = other.take_or_error(other.batch_class([]), queue)
    assert taken is None or taken["body"] != b"2", "group g's next message, while its earlier one is in flight"
    assert (early, taken) == (None, None)
