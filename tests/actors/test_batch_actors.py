"""Batch ops served in-process on real files and failing disks: add_batch stores all or none,
fetch_batch and ack_batch share one flush, each outcome is the single op's."""

import errno
import os
import time

import pytest

from actor_support import Actors, request
from disks import FailingDisk
from mq.errors import Invalid, MqError, Unavailable


def batch_of(n: int, prefix: str = "m", **extra) -> list[dict]:
    """n messages for add_batch, bodies m0, m1, ..."""
    return [dict({"body": f"{prefix}{i}".encode()}, **extra) for i in range(n)]


def visible(actors: Actors, queue: str = "q") -> list[str]:
    """Every file a client could ever be handed: the queue's folder and delay/."""
    ready = os.listdir(actors.store.queue_dir(queue)) if actors.store.queues.queue_exists(queue) else []
    return ready + [n for n in os.listdir(actors.store.folder("delay")) if n.startswith(f"{queue}:")]


def assert_nothing_left(actors: Actors, queue: str = "q") -> None:
    """No message of a failed batch is visible, in new/, or named by a key."""
    assert visible(actors, queue) == []
    assert os.listdir(actors.store.folder("new")) == []
    keys = actors.store.dedup_dir(queue)
    assert not os.path.isdir(keys) or os.listdir(keys) == []


def test_a_batch_add_stores_every_message_in_order_with_one_flush_of_each_kind(tmp_path):
    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk=disk)
    disk.calls.clear()
    [result] = actors.add({"queue": "q", "body": b"single"}, actor=None)
    assert isinstance(result, dict)
    disk.calls.clear()
    due = time.time() + 60
    messages = batch_of(1000) + [{"body": b"later", "due": due}]
    messages[1000 - 1]["dedup_id"] = "k"
    batch = actors.save.handle([request("add_batch", queue="q", messages=messages[:999]),
                                request("add_batch", queue="q", messages=messages[999:])])
    first, second = batch.results
    assert (disk.calls["flush_data"], disk.calls["flush"]) == (1, 1)
    ids = [m["id"] for m in first["messages"] + second["messages"]]
    assert ids == sorted(ids) and len(set(ids)) == 1001
    assert second["messages"][1]["due"] == pytest.approx(due)
    assert len(visible(actors)) == 1002
    # A repeated key is the earlier message's id, marked, and nothing is stored for it.
    [again] = actors.save.handle([request("add_batch", queue="q", messages=[
        {"body": b"x", "dedup_id": "k"}, {"body": b"y"}])]).results
    assert again["messages"][0] == {"id": second["messages"][0]["id"], "due": None,
                                    "accumulated": "no", "duplicate": True}
    assert again["messages"][1]["accumulated"] == "no"
    assert len(visible(actors)) == 1003


@pytest.mark.parametrize("failure", [
    {"write": errno.ENOSPC, "after": {"write": 3}},
    {"flush_data": errno.EIO},
    {"symlink": errno.ENOSPC, "after": {"symlink": 2}},
    {"rename": errno.ENOSPC, "after": {"rename": 3}},
    {"flush": errno.EIO},
])
def test_a_storage_error_on_any_message_of_a_batch_stores_none_of_it(tmp_path, failure):
    after = failure.pop("after", None)
    disk = FailingDisk("fs", after=after, **failure)
    actors = Actors(tmp_path, disk=disk)
    messages = [dict(m, dedup_id=f"k{i}") for i, m in enumerate(batch_of(6))]
    [result] = actors.save.handle([request("add_batch", queue="q", messages=messages)]).results
    assert isinstance(result, Unavailable), result
    assert_nothing_left(actors)
    disk.armed = False  # The client's retry, once the disk is back, is stored whole.
    [retry] = actors.save.handle([request("add_batch", queue="q", messages=messages)]).results
    assert [m.get("duplicate") for m in retry["messages"]] == [None] * 6
    assert len(visible(actors)) == 6


def test_a_failing_batch_takes_back_its_own_messages_only(tmp_path):
    # The 4th rename fails: the single add and the first batch (3 renames) are stored, the
    # second batch is taken back whole, though 0 of its renames succeeded and the rest never ran.
    disk = FailingDisk("fs", after={"rename": 4}, rename=errno.ENOSPC)
    actors = Actors(tmp_path, disk=disk)
    single, first, second = actors.save.handle([
        request("add", queue="q", body=b"single"),
        request("add_batch", queue="q", messages=batch_of(3, "a")),
        request("add_batch", queue="q", messages=batch_of(3, "b"))]).results
    assert isinstance(single, dict) and isinstance(first, dict)
    assert isinstance(second, Unavailable)
    assert sorted(visible(actors)) == sorted([single["id"]] + [m["id"] for m in first["messages"]])
    assert os.listdir(actors.store.folder("new")) == []


def test_an_add_following_the_key_of_a_failed_batch_fails_with_it(tmp_path):
    # The batch's second rename fails; the single add that lost key k to its first message
    # must not answer "duplicate" of a message that was taken back.
    disk = FailingDisk("fs", after={"rename": 1}, rename=errno.ENOSPC)
    actors = Actors(tmp_path, disk=disk)
    batch, follower = actors.save.handle([
        request("add_batch", queue="q", messages=[{"body": b"a", "dedup_id": "k"}, {"body": b"b"}]),
        request("add", queue="q", body=b"c", dedup_id="k")]).results
    assert isinstance(batch, Unavailable) and isinstance(follower, Unavailable)
    assert_nothing_left(actors)


def test_a_bad_message_refuses_the_whole_batch_before_anything_is_written(tmp_path):
    actors = Actors(tmp_path)
    for messages in ([{"body": b"ok"}, {"body": "not bytes"}], [], batch_of(1001),
                     [{"body": b"ok", "dedup_id": ""}, 7]):
        [result] = actors.save.handle([request("add_batch", queue="q", messages=messages)]).results
        assert isinstance(result, Invalid), (messages[:2], result)
    assert "message 1" in str(actors.save.handle([request("add_batch", queue="q", messages=[
        {"body": b"ok"}, {"body": "text"}])]).results[0])
    assert_nothing_left(actors)


def test_a_batch_fetch_claims_up_to_max_in_order_and_a_batch_ack_settles_each_receipt(tmp_path):
    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk=disk)
    [added] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(5))]).results
    ids = [m["id"] for m in added["messages"]]
    disk.calls.clear()
    got = actors.call("fetch_batch", queue="q", max=3, wait=0)["messages"]
    assert [m["id"] for m in got] == ids[:3] and [m["body"] for m in got] == [b"m0", b"m1", b"m2"]
    assert disk.calls["flush"] == 1
    assert [m["receipt"] for m in got] == [f"{i}.1" for i in ids[:3]]
    rest = actors.call("fetch_batch", queue="q", max=100)["messages"]
    assert [m["id"] for m in rest] == ids[3:]
    assert actors.call("fetch_batch", queue="q", max=100) == {"messages": []}
    disk.calls.clear()
    receipts = [m["receipt"] for m in got] + [f"{ids[3]}.7", "nonsense", got[0]["receipt"]]
    result = actors.call("ack_batch", queue="q", receipts=receipts)
    assert [r["status"] for r in result["results"]] == \
        ["acked", "acked", "acked", "conflict", "invalid", "not_found"]
    assert disk.calls["flush"] == 1
    assert sorted(visible(actors)) == sorted(f"q:{i}.1" for i in ids[3:])
    for bad in ({"max": 0}, {"max": 101}, {"max": "3"}, {"max": 3, "wait": 21}):
        assert isinstance(actors.call("fetch_batch", queue="q", **bad), Invalid), bad
    assert isinstance(actors.call("ack_batch", queue="q", receipts=[]), Invalid)


def test_a_batch_fetch_whose_later_claim_fails_returns_the_ones_it_claimed(tmp_path):
    disk = FailingDisk("fs", after={"rename": 2}, rename=errno.EIO)
    actors = Actors(tmp_path, disk=disk)
    disk.armed = False
    actors.save.handle([request("add_batch", queue="q", messages=batch_of(4))])
    disk.armed, disk.calls = True, {}
    got = actors.call("fetch_batch", queue="q", max=4)["messages"]
    assert [m["body"] for m in got] == [b"m0", b"m1"]
    disk.armed = False  # The message whose claim failed is served once the disk recovers.
    assert [m["body"] for m in actors.call("fetch_batch", queue="q", max=4)["messages"]] == [b"m2", b"m3"]


def test_a_failed_flush_fails_a_whole_batch_fetch_and_ack(tmp_path):
    disk = FailingDisk("fs", flush=errno.EIO)
    actors = Actors(tmp_path, disk=disk)
    disk.armed = False
    actors.save.handle([request("add_batch", queue="q", messages=batch_of(4))])
    disk.armed = True
    assert isinstance(actors.call("fetch_batch", queue="q", max=2), Unavailable)
    disk.armed = False
    # The claims of the failed fetch stand (in flight, returned by their timer), as a fetch's.
    got = actors.call("fetch_batch", queue="q", max=4)["messages"]
    assert [m["body"] for m in got] == [b"m2", b"m3"]
    disk.armed = True
    result = actors.call("ack_batch", queue="q", receipts=[m["receipt"] for m in got])
    assert isinstance(result, Unavailable), result


def test_a_batch_that_feeds_long_polls_flushes_once_for_its_changes_and_their_claims(tmp_path):
    import zmq

    from mq.actors.batch import Request

    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk=disk)
    fetcher = actors.fetcher
    context = zmq.Context()
    fetcher.sock = context.socket(zmq.ROUTER)  # Replies to a peer that is not there are dropped.
    fetcher.sock.bind("inproc://front")
    try:
        [added] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(2))]).results
        held = fetcher.handle([request("fetch_batch", queue="q", max=2)]).results[0]["messages"]
        waiting = fetcher.handle([Request(b"peer", bytes([0] * 7 + [n]), {
            "op": "fetch_batch", "queue": "q", "max": 5, "wait": 10}) for n in (1, 2)])
        assert len(fetcher.waiters.waiting("q")) == 2 and waiting.results[0] is not None
        [fresh] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(3, "n"))]).results
        disk.calls.clear()
        fetcher.handle([request("ack_batch", queue="q", receipts=[m["receipt"] for m in held]),
                        Request(b"save", b"", {"op": "ready", "queue": "q",
                                               "ids": [[m["id"], 0] for m in fresh["messages"]]})])
        # The first waiter took all three; the second waits on.
        assert [w.rid for w in fetcher.waiters.waiting("q")] == [bytes([0] * 7 + [2])]
        assert disk.calls["flush"] == 1
        assert sorted(visible(actors)) == sorted(f"q:{m['id']}.1" for m in fresh["messages"])
    finally:
        fetcher.sock.close()
        context.term()


def test_acked_deliveries_are_told_to_the_mover_which_drops_their_timers(tmp_path):
    from mq.actors.mover import MoverActor

    actors = Actors(tmp_path)
    actors.save.handle([request("add_batch", queue="q", messages=batch_of(3))])
    fetched = actors.fetcher.handle([request("fetch_batch", queue="q", max=3)])
    acks = actors.fetcher.handle([request("ack_batch", queue="q", receipts=[
        m["receipt"] for m in fetched.results[0]["messages"][:2]])])
    assert acks.settled == [("q", m["id"], 1) for m in fetched.results[0]["messages"][:2]]
    mover = MoverActor(actors.options, 0, actors.run_dir, actors.store)
    mover.handle([request("delayed", entries=[list(h) for h in fetched.hidden])])
    mover.handle([request("settled", entries=[list(s) for s in acks.settled])])
    assert list(mover.timers.due) == [("q", fetched.results[0]["messages"][2]["id"], 1)]


def test_a_delete_of_a_message_this_actor_handed_out_renames_once(tmp_path):
    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk=disk)
    [added] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(2))]).results
    actors.call("fetch_batch", queue="q", max=2)
    disk.calls.clear()
    for message in added["messages"]:
        assert actors.call("delete", queue="q", id=message["id"]) == {"id": message["id"]}
    assert disk.calls["rename"] == 2  # No probing of the names it might have had.
    assert visible(actors) == []


def test_a_delete_tells_the_mover_the_one_delivery_it_took_out_of_delay(tmp_path):
    from mq.actors.mover import MoverActor

    actors = Actors(tmp_path)
    actors.save.handle([request("add_batch", queue="q", messages=batch_of(2))])
    handed = actors.fetcher.handle([request("fetch", queue="q")])
    fetched = handed.results[0]
    # A second delivery, so a delete that found the message by probing names knows it too.
    actors.call("nack", queue="q", id=fetched["id"], receipt=fetched["receipt"])
    again = actors.fetcher.handle([request("fetch", queue="q")])
    assert again.results[0]["id"] == fetched["id"] and again.results[0]["attempts"] == 2
    actors.fetcher.deliveries.settled("q", fetched["id"])  # No guess left: the probe finds it.
    other = actors.fetcher.handle([request("fetch", queue="q")])
    deleted = actors.fetcher.handle([request("delete", queue="q", id=fetched["id"]),
                                     request("delete", queue="q", id=other.results[0]["id"])])
    assert deleted.settled == [("q", fetched["id"], 2), ("q", other.results[0]["id"], 1)]
    mover = MoverActor(actors.options, 0, actors.run_dir, actors.store)
    mover.handle([request("delayed", entries=[list(h) for h in again.hidden + other.hidden])])
    mover.handle([request("settled", entries=[list(s) for s in deleted.settled])])
    assert list(mover.timers.due) == [] and mover.timers.counts == {}


def test_a_timer_told_after_a_purge_counts_only_a_message_the_purge_did_not_take(tmp_path):
    from mq.actors.mover import MoverActor

    actors = Actors(tmp_path)
    mover = MoverActor(actors.options, 0, actors.run_dir, actors.store)
    [taken] = actors.save.handle([request("add", queue="q", body=b"purged", due=time.time() + 3600)]).results
    purged = actors.fetcher.handle([request("purge", queue="q")])
    mover.handle([request("settled", entries=[list(s) for s in purged.settled])])
    # The add's timer comes after the purge's settlement (each actor's notes wait up to 20 ms).
    later = actors.save.handle([request("add", queue="q", body=b"kept", due=time.time() + 3600)])
    mover.handle([request("delayed", entries=[[*entry] for entry in later.hidden] + [
        ["q", taken["id"], 0, taken["due"]]])])
    assert mover.timers.counts == {"q": [1, 0]}, "a message the purge took counted as delayed"
    assert [key[1] for key in mover.timers.due] == [later.results[0]["id"]]


def parts_in_windows(actors: Actors, queue: str = "q") -> list[str]:
    """Every part waiting in the queue's accumulation windows, whatever their stage."""
    return sorted(part for _, window in actors.store.accumulation.list_windows()
                  for part in os.listdir(actors.store.window_dir(queue, window)))


@pytest.mark.parametrize("failure", [
    {"rename": errno.ENOSPC, "after": {"rename": 2}},
    {"mkdir": errno.ENOSPC, "after": {"mkdir": 3}},
    {"write": errno.ENOSPC, "after": {"write": 2}},
    {"flush": errno.EIO},
])
def test_a_failed_batch_to_an_accumulating_queue_leaves_no_part_in_its_window(tmp_path, failure):
    # E.g. the third rename into the window fails: the two parts already placed must leave
    # it, or the window's compound delivers them and the client's retry stores them twice.
    after = failure.pop("after", None)
    disk = FailingDisk("fs", after=after, **failure)
    actors = Actors(tmp_path, disk=disk)
    assert isinstance(actors.call("props_put", queue="q", properties={"accum": 3600}), dict)
    disk.calls.clear()  # The properties' own rename is not one of the batch's.
    [result] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(4))]).results
    assert isinstance(result, Unavailable), result
    assert parts_in_windows(actors) == []
    assert_nothing_left(actors)
    disk.armed = False  # The retry is stored whole, and its compound holds each part once.
    [retry] = actors.save.handle([request("add_batch", queue="q", messages=batch_of(4))]).results
    assert parts_in_windows(actors) == sorted(m["id"] for m in retry["messages"])
    for queue, window in actors.store.accumulation.list_windows():
        actors.store.accumulation.settle_window(queue, window)
    [compound] = actors.call("fetch_batch", queue="q", max=10)["messages"]
    assert compound["parts"] == 4
