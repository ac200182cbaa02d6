"""The sweep that drops a process's per-queue state once the queue is gone from queues/: it
forgets the queues that went, keeps those that exist, waits between listings, and takes no
live queue for gone when a listing comes back short."""

import logging

import pytest

from mq.store import Store
from mq.store.gone_queues import SWEEP_SECONDS, GoneQueues


@pytest.fixture
def store(tmp_path):
    """A root with the queues a and b."""
    store = Store(str(tmp_path / "root"))
    store.init()
    store.queues.create_queue("a")
    store.queues.create_queue("b")
    return store


def sweep(store, kept: set[str], list_queues=None):
    """A sweep over one table holding `kept`, its clock, and the sets it forgot."""
    now, forgotten = [0.0], []

    def forget(gone):
        forgotten.append(gone)
        kept.difference_update(gone)

    gone = GoneQueues(list_queues or store.queues.list_queues, store.queues.queue_exists,
                      lambda: {"table": kept}, forget, logging.getLogger("test"),
                      clock=lambda: now[0])
    return gone, now, forgotten


def test_a_deleted_queue_is_forgotten_at_the_next_sweep_and_an_existing_one_kept(store):
    kept = {"a", "b", "never-made"}
    gone, now, forgotten = sweep(store, kept)
    store.queues.delete_queue("b")
    gone()
    assert forgotten == []  # Not yet: one listing every SWEEP_SECONDS.
    now[0] += SWEEP_SECONDS
    gone()
    assert forgotten == [{"b", "never-made"}] and kept == {"a"}
    assert gone.sizes() == {"table": 1}


def test_a_short_listing_takes_no_queue_that_exists(store):
    kept = {"a", "b"}
    gone, now, forgotten = sweep(store, kept, list_queues=lambda: [])
    now[0] += SWEEP_SECONDS
    gone()
    assert forgotten == [] and kept == {"a", "b"}


def test_nothing_is_forgotten_while_queues_cannot_be_listed(store, tmp_path):
    kept = {"a", "b"}

    def unlisted():
        raise ConnectionAbortedError("the file system went away")

    gone, now, forgotten = sweep(store, kept, list_queues=unlisted)
    store.queues.delete_queue("b")
    now[0] += SWEEP_SECONDS
    gone()
    assert forgotten == [] and kept == {"a", "b"}
