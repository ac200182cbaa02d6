"""A queue's bytes (its statistics) follow its messages without a stat of their files: a save
actor tells the fetch actor each ready file's size with its id, and a claim keeps the size it
read for the message's ack (a stat is a round trip on a network file system)."""

import os

import pytest

from actor_support import Actors, request
from mq.actors import queue_bytes


def queue_bytes_now(actors: Actors) -> int:
    """The queue's bytes as the fetch actor's statistics give them."""
    return actors.call("stats")["queues"]["q"]["bytes"]


@pytest.mark.timeout(30)
def test_a_queue_s_bytes_come_from_the_writer_and_the_claim_not_a_stat(tmp_path, monkeypatch):
    actors = Actors(tmp_path)
    actors.add({"queue": "q", "body": b"first"})
    assert queue_bytes_now(actors) > 0  # The queue is indexed: its folder was listed once.
    batch = actors.save.handle([request("add", queue="q", body=b"x" * 100)])
    [[message_id, attempts, size]] = batch.ready["q"]
    assert (attempts, size) == (0, os.stat(actors.store.ready_path("q", message_id)).st_size)
    before = queue_bytes_now(actors)

    def no_stat(path):
        raise AssertionError(f"a stat of {path}")

    monkeypatch.setattr(queue_bytes, "file_size", no_stat)
    actors.fetcher.handle([request("ready", queue="q", ids=batch.ready["q"])])
    assert queue_bytes_now(actors) == before + size
    fetched = [actors.call("fetch", queue="q", wait=0) for _ in range(2)]
    assert queue_bytes_now(actors) == before + size  # In flight: still the queue's.
    for message in fetched:
        assert actors.call("ack", queue="q", id=message["id"], receipt=message["receipt"]) == {"id": message["id"]}
    assert queue_bytes_now(actors) == 0
