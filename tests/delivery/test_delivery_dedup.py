"""De-duplication keys: one message per key and window, across workers, restarts and crashes."""

import os
import threading
import time
from collections import Counter

import pytest

from delivery_support import (add, added, fetch, fetched, fresh_queue, restart, set_props,
                              shared_mq, start_killed, wait_until)  # noqa: F401
from mq.store import Store, dedup_digest, encode_message
from mq.ids import new_id
from support import files_in, poll_for

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("delivery_dedup")


def stored(mq, queue: str) -> list[str]:
    """Message files of a queue: ready ones, and delayed or in-flight ones in delay/."""
    ready = files_in(mq.root / "queues" / queue)
    return ready + [n for n in files_in(mq.root / "delay") if n.startswith(queue + ":")]


def slow_redelivery(mq, queue: str) -> None:
    """Create the queue with a 30 s redelivery timer: on a loaded machine the module daemon's
    1 s could hand a fetched message out again before the test's last fetch."""
    assert mq.request("PUT", f"/{queue}").status == 201
    set_props(mq, queue, {"timeout": 30})


def test_a_key_too_long_or_empty_is_400_naming_its_limit(shared_mq):
    # Checked where the save actor decodes the add; the front answers its error as its own.
    queue = fresh_queue("dedup-bad")
    for resp in (add(shared_mq, queue, b"x", dedup_id="k" * 257),
                 add(shared_mq, queue, b"x", dedup_id=""),
                 shared_mq.request("POST", f"/{queue}/messages", b"x", {"X-Dedup-Id": "k" * 257})):
        assert resp.status == 400, resp.body
        assert resp.json() == {"error": "invalid",
                               "message": "dedup_id must be 1 to 256 characters"}
    assert stored(shared_mq, queue) == []


def test_same_key_within_the_window_stores_once_and_answers_200_with_the_first_id(shared_mq):
    queue = fresh_queue("dedup")
    first = add(shared_mq, queue, b"first", dedup_id="order-17")
    assert first.status == 201 and first.header("X-Duplicate") is None
    again = add(shared_mq, queue, b"second", dedup_id="order-17")
    assert again.status == 200, again.body
    assert again.header("X-Duplicate") == "true"
    assert again.header("X-Message-Id") == first.header("X-Message-Id")
    assert again.json() == {"id": first.header("X-Message-Id"), "queue": queue, "duplicate": True}
    # The header form is the same key.
    third = add(shared_mq, queue, b"third", headers={"X-Dedup-Id": "order-17"})
    assert (third.status, third.header("X-Message-Id")) == (200, first.header("X-Message-Id"))
    assert stored(shared_mq, queue) == [first.header("X-Message-Id")]
    assert fetched(shared_mq, queue).body == b"first"
    assert fetch(shared_mq, queue).status == 204
    # The key is recorded on disk: a symlink named by the key's digest, pointing at the id.
    link = shared_mq.root / "dedup" / queue / dedup_digest("order-17")
    assert os.readlink(link) == first.header("X-Message-Id")
    # It outlives its message within the window: acked, and still a duplicate.
    assert shared_mq.delete(queue, first.header("X-Message-Id")).status == 204
    after_ack = add(shared_mq, queue, b"fourth", dedup_id="order-17")
    assert (after_ack.status, after_ack.header("X-Message-Id")) == (200, first.header("X-Message-Id"))
    assert stored(shared_mq, queue) == []


def test_a_key_is_per_queue_and_other_keys_are_stored(shared_mq):
    queue, other = fresh_queue("dedup"), fresh_queue("dedup")
    a = added(shared_mq, queue, b"a", dedup_id="k")
    b = added(shared_mq, other, b"b", dedup_id="k")
    c = added(shared_mq, queue, b"c", dedup_id="k2")
    assert len({a, b, c}) == 3


def test_a_duplicate_of_a_delayed_message_is_not_stored_either(shared_mq):
    queue = fresh_queue("dedup")
    first = added(shared_mq, queue, b"later", dedup_id="d", delay="30")
    again = add(shared_mq, queue, b"later", dedup_id="d", delay="30")
    assert (again.status, again.header("X-Message-Id")) == (200, first)
    assert stored(shared_mq, queue) == [f"{queue}:{first}"]


def test_after_the_window_the_same_key_stores_a_new_message(shared_mq):
    queue = fresh_queue("window")
    set_props(shared_mq, queue, {"dedup_window": 1.0})
    first = added(shared_mq, queue, b"one", dedup_id="tick")
    recorded = time.time()
    inside = add(shared_mq, queue, b"dup", dedup_id="tick")
    assert (inside.status, inside.header("X-Message-Id")) == (200, first)
    wait_until(recorded + 1.1, "the one-second window to pass")
    second = added(shared_mq, queue, b"two", dedup_id="tick")
    assert second != first
    assert sorted(stored(shared_mq, queue)) == sorted([first, second])
    # The new message owns the key now.
    again = add(shared_mq, queue, b"dup", dedup_id="tick")
    assert (again.status, again.header("X-Message-Id")) == (200, second)


def test_concurrent_adds_with_one_key_on_four_workers_store_exactly_one(start_killed):
    # --save-batch=0: each add to the least busy save actor, so that several race on a key.
    mq = start_killed(workers=4, timeout=30, args=("--log-level=debug", "--save-batch=0"))
    queue = fresh_queue("race")
    keys, per_key = 6, 16
    answers: list[tuple[str, int, str]] = []
    gate = threading.Barrier(keys * per_key)

    def adder(key: str, n: int):
        gate.wait()
        resp = add(mq, queue, f"{key}/{n}".encode(), dedup_id=key)
        answers.append((key, resp.status, resp.header("X-Message-Id")))

    batches_before = len(mq.events("actor.batch"))
    threads = [threading.Thread(target=adder, args=(f"key-{k}", n))
               for k in range(keys) for n in range(per_key)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(answers) == keys * per_key
    statuses = Counter(status for _, status, _ in answers)
    assert statuses == {201: keys, 200: keys * (per_key - 1)}, statuses
    ids = {key: {i for k, _, i in answers if k == key} for key in {k for k, _, _ in answers}}
    assert all(len(v) == 1 for v in ids.values()), ids
    assert sorted(stored(mq, queue)) == sorted(next(iter(v)) for v in ids.values())
    # The losers' files were discarded, not left in new/.
    assert not [n for n in files_in(mq.root / "new") if n.startswith(queue + ":")]
    # The adds really were spread over several save processes (their debug batch lines).
    savers = {e["actor"] for e in mq.events("actor.batch")[batches_before:]
              if e.get("actor", "").startswith("save")}
    assert len(savers) >= 2, savers


def test_dedup_key_survives_kill_9_and_a_restart(shared_mq):
    # The module's daemon, killed and started again (the tests after it find it ready).
    mq = shared_mq
    queue = fresh_queue("restart")
    slow_redelivery(mq, queue)
    first = added(mq, queue, b"before the crash", dedup_id="pay-42")
    restart(mq)
    again = add(mq, queue, b"after the crash", dedup_id="pay-42")
    assert (again.status, again.header("X-Message-Id")) == (200, first)
    assert stored(mq, queue) == [first]
    assert fetched(mq, queue).body == b"before the crash"


def test_a_key_recorded_for_an_add_cut_by_a_crash_is_forgotten_at_start(shared_mq):
    """The crash window: key recorded, message still in new/, no reply sent."""
    mq = shared_mq  # Killed here and started again: the tests after it find it ready.
    queue = fresh_queue("cut")
    slow_redelivery(mq, queue)
    mq.kill_tree()
    # Leave the root as a save actor leaves it between recording the key and delivering.
    store = Store(str(mq.root))
    orphan, now = new_id(), time.time()
    store.write_new(queue, orphan, encode_message(b"never acknowledged", "text/plain",
                                                  int(now * 1000), orphan, "retry-me"), None)
    assert store.dedup.record(queue, "retry-me", orphan, 300, now) is None
    assert os.path.islink(mq.root / "dedup" / queue / dedup_digest("retry-me"))

    mq.start().wait_ready()
    assert not os.path.lexists(mq.root / "dedup" / queue / dedup_digest("retry-me"))
    assert files_in(mq.root / "new") == []
    # The client never got an answer and retries: its message is stored, not answered as a duplicate.
    retried = add(mq, queue, b"the retry", dedup_id="retry-me")
    assert retried.status == 201, retried.body
    assert retried.header("X-Message-Id") != orphan
    resp = fetched(mq, queue)
    assert (resp.header("X-Message-Id"), resp.body) == (retried.header("X-Message-Id"), b"the retry")
    assert fetch(mq, queue).status == 204


def test_two_daemons_on_one_root_share_the_keys(start_killed):
    a = start_killed(workers=2, timeout=30, args=("--peers=1",))
    b = start_killed(root=a.root, workers=2, timeout=30, args=("--peers=1",))
    queue = fresh_queue("peers")
    answers = []
    gate = threading.Barrier(16)

    def adder(daemon, n):
        gate.wait()
        resp = add(daemon, queue, b"%d" % n, dedup_id="shared")
        answers.append((resp.status, resp.header("X-Message-Id")))

    threads = [threading.Thread(target=adder, args=((a, b)[n % 2], n)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(s for s, _ in answers) == [200] * 15 + [201]
    assert len({i for _, i in answers}) == 1
    assert stored(a, queue) == [answers[0][1]]


def test_the_reaper_of_a_running_daemon_sweeps_expired_keys_and_keeps_live_ones(start_killed, tmp_path):
    root = tmp_path / "root"
    store = Store(str(root))
    store.init()
    now = time.time()
    for key in ("expired", "live"):
        assert store.dedup.record("swept", key, new_id(), 300, now) is None
    old = now - 600  # The default window is 5 minutes.
    os.utime(store.dedup.path("swept", "expired"), (old, old), follow_symlinks=False)

    mq = start_killed(root=root, workers=1, timeout=30)  # The reaper sweeps when it starts, then every 60 s.

    poll_for(lambda: not os.path.lexists(store.dedup.path("swept", "expired")), 10,
             what="the reaper to sweep the expired key")
    assert os.path.lexists(store.dedup.path("swept", "live"))
    assert any(e.get("count") == 1 for e in mq.events("reaper.dedup_swept"))
