"""The actors' batch loop in-process on a real root: errors as values, flush failures, the
de-duplication and claim edges, corrupt files, bounded memory. Disks fail on purpose."""

import errno
import os
import time

import msgpack
import pytest

from actor_support import Actors, request
from mq.actors.batch import DEFERRED
from disks import FailingDisk
from mq import store as fmt
from mq.actors import due_heap
from mq.actors.due_heap import DueHeap
from mq.errors import Conflict, MqError, NotFound, StorageFailure, Unavailable, from_os_error
from mq.ids import new_id
from mq.operations import Stats
from mq.store import Disk, Store, states
from support import files_in


def ok(result) -> dict:
    """The result, asserted to be a success."""
    assert isinstance(result, dict), result
    return result


def disarmed_failing_disk(tmp_path, sync: str, **failure) -> tuple[FailingDisk, Actors]:
    """Actors on a disk that fails as `failure` says once the test sets disk.armed."""
    disk = FailingDisk(sync, **failure)
    disk.armed = False
    return disk, Actors(tmp_path, disk)


# -- errors map once ------------------------------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.EAGAIN,
                                  errno.EMFILE, errno.ENFILE])
def test_a_disk_that_may_recover_is_503_with_retry_after(code):
    error = from_os_error(OSError(code, os.strerror(code)), "cannot add")
    assert isinstance(error, Unavailable) and error.retry_after == 1


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.ENAMETOOLONG,
                                  errno.EISDIR, errno.ELOOP, errno.EXDEV])
def test_a_disk_that_refuses_is_a_storage_error_that_says_why(code):
    error = from_os_error(OSError(code, os.strerror(code)), "cannot add")
    assert isinstance(error, StorageFailure) and error.kind == "storage"
    assert os.strerror(code) in error.message


def test_an_unknown_op_and_an_unexpected_exception_answer_only_their_own_request(tmp_path):
    actors = Actors(tmp_path)
    ok(actors.add({"queue": "q", "body": b"kept"})[0])
    boom = request("fetch", queue="q")
    class Explode(Stats):
        """An op whose handler fails as no handler should."""

        op = "explode"

    actors.fetcher.COMMANDS = {**actors.fetcher.COMMANDS, Explode: lambda *_: 1 / 0}
    batch = actors.fetcher.handle([request("bogus", queue="q"), boom, request("explode")])
    assert batch.results[0].kind == "invalid" and batch.results[2].kind == "internal"
    fetched = ok(batch.results[1])
    # The fetch made before the failure is flushed and timed, not dropped with the batch.
    assert batch.hidden == [("q", fetched["id"], 1, fetched["due"])]
    assert os.path.exists(actors.store.delay_path("q", fetched["id"], 1))


# -- adds on a failing disk ---------------------------------------------------------------------


@pytest.mark.parametrize("sync", ["fs", "file"])
@pytest.mark.parametrize("failure", [{"write": errno.ENOSPC}, {"flush_data": errno.EIO},
                                     {"flush": errno.EIO}, {"rename": errno.EIO}])
def test_an_add_the_disk_fails_answers_503_and_leaves_nothing(tmp_path, sync, failure):
    disk, actors = disarmed_failing_disk(tmp_path, sync, **failure)
    actors.store.queues.create_queue("q")
    disk.armed = True
    assert_failed_leaving_nothing(actors, actors.add({"queue": "q", "body": b"a"},
                                                     {"queue": "q", "body": b"b", "dedup_id": "k"}))
    disk.armed = False
    # Nothing of the failed adds lingers: the key is free, a retry is stored, not a duplicate.
    retried = ok(actors.add({"queue": "q", "body": b"b", "dedup_id": "k"})[0])
    assert not retried.get("duplicate")


@pytest.mark.parametrize("failure", [{"write": errno.ENOSPC}, {"flush": errno.EIO},
                                     {"rename": errno.EIO}])
def test_a_batch_of_plain_adds_the_disk_fails_answers_503_and_leaves_nothing(tmp_path, failure):
    disk, actors = disarmed_failing_disk(tmp_path, "fs", **failure)
    actors.store.queues.create_queue("q")
    disk.armed = True
    assert_failed_leaving_nothing(actors, actors.add({"queue": "q", "body": b"a"},
                                                     {"queue": "q", "body": b"b"}))
    assert "flush_data" not in disk.calls  # Its one flush comes after the renames.


def assert_failed_leaving_nothing(actors: Actors, results: list) -> None:
    """Every add answered 503 with Retry-After, and no file of theirs in new/, delay/ or q."""
    assert all(isinstance(r, Unavailable) and r.retry_after == 1 for r in results), results
    for folder in ("new", "delay"):
        assert files_in(actors.store.folder(folder)) == []
    assert files_in(actors.store.queue_dir("q")) == []


def test_two_adds_with_one_key_in_a_failed_batch_both_fail(tmp_path):
    disk = FailingDisk("fs", flush=errno.EIO)
    actors = Actors(tmp_path, disk)
    first, second = actors.add({"queue": "q", "body": b"1", "dedup_id": "k"},
                               {"queue": "q", "body": b"2", "dedup_id": "k"})
    # The second must not answer with the first one's id: that message was never stored.
    assert isinstance(first, Unavailable) and isinstance(second, Unavailable)


def test_two_adds_with_one_key_in_a_batch_answer_one_stored_id(tmp_path):
    actors = Actors(tmp_path)
    first, second = actors.add({"queue": "q", "body": b"1", "dedup_id": "k"},
                               {"queue": "q", "body": b"2", "dedup_id": "k"})
    assert ok(second) == dict(ok(first), duplicate=True)
    assert files_in(actors.store.queue_dir("q")) == [first["id"]]


def test_a_key_left_by_a_killed_save_actor_never_answers_a_retry_and_its_successor_frees_it(tmp_path):
    actors = Actors(tmp_path)
    # Save actor 0 records the key and is killed before its rename: the state it leaves.
    dying = actors.save
    batch = dying.new_batch([request("add", queue="q", body=b"lost", dedup_id="k")])
    batch.results.append(dying.dispatch(batch, batch.requests[0]))
    actors.store.flush_data()
    batch.settlement.record_keys(dying.defer)
    lost_id = batch.settlement.written[0].id
    assert files_in(actors.store.folder("new")) == [f"q:{lost_id}"]
    # The client retries on save actor 1 while 0 restarts: no 200 with an id never stored;
    # the retry waits for the add that holds its key.
    sibling, answers = actors.saver(1), []
    sibling.reply_all = lambda sent: answers.extend(result for _, _, result in sent)
    assert actors.add({"queue": "q", "body": b"lost", "dedup_id": "k"}, actor=sibling) == [DEFERRED]
    sibling.tick()
    assert answers == [] and len(sibling.pending_keys) == 1
    # Save actor 0's successor cleans its predecessor's file and key, and only those.
    actors.add({"queue": "q", "body": b"other"}, actor=sibling)
    assert actors.saver(0).clean_predecessor() == 1
    assert files_in(actors.store.folder("new")) == []
    sibling.tick()  # The waiting retry now records the key itself and is stored.
    stored = ok(answers[0])
    assert stored["id"] != lost_id and not stored.get("duplicate")
    assert os.path.exists(actors.store.ready_path("q", stored["id"]))


def test_an_add_waits_at_most_a_few_seconds_for_the_add_holding_its_key(tmp_path):
    actors = Actors(tmp_path)
    holder = new_id()
    actors.store.write_new("q", holder, fmt.encode_message(b"x", "text/plain", 0, holder, "k"), None)
    actors.store.dedup.record("q", "k", holder, 300, time.time())  # An add that never finishes.
    answers = []
    actors.save.reply_all = lambda sent: answers.extend(result for _, _, result in sent)
    assert actors.add({"queue": "q", "body": b"x", "dedup_id": "k"}) == [DEFERRED]
    # Its deadline passes (PENDING_KEY_SECONDS after it first found the key held).
    actors.save.pending_keys = [(r, time.monotonic() - 1) for r, _ in actors.save.pending_keys]
    actors.save.tick()
    assert len(answers) == 1 and isinstance(answers[0], Unavailable)


def test_a_batch_of_duplicates_waits_for_a_flush_before_it_answers(tmp_path):
    disk, actors = disarmed_failing_disk(tmp_path, "fs", flush=errno.EIO)
    ok(actors.add({"queue": "q", "body": b"1", "dedup_id": "k"})[0])
    disk.armed = True
    # The first add's rename may not be durable yet (another actor's batch): this batch's
    # own flush covers it, so a duplicate whose flush fails is not acknowledged either.
    assert isinstance(actors.add({"queue": "q", "body": b"1", "dedup_id": "k"})[0], Unavailable)
    disk.armed = False
    assert ok(actors.add({"queue": "q", "body": b"1", "dedup_id": "k"})[0])["duplicate"]


def test_a_saved_message_is_announced_by_the_save_actor_itself(tmp_path):
    actors = Actors(tmp_path)
    batch = actors.save.handle([request("add", queue="q", body=b"a"),
                                request("add", queue="q", body=b"b", due=time.time() + 60)])
    now, later = batch.results
    # The ready one goes to its fetch actor, the delayed one to the mover, after the flush:
    # a front that dies after its 201 no longer leaves a message no index holds.
    # With its file's size: the fetch actor's statistics need no stat of it.
    size = os.stat(actors.store.ready_path("q", now["id"])).st_size
    assert batch.ready == {"q": [[now["id"], 0, size]]}
    assert batch.hidden == [("q", later["id"], 0, later["due"])]


# -- fetches ---------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [{"rename": errno.EIO}, {"set_mtime": errno.EPERM},
                                     {"rename": errno.EMFILE}])
def test_a_claim_that_fails_keeps_the_message_served_later(tmp_path, failure):
    disk, actors = disarmed_failing_disk(tmp_path, "fs", **failure)
    ids = [ok(r)["id"] for r in actors.add({"queue": "q", "body": b"1"}, {"queue": "q", "body": b"2"})]
    ok(actors.call("fetch", queue="q"))  # Builds the index; it keeps the second message.
    disk.armed = True
    assert isinstance(actors.call("fetch", queue="q"), MqError)
    disk.armed = False
    assert ok(actors.call("fetch", queue="q"))["id"] == ids[1]


def test_a_relist_finds_a_message_whose_ready_was_lost(tmp_path):
    actors = Actors(tmp_path)
    for body in (b"1", b"2"):
        actors.add({"queue": "q", "body": body})
    ok(actors.call("fetch", queue="q"))  # The index holds the second message now.
    # Stored by an actor killed before it told the fetch actor: only a relist finds it.
    late = new_id()
    actors.store.write_new("q", late, fmt.encode_message(b"late", "text/plain", 0, late), None)
    actors.store.states.deliver_new("q", late, False)
    assert actors.call("relist") == {}
    got = {ok(actors.call("fetch", queue="q"))["id"] for _ in range(2)}
    assert late in got


def minute_old_id(n: int) -> str:
    """An id made a minute ago (older than any new one, well within a queue's retention)."""
    ms = int(time.time() * 1000) - 60_000
    return f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7000-8000-{n:012x}"


def test_a_corrupt_file_is_quarantined_and_the_others_are_served(tmp_path):
    header = msgpack.packb([1, 2])  # Valid msgpack, not a map.
    assert_passed_over(Actors(tmp_path), minute_old_id(1),
                       fmt.MAGIC + len(header).to_bytes(4, "big") + header + b"body")


def assert_passed_over(actors: Actors, bad: str, data: bytes) -> None:
    """A file of queue q named bad (older than any new id: it comes first) holding data is put
    in corrupt/ by a fetch, which hands out the message added after it instead."""
    actors.store.queues.create_queue("q")
    with open(actors.store.ready_path("q", bad), "wb") as f:
        f.write(data)
    good = ok(actors.add({"queue": "q", "body": b"good"})[0])["id"]
    fetched = ok(actors.call("fetch", queue="q"))
    assert fetched["id"] == good and fetched["body"] == b"good"
    assert files_in(actors.store.folder("corrupt")) == [f"q:{bad}.1"]


def test_a_corrupt_file_does_not_end_a_long_poll_or_the_actor(tmp_path):
    actors = Actors(tmp_path)
    actors.store.queues.create_queue("q")
    bad = minute_old_id(2)
    with open(actors.store.ready_path("q", bad), "wb") as f:
        f.write(fmt.MAGIC + b"\x00\x00\x00\x01\xc1")  # 0xc1: never valid msgpack.
    answers = []
    actors.fetcher.reply_all = lambda sent: answers.extend(result for _, _, result in sent)
    actors.fetcher.waiters.park("q", b"p", b"r", 5)
    actors.fetcher.serve_waiters()  # Claims the corrupt file, quarantines it, keeps waiting.
    assert answers == [] and files_in(actors.store.folder("corrupt")) == [f"q:{bad}.1"]


def test_each_long_poll_a_batch_answers_gets_its_own_result_and_the_batch_keeps_its_own(tmp_path):
    actors = Actors(tmp_path)
    first, second = (ok(r)["id"] for r in actors.add({"queue": "q", "body": b"one"},
                                                     {"queue": "q", "body": b"two"}))
    fetcher = actors.fetcher
    answers = []
    fetcher.reply_all = answers.extend
    fetcher.sock = object()  # Served as over a socket: the batch answers its long polls.
    fetcher.waiters.park("q", b"p1", b"r1", 5)
    fetcher.waiters.park("q", b"p2", b"r2", 5, limit=2)
    fetcher.waiters.park("q", b"p3", b"r3", 0)  # Time up, nothing left for it: empty.
    batch = fetcher.handle([request("queue_get", queue="q")])
    assert [r["queue"] for r in batch.results] == ["q"]  # Its request's own result alone.
    # Those whose time is up first, whatever their place; then the messages, oldest poll first.
    assert [(peer, rid) for peer, rid, _ in answers] == [(b"p3", b"r3"), (b"p1", b"r1"),
                                                          (b"p2", b"r2")]
    assert answers[1][2]["id"] == first
    assert [m["id"] for m in answers[2][2]["messages"]] == [second]
    assert answers[0][2] == {"empty": True}
    # Between batches, and while the root is away, a long poll is answered the same way.
    answers.clear()
    fetcher.waiters.park("q", b"p4", b"r4", 0)
    fetcher.serve_waiters()
    fetcher.waiters.park("q", b"p5", b"r5", 5)
    fetcher.root_away()
    assert [(peer, rid) for peer, rid, _ in answers] == [(b"p4", b"r4"), (b"p5", b"r5")]
    assert answers[0][2] == {"empty": True} and isinstance(answers[1][2], Unavailable)


@pytest.mark.parametrize("data", [msgpack.packb([1]), msgpack.packb({"ct": 1, "t": 0}),
                                  msgpack.packb({"t": 0}), msgpack.packb("text"), b"\xc1"])
def test_any_header_that_is_not_a_message_header_is_corrupt(data):
    raw = fmt.MAGIC + len(data).to_bytes(4, "big") + data + b"body"
    with pytest.raises(fmt.CorruptMessage):
        fmt.decode_message("q", "id", raw)


def torn_files(message_id: str, old_file: bytes) -> dict[str, bytes]:
    """What a power cut can leave under a message's name when its add's rename reached the
    disk and its bytes did not (one flush per batch of plain adds), by shape."""
    whole = fmt.encode_message(b"the new body, " * 20, "text/plain", 1, message_id)
    return {"empty": b"", "the first block only": whole[:64], "old bytes past the end": whole + b"old",
            "a changed byte": whole[:-5] + b"X" + whole[-4:], "the spare's old message": old_file}


@pytest.mark.parametrize("shape", list(torn_files("", b"")))
def test_a_torn_file_is_quarantined_never_handed_out(tmp_path, shape):
    actors = Actors(tmp_path)
    old = ok(actors.add({"queue": "q", "body": b"an old message"})[0])["id"]
    with open(actors.store.ready_path("q", old), "rb") as f:
        old_file = f.read()
    assert ok(actors.call("delete", queue="q", id=old))
    torn = minute_old_id(3)
    assert_passed_over(actors, torn, torn_files(torn, old_file)[shape])


def test_a_file_written_before_bodies_had_a_length_and_crc_is_read(tmp_path):
    actors = Actors(tmp_path)
    actors.store.queues.create_queue("q")
    older = minute_old_id(4)
    header = msgpack.packb({"ct": "text/plain", "t": 1, "id": older})
    with open(actors.store.ready_path("q", older), "wb") as f:
        f.write(fmt.MAGIC + len(header).to_bytes(4, "big") + header + b"from an older mq")
    assert ok(actors.call("fetch", queue="q"))["body"] == b"from an older mq"


def timed(add: dict) -> dict:
    """The add with its "due_in" seconds made a due time from now."""
    add = dict(add)
    if "due_in" in add:
        add["due"] = time.time() + add.pop("due_in")
    return add


@pytest.mark.parametrize("adds, flushes", [
    ([{"body": b"a"}, {"body": b"b"}], {"flush": 1}),
    ([{"body": b"a"}, {"body": b"b", "dedup_id": "k"}], {"flush_data": 1, "flush": 1}),
    ([{"body": b"a"}, {"body": b"b", "due_in": 60}], {"flush_data": 1, "flush": 1}),
], ids=["plain", "a key", "a due time"])
def test_a_batch_of_plain_adds_is_made_durable_by_one_flush_after_its_renames(tmp_path, adds,
                                                                               flushes):
    disk = FailingDisk("fs")
    actors = Actors(tmp_path, disk)
    disk.calls.clear()
    # A due time from the test's own start: the parameters are made at collection, which a
    # whole suite may have passed minutes ago.
    results = actors.add(*({"queue": "q", **timed(add)} for add in adds))
    assert all(isinstance(r, dict) for r in results), results
    assert {op: n for op, n in disk.calls.items() if op.startswith("flush")} == flushes


def test_a_fetch_whose_flush_fails_answers_503_and_its_message_is_still_timed(tmp_path):
    disk, actors = disarmed_failing_disk(tmp_path, "fs", flush=errno.EIO)
    message_id = ok(actors.add({"queue": "q", "body": b"x"})[0])["id"]
    disk.armed = True
    batch = actors.fetcher.handle([request("fetch", queue="q")])
    assert isinstance(batch.results[0], Unavailable)
    # The rename into delay/ happened: the mover is told, so the message returns at its due time.
    assert [h[:3] for h in batch.hidden] == [("q", message_id, 1)]


# -- deletes and replies racing the mover ------------------------------------------------------


class ReleasingDisk(Disk):
    """Runs the mover's release of a message just before the first rename that names it,
    once armed with the release's (source, target)."""

    def __init__(self, sync):
        super().__init__(sync)
        self.race: tuple[str, str] | None = None

    def rename(self, source, target):
        """The release lands first, then this rename runs."""
        if self.race and source == self.race[0]:
            race, self.race = self.race, None
            super().rename(*race)
        super().rename(source, target)


def in_flight(tmp_path, disk=None) -> tuple[Actors, str]:
    """Actors and a message delivered once, in delay/."""
    actors = Actors(tmp_path, disk)
    message_id = ok(actors.add({"queue": "q", "body": b"x"})[0])["id"]
    ok(actors.call("fetch", queue="q"))
    return actors, message_id


def released_meanwhile(tmp_path) -> tuple[Actors, str]:
    """Actors and a message in flight whose release by the mover lands just before the
    next rename of it (the actors' Disk is the store's one, so every part of it sees that)."""
    disk = ReleasingDisk("fs")
    actors, message_id = in_flight(tmp_path, disk)
    disk.race = (actors.store.delay_path("q", message_id, 1),
                 actors.store.ready_path("q", message_id, 1))
    return actors, message_id


def test_a_delete_racing_the_movers_release_removes_the_message(tmp_path):
    actors, message_id = released_meanwhile(tmp_path / "a")
    ok(actors.call("delete", queue="q", id=message_id))
    assert files_in(actors.store.folder("remove")) == [f"q:{message_id}"]
    assert files_in(actors.store.queue_dir("q")) == []


def test_a_stale_receipt_racing_the_movers_release_is_409_not_404(tmp_path):
    actors, message_id = released_meanwhile(tmp_path / "a")
    # The ack's rename finds delay/ empty (released): the message lives on, so 409.
    result = actors.call("ack", queue="q", id=message_id, receipt=f"{message_id}.1")
    assert isinstance(result, Conflict), result


def test_a_claim_never_sets_its_due_time_on_a_file_a_peer_took(tmp_path, monkeypatch):
    actors = Actors(tmp_path)
    message_id = ok(actors.add({"queue": "q", "body": b"x"})[0])["id"]
    peer = Store(actors.root)
    real_read_all = states.read_all

    def peer_claims_meanwhile(fd):
        data = real_read_all(fd)
        monkeypatch.setattr(states, "read_all", real_read_all)
        assert peer.states.claim("q", message_id, 1_000_000_000.0) is not None  # The peer's due time.
        return data

    monkeypatch.setattr(states, "read_all", peer_claims_meanwhile)
    assert actors.store.states.claim("q", message_id, 2_000_000_000.0) is None
    assert os.stat(actors.store.delay_path("q", message_id, 1)).st_mtime == 1_000_000_000.0


# -- memory ------------------------------------------------------------------------------------


def test_the_movers_heap_stays_small_when_one_message_is_extended_again_and_again():
    heap = DueHeap()
    for n in range(10_000):
        heap.add(1000.0 + n, "q", "id", 1)
    assert len(heap) == 1 and len(heap.heap) <= 2 * len(heap) + 64 + 1
    assert heap.pop_due(1e9) == [("q", "id", 1)]


def test_settled_entries_of_a_message_drop_their_timers_and_of_a_queue_only_their_counts():
    heap = DueHeap()
    heap.add(10.0, "q", "acked", 1)
    heap.add(10.0, "q", "deleted", 0)
    heap.add(10.0, "q", "racing", 0)  # A delayed add whose note came before the purge's.
    assert heap.counts == {"q": [2, 1]}
    heap.settle("q", "acked", 1)
    heap.settle("q", "deleted", None)
    assert heap.counts == {"q": [1, 0]} and len(heap) == 1
    heap.settle("q", None, None)  # A purge: the racing add may still be in delay/.
    assert heap.counts == {} and len(heap) == 1
    assert heap.pop_due(20.0) == [("q", "racing", 0)], "its timer still fires"
    assert heap.counts == {}


def test_a_timer_that_comes_after_its_delivery_was_settled_is_ignored(monkeypatch):
    # A delayed add's timer comes from its save actor, a delete by id's settlement from the
    # queue's fetch actor: each actor's notes wait up to 20 ms, so they may come in either order.
    heap = DueHeap()
    clock = [100.0]
    monkeypatch.setattr(due_heap.time, "monotonic", lambda: clock[0])
    heap.settle("q", "deleted", 0)
    heap.add(1e9, "q", "deleted", 0)
    assert heap.counts == {} and len(heap) == 0, "a message gone from delay/ counted as delayed"
    heap.add(1e9, "q", "other", 0)  # Another message, or another delivery, is timed as ever.
    heap.add(1e9, "q", "deleted", 1)
    assert heap.counts == {"q": [1, 1]}
    clock[0] += due_heap.EARLY_SETTLED_SECONDS + 1
    heap.settle("q", "later", 2)
    assert list(heap.settled_early) == [("q", "later", 2)], "what is kept is bounded in time"


def test_a_message_whose_ready_note_is_late_is_fetched_from_an_index_just_listed_empty(tmp_path):
    actors = Actors(tmp_path)  # In-process: the save actor sends no "ready" at all.
    actors.store.queues.create_queue("q")
    assert actors.call("fetch", queue="q") == {"empty": True}  # Listed now, empty.
    message_id = ok(actors.add({"queue": "q", "body": b"answered 201"})[0])["id"]
    # Well within RELIST_EMPTY_SECONDS of the listing: only the folder's change shows it.
    assert actors.call("fetch", queue="q")["id"] == message_id


def test_a_late_ready_note_of_a_message_already_listed_and_handed_out_is_ignored(tmp_path):
    actors = Actors(tmp_path)  # In-process: the save actor sends no "ready" at all.
    actors.store.queues.create_queue("q")
    assert actors.call("fetch", queue="q") == {"empty": True}
    message_id = ok(actors.add({"queue": "q", "body": b"listed before its note"})[0])["id"]
    assert actors.call("fetch", queue="q")["id"] == message_id  # Found by a listing.
    assert actors.call("ready", queue="q", ids=[[message_id, 0]]) == {}  # Its note, late.
    assert actors.call("queue_get", queue="q")["ready"] == 0
    assert actors.call("fetch", queue="q") == {"empty": True}


@pytest.mark.parametrize("removal", ["ack", "delete_ready"])
def test_a_ready_note_that_comes_after_its_message_was_removed_is_ignored(tmp_path, removal):
    # The save actor tells the fetch actor on another socket than the one a client's next
    # requests come by: a fetch and an ack, or a delete by id, may be served before the note.
    actors = Actors(tmp_path)  # In-process: the save actor sends no "ready" at all.
    actors.store.queues.create_queue("q")
    assert actors.call("fetch", queue="q") == {"empty": True}
    message_id = ok(actors.add({"queue": "q", "body": b"gone before its note"})[0])["id"]
    if removal == "ack":
        fetched = actors.call("fetch", queue="q")  # Found by a listing.
        assert actors.call("ack", queue="q", id=message_id, receipt=fetched["receipt"]) \
            == {"id": message_id}
    else:
        assert actors.call("queue_get", queue="q")["ready"] == 1  # Listed by the statistics.
        assert actors.call("delete", queue="q", id=message_id) == {"id": message_id}
    assert actors.call("ready", queue="q", ids=[[message_id, 0]]) == {}  # Its note, late.
    assert actors.call("queue_get", queue="q")["ready"] == 0, "a message counted after it left"
    # A message made after the last listing still comes in by its note alone.
    later = ok(actors.add({"queue": "q", "body": b"noted"})[0])["id"]
    assert actors.call("ready", queue="q", ids=[[later, 0]]) == {}
    assert actors.fetcher.indexes.known("q").attempts(later) == 0


def test_fetches_of_missing_queues_leave_nothing_behind(tmp_path):
    actors = Actors(tmp_path)
    for n in range(500):
        assert isinstance(actors.call("fetch", queue=f"missing{n}"), NotFound)
    assert actors.fetcher.indexes.remembered() == set()
