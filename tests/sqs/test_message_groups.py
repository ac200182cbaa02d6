"""Message groups of fifo queues in the fetch actor, served in-process on a real root: one
message of a group in flight at a time, the same holder excepted, and the held groups found
again by a fetch actor that starts after a crash."""

import os

import pytest

from mq.actors.fetch import FetchActor
from mq.store import Disk, Store
from mq.store.group_claims import group_key

from actor_support import Actors, request


def fifo_queue(actors: Actors, queue: str, messages: list[tuple[str, str]]) -> None:
    """A fifo queue holding (body, group) messages, added in order."""
    assert "own" in actors.call("props_put", queue=queue, properties={"fifo": True})
    for body, group in messages:
        assert "id" in actors.add({"queue": queue, "body": body.encode(), "group": group or None})[0]


def bodies(actors: Actors, queue: str, holder=None, actor=None) -> list[str]:
    """Fetch until empty; the bodies handed out."""
    out = []
    while True:
        result = (actor or actors.fetcher).handle(
            [request("fetch", queue=queue, holder=holder)]).results[0]
        if result.get("empty"):
            return out
        out.append(result["body"].decode())


def test_a_group_in_flight_is_passed_over_and_other_groups_proceed(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "q", [("a1", "a"), ("a2", "a"), ("b1", "b"), ("x", "")])
    first = actors.call("fetch", queue="q")
    assert (first["body"], first["group"]) == (b"a1", "a")
    assert bodies(actors, "q") == ["b1", "x"]  # a2 waits for a1; b and ungrouped go on.
    assert actors.call("ack", queue="q", id=first["id"], receipt=first["receipt"]) == {"id": first["id"]}
    assert bodies(actors, "q") == ["a2"]


def test_the_same_holder_takes_a_group_in_order(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "q", [("a1", "a"), ("a2", "a"), ("a3", "a")])
    first = actors.call("fetch", queue="q")
    assert bodies(actors, "q", holder="someone else") == []
    assert bodies(actors, "q", holder=first["holder"]) == ["a2", "a3"]


def test_a_holder_gets_its_groups_next_messages_first(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "q", [("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")])
    first = actors.call("fetch", queue="q")
    assert bodies(actors, "q", holder=first["holder"]) == ["a2", "b1", "b2"]


def test_a_restarted_fetch_actor_still_holds_groups_in_flight(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "q", [("a1", "a"), ("a2", "a"), ("b1", "b")])
    assert actors.call("fetch", queue="q")["body"] == b"a1"
    restarted = FetchActor(actors.options, 0, actors.run_dir, actors.store)
    assert bodies(actors, "q", actor=restarted) == ["b1"]


def test_without_the_fifo_property_groups_do_not_hold(tmp_path):
    actors = Actors(tmp_path)
    for body in ("a1", "a2"):
        actors.add({"queue": "q", "body": body.encode(), "group": "a"})
    assert bodies(actors, "q") == ["a1", "a2"]


def test_with_peers_a_group_still_goes_in_order_and_one_at_a_time(tmp_path):
    # --peers picks at random among the oldest few; never a group's second message first.
    actors = Actors(tmp_path, peers=1)
    fifo_queue(actors, "q", [(f"a{n}", "a") for n in range(12)])
    for n in range(12):
        got = actors.call("fetch", queue="q")
        assert got["body"] == f"a{n}".encode()
        assert actors.call("fetch", queue="q") == {"empty": True}  # a{n} is in flight.
        assert actors.call("ack", queue="q", id=got["id"], receipt=got["receipt"]) == {"id": got["id"]}


def test_with_peers_the_fetches_spread_over_the_free_groups_heads(tmp_path):
    actors = Actors(tmp_path, peers=2)
    fifo_queue(actors, "q", [(f"{g}{n}", g) for n in range(3) for g in "abcd"])
    firsts = sorted(actors.call("fetch", queue="q")["body"].decode() for _ in range(4))
    assert firsts == ["a0", "b0", "c0", "d0"]
    assert actors.call("fetch", queue="q") == {"empty": True}


@pytest.mark.timeout(20)
def test_pull_any_over_a_group_held_in_flight_answers_empty(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "jobs.fifo", [("m0", "g"), ("m1", "g")])
    fifo_queue(actors, "other", [])
    assert actors.call("fetch", queue="jobs.fifo")["body"] == b"m0"
    queues = ["jobs.fifo", "other"]
    assert actors.call("fetch_any", queues=queues) == {"empty": True}
    assert actors.call("fetch_any", queues=queues, claim=False) == {"empty": True}
    assert actors.call("watch", queues=queues, wait=0) == {"empty": True}
    added = actors.add({"queue": "other", "body": b"free"})[0]["id"]
    assert actors.call("fetch_any", queues=queues, claim=False) == {"queue": "other", "id": added}
    assert actors.call("fetch_any", queues=queues)["body"] == b"free"


def peer_of(actors: Actors, tmp_path) -> FetchActor:
    """The fetch actor of a second daemon on the same root: its own Store, Disk and memory."""
    store = Store(actors.root, actors.disk.sync, disk=Disk(actors.disk.sync))
    return FetchActor(actors.options, 0, str(tmp_path / "run-peer"), store)


def fetch_on(actor: FetchActor, queue: str, holder=None) -> dict:
    """One fetch on a given fetch actor."""
    return actor.handle([request("fetch", queue=queue, holder=holder)]).results[0]


def test_with_peers_two_daemons_never_both_have_a_group_in_flight(tmp_path):
    actors = Actors(tmp_path, peers=1)
    peer = peer_of(actors, tmp_path)
    fifo_queue(actors, "q", [(f"a{n}", "a") for n in range(1, 5)])
    first = fetch_on(peer, "q")  # The peer knows the queue, and holds the group.
    assert first["body"] == b"a1"
    assert actors.call("fetch", queue="q") == {"empty": True}
    assert fetch_on(peer, "q", holder=first["holder"])["body"] == b"a2"  # Its holder goes on.
    assert fetch_on(peer, "q") == {"empty": True}
    # With a1 gone, a2 still holds the group: the claim names both.
    assert peer.handle([request("ack", queue="q", id=first["id"], receipt=first["receipt"])]
                       ).results[0] == {"id": first["id"]}
    assert actors.call("fetch", queue="q") == {"empty": True}


def test_with_peers_a_group_freed_on_one_daemon_goes_on_in_order_on_the_other(tmp_path):
    actors = Actors(tmp_path, peers=1)
    peer = peer_of(actors, tmp_path)
    fifo_queue(actors, "q", [(f"a{n}", "a") for n in range(1, 5)])
    first = fetch_on(peer, "q")
    assert first["body"] == b"a1"
    assert peer.handle([request("ack", queue="q", id=first["id"], receipt=first["receipt"])]
                       ).results[0] == {"id": first["id"]}
    second = actors.call("fetch", queue="q")
    assert second["body"] == b"a2"
    assert fetch_on(peer, "q") == {"empty": True}  # a2 is in flight on the other daemon.
    assert actors.call("ack", queue="q", id=second["id"], receipt=second["receipt"]) == {"id": second["id"]}
    assert fetch_on(peer, "q")["body"] == b"a3"
    assert actors.call("fetch", queue="q") == {"empty": True}
    assert os.listdir(actors.store.folder("groups")) == [f"q:{group_key('a')}"]


def test_without_peers_no_claim_is_written(tmp_path):
    actors = Actors(tmp_path)
    fifo_queue(actors, "q", [("a1", "a")])
    assert actors.call("fetch", queue="q")["body"] == b"a1"
    assert os.listdir(actors.store.folder("groups")) == []
