"""The fetch actor's state objects, through the actor run in-process on a real root: each
changes only through its own methods, and those keep what the actor relies on."""

import os
import time

from actor_support import Actors

from mq.actors.batch import DEFERRED, Request
from mq.actors.deliveries import Deliveries
from mq.ids import new_id
from mq.supervisor import heartbeat
from mq.supervisor.heartbeat import Heartbeats


def asked(op: str, rid: int, **fields) -> Request:
    """A request from one front, with its own request id."""
    return Request(b"front", bytes([0] * 7 + [rid]), dict(fields, op=op, v=1))


def test_a_cancel_drops_only_the_long_poll_or_watch_it_names(tmp_path):
    actors = Actors(tmp_path)
    actors.store.queues.create_queue("q")
    parked = actors.fetcher.handle([asked("fetch", 1, queue="q", wait=10),
                                    asked("fetch_batch", 2, queue="q", max=3, wait=10),
                                    asked("watch", 3, queues=["q"], wait=10)]).results
    assert parked == [DEFERRED] * 3
    assert [(w.rid[-1], w.limit) for w in actors.fetcher.waiters.waiting("q")] == [(1, None), (2, 3)]
    actors.fetcher.handle([Request(b"front", b"", {"op": "cancel", "request": bytes([0] * 7 + [1])})])
    assert [w.rid[-1] for w in actors.fetcher.waiters.waiting("q")] == [2]
    assert actors.fetcher.watches
    actors.fetcher.handle([Request(b"front", b"", {"op": "cancel", "request": bytes([0] * 7 + [3])})])
    assert not actors.fetcher.watches and actors.fetcher.waiters


def test_deliveries_keep_the_newest_up_to_their_limit():
    deliveries = Deliveries(limit=2)
    for n, message_id in enumerate(["a", "b", "c"], start=1):
        deliveries.handed("q", message_id, n)
    assert len(deliveries) == 2
    assert deliveries.settled("q", "a") is None  # The oldest went first.
    assert deliveries.settled("q", "b") == 2 and deliveries.settled("q", "b") is None


def test_deliveries_past_the_probed_counts_are_kept_and_delay_is_listed_for_them_lazily(tmp_path):
    # retry -1: a message may pass the 101 deliveries a lookup by id probes. Those handed out
    # are never dropped for room; others are listed from delay/ once a lookup missed, at most
    # once every FAR_LIST_SECONDS, so a storm of 404s lists nothing more.
    actors = Actors(tmp_path)
    store = actors.store
    listed = []
    list_past = store.queues.list_delivered_past
    store.queues.list_delivered_past = lambda count: listed.append(count) or list_past(count)
    deliveries = Deliveries(limit=1)
    deliveries.handed("q", "far", 200)
    deliveries.handed("q", "near", 3)
    assert len(deliveries) == 1 and deliveries.far(store, "q", "far") == 200 and listed == []
    listed_id = new_id()
    os.close(os.open(store.delay_path("q", listed_id, 150), os.O_CREAT | os.O_WRONLY))
    assert deliveries.far(store, "q", listed_id) == 150 and listed == [101]
    assert deliveries.far(store, "q", "missing") is None and listed == [101]
    assert deliveries.settled("q", "far") is None
    assert deliveries.far(store, "q", "far") is None and listed == [101]


def test_indexing_every_owned_queue_beats_once_a_queue(tmp_path):
    # A listing a queue: with thousands of queues (or a slow file system) the loop outlasts
    # --hang-timeout, and a supervisor that heard nothing meanwhile killed a working actor.
    actors = Actors(tmp_path)
    for queue in ("q1", "q2", "q3"):
        actors.store.queues.create_queue(queue)
    slot = Heartbeats(1).slot(0)
    slot.stamp(0.0)
    beats = []

    def owns(queue: str) -> bool:
        beats.append(slot.read())  # Before this queue's listing, after the one before.
        return True

    heartbeat.attach(slot)
    try:
        actors.fetcher.indexes.index_owned(owns)
    finally:
        heartbeat.attach(None)
    assert len(beats) == 3 and 0.0 < beats[0] < beats[1] < beats[2]


def answered_by(fetcher) -> list:
    """Serve the fetcher's long polls between batches, as its loop does; (rid, result) of each
    poll answered."""
    answers: list = []
    fetcher.sock = object()  # Served as over a socket: its long polls are answered.
    fetcher.reply_all = lambda sent: answers.extend((rid[-1], result) for _, rid, result in sent)
    fetcher.reply = lambda peer, rid, result: answers.append((rid[-1], result))  # a watch's
    fetcher.serve_waiters()
    return answers


def test_a_short_poll_behind_a_longer_one_is_answered_at_its_own_deadline(tmp_path):
    actors = Actors(tmp_path)
    actors.store.queues.create_queue("q")
    fetcher = actors.fetcher
    fetcher.handle([asked("fetch", 1, queue="q", wait=20), asked("fetch_batch", 2, queue="q", max=2,
                                                                  wait=0.05)])
    deadline = fetcher.waiters.nearest_deadline()
    assert deadline is not None and deadline - time.monotonic() < 1  # Woken for the short one.
    while time.monotonic() < deadline:
        time.sleep(deadline - time.monotonic())
    assert answered_by(fetcher) == [(2, {"messages": []})]
    assert [w.rid[-1] for w in fetcher.waiters.waiting("q")] == [1]  # The long one waits on.
    assert fetcher.waiters.nearest_deadline() - time.monotonic() > 10


def test_end_waits_answers_only_the_long_polls_and_watches_of_its_link(tmp_path):
    actors = Actors(tmp_path)
    actors.store.queues.create_queue("q")
    fetcher = actors.fetcher
    other = Request(b"other front", bytes([0] * 7 + [9]), {"op": "fetch", "queue": "q", "wait": 20})
    fetcher.handle([asked("fetch", 1, queue="q", wait=20), other,
                    asked("fetch_batch", 2, queue="q", max=3, wait=20),
                    asked("watch", 3, queues=["q"], wait=20)])
    fetcher.handle([Request(b"front", b"", {"op": "end_waits"})])
    assert sorted(answered_by(fetcher), key=lambda a: a[0]) == [
        (1, {"empty": True}), (2, {"messages": []}), (3, {"empty": True})]
    assert not fetcher.watches
    assert [w.peer for w in fetcher.waiters.waiting("q")] == [b"other front"]
