"""The on-disk format (the mq.store package) and the fetch actor's index, on a real temporary root."""

import errno
import os
import re
import time
import uuid

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq import store as fmt
import mq.store.disk as disk_module
from mq.actors.queue_index import QueueIndex
from mq.errors import Invalid, NotFound, Unavailable
from mq.ids import id_time_ms, is_id, new_id
from mq.store import Store
from mq.store.message import decode_header
from disks import FailingDisk
from doc_blocks import shown
from support import fetch_actor_for, files_in, poll_for, ready_daemon

NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"


# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("store")


@pytest.fixture(scope="module")
def store_mq(tmp_path_factory):
    """The module's daemon (each test has its own queue): two worker pairs, a 60 s redelivery
    timer (nothing fetched comes back meanwhile), and debug lines, where re-listings show."""
    yield from ready_daemon(tmp_path_factory.mktemp("store"), workers=2, timeout=60,
                            args=("--log-level=debug",))


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "root"), sync="file")
    store.init()
    return store


def ready_message(store, queue: str, body: bytes = b"body", message_id: str | None = None) -> str:
    """Write and deliver a message the way a save actor does; return its id."""
    message_id = message_id or new_id()
    store.write_new(queue, message_id, fmt.encode_message(body, "text/plain", 1, message_id), None)
    store.states.deliver_new(queue, message_id, delayed=False)
    return message_id


# -- names and ids -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=NAME_CHARS, min_size=1, max_size=fmt.MAX_QUEUE_NAME))
def test_names_of_1_to_128_allowed_characters_are_valid_except_the_reserved(name):
    if name in fmt.RESERVED_NAMES:
        with pytest.raises(Invalid):
            fmt.validate_queue(name)
    else:
        assert fmt.validate_queue(name) == name


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_any_name_with_another_character_or_length_is_invalid_and_says_why(name):
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name) and name not in fmt.RESERVED_NAMES:
        assert fmt.validate_queue(name) == name
        return
    with pytest.raises(Invalid) as caught:
        fmt.validate_queue(name)
    assert "invalid queue name" in caught.value.message


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 129, "a/b", "../x", "a:b", "a\0b", "a b",
                                  "é", "a\nb", "a\n", "/", "\\"])
def test_unsafe_queue_names_are_invalid(name):
    with pytest.raises(Invalid):
        fmt.validate_queue(name)


def test_non_string_names_and_ids_are_invalid():
    for value in (None, 5, b"q"):
        with pytest.raises(Invalid):
            fmt.validate_queue(value)
        with pytest.raises(Invalid):
            fmt.validate_id(value)


def test_ids_are_lower_case_uuids_and_nothing_else():
    for good in (new_id(), str(uuid.uuid4()), str(uuid.uuid1())):
        assert fmt.validate_id(good) == good
    for bad in (str(uuid.uuid4()).upper(), "", "../../etc/passwd", new_id() + ".1",
                new_id()[:-1], new_id() + "0", new_id() + "\n", "x" * 36):
        with pytest.raises(Invalid):
            fmt.validate_id(bad)


def test_ids_sort_in_creation_order_even_within_one_millisecond():
    ids = [new_id() for _ in range(5000)]  # thousands share a millisecond
    assert len({id_time_ms(i) for i in ids}) < len(ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(is_id(i) for i in ids)
    assert abs(id_time_ms(ids[-1]) - time.time() * 1000) < 5000
    assert uuid.UUID(ids[-1]).version == 7


# -- message files -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=5000), content_type=st.text(max_size=100),
       created_ms=st.integers(min_value=0, max_value=2**48), dedup=st.text(max_size=50))
def test_message_encode_decode_round_trips_any_body(body, content_type, created_ms, dedup):
    message_id = new_id()
    data = fmt.encode_message(body, content_type, created_ms, message_id, dedup)
    message = fmt.decode_message("q", message_id, data)
    assert (message.body, message.content_type, message.created_ms) == (body, content_type, created_ms)
    assert message.dedup_digest == (fmt.dedup_digest(dedup) if dedup else "")


@pytest.mark.parametrize("data", [b"", b"MQ", b"MQ\x01", b"XX\x01\x00\x00\x00\x00body",
                                  b"hello world"])
def test_decode_refuses_what_is_not_a_message_file(data):
    with pytest.raises(ValueError):
        fmt.decode_message("q", new_id(), data)


@settings(max_examples=100, deadline=None)
@given(attempts=st.integers(min_value=0, max_value=10_000))
def test_entry_names_carry_the_delivery_count(attempts):
    message_id = new_id()
    assert fmt.parse_entry(fmt.entry_name(message_id, attempts)) == (message_id, attempts)
    assert fmt.split_name(f"q.1:{fmt.entry_name(message_id, attempts)}") == ("q.1", message_id, attempts)


def test_names_that_are_not_entries_are_ignored():
    for name in ("", "x", "q:x", f"q:{new_id()}.x", f":{new_id()}", f"a/b:{new_id()}", "FORMAT"):
        assert fmt.split_name(name) is None
    assert fmt.parse_entry(f"{new_id()}.tmp") is None


# -- the root and the life of a message --------------------------------------------------------


def test_init_creates_the_folders_and_a_format_version(store):
    for name in ("new", "queues", "delay", "remove"):
        assert os.path.isdir(store.folder(name))
    with open(os.path.join(store.root, "FORMAT")) as f:
        assert f.read() == f"mq-format {fmt.FORMAT_VERSION}\n"
    store.init()  # again: same version, accepted


def test_a_root_of_another_format_version_is_refused(store):
    with open(os.path.join(store.root, "FORMAT"), "w") as f:
        f.write("mq-format 99\n")
    with pytest.raises(Invalid):
        Store(store.root).init()


def test_write_then_deliver_puts_the_whole_file_in_its_queue_and_nothing_in_new(store):
    message_id = ready_message(store, "q", b"payload")
    assert files_in(store.folder("new")) == []
    with open(store.ready_path("q", message_id), "rb") as f:
        assert fmt.decode_message("q", message_id, f.read()).body == b"payload"


def test_a_message_file_is_created_exclusively(store):
    message_id = new_id()
    store.write_new("q", message_id, b"first", None)
    with pytest.raises(FileExistsError):
        store.write_new("q", message_id, b"second", None)
    with open(store.new_path("q", message_id), "rb") as f:
        assert f.read() == b"first"


@pytest.mark.parametrize("sync", ["fs", "file"])
def test_a_failed_write_leaves_nothing_behind(tmp_path, sync):
    disk = FailingDisk(sync, write=errno.ENOSPC)
    disk.armed = False
    store = Store(str(tmp_path / "root"), disk=disk)
    store.init()
    disk.armed = True
    with pytest.raises(OSError) as caught:
        store.write_new("q", new_id(), b"x" * 10_000, None)
    assert caught.value.errno == errno.ENOSPC
    assert files_in(store.folder("new")) == []


def test_deliver_without_auto_create_refuses_a_missing_queue_and_discards(tmp_path):
    store = Store(str(tmp_path / "root"), auto_create=False)
    store.init()
    message_id = new_id()
    store.write_new("nope", message_id, b"x", None)
    with pytest.raises(NotFound):
        store.states.deliver_new("nope", message_id, delayed=False)
    assert files_in(store.folder("new")) == []


def test_deliver_into_a_queue_another_store_deleted_creates_it_again(store):
    ready_message(store, "q")  # Now known to this store: the next rename goes straight in.
    Store(store.root, sync="file").queues.delete_queue("q")
    message_id = ready_message(store, "q")
    assert files_in(store.queue_dir("q")) == [message_id]


def test_deliver_without_auto_create_into_a_queue_deleted_since_refuses_and_discards(tmp_path):
    store = Store(str(tmp_path / "root"), auto_create=False)
    store.init()
    store.queues.create_queue("q")
    ready_message(store, "q")
    Store(store.root).queues.delete_queue("q")
    message_id = new_id()
    store.write_new("q", message_id, b"x", None)
    with pytest.raises(NotFound):
        store.states.deliver_new("q", message_id, delayed=False)
    assert files_in(store.folder("new")) == []


@pytest.mark.parametrize("known", [False, True], ids=["first", "known queue"])
def test_a_written_message_the_file_system_lost_is_unavailable_not_a_storage_fault(store, known):
    # A replicated file system answering from a copy that was away can lose a file just
    # written: the add is not acknowledged and may be sent again (503), not an operator's 500.
    if known:
        ready_message(store, "q")
    message_id = new_id()
    path = store.write_new("q", message_id, fmt.encode_message(b"x", "", 1, message_id), None)
    os.unlink(path)
    with pytest.raises(Unavailable, match="the file system lost it"):
        store.states.deliver_new("q", message_id, delayed=False)
    assert message_id not in files_in(store.queue_dir("q"))


def test_claim_moves_a_ready_message_to_delay_with_its_due_time(store):
    message_id = ready_message(store, "q")
    due = time.time() + 30
    data = store.states.claim("q", message_id, due)
    assert fmt.decode_message("q", message_id, data).body == b"body"
    assert files_in(store.queue_dir("q")) == []
    assert files_in(store.folder("delay")) == [f"q:{message_id}.1"]
    assert os.stat(store.delay_path("q", message_id, 1)).st_mtime == pytest.approx(due, abs=1e-3)
    assert store.states.claim("q", message_id, due) is None  # already taken: the caller tries the next


def test_release_returns_a_due_message_to_its_queue_and_keeps_one_not_due(store):
    message_id = ready_message(store, "q")
    now = time.time()
    store.states.claim("q", message_id, now + 10)
    assert store.states.release("q", message_id, now, attempts=1) == ("not_due", pytest.approx(now + 10, abs=1e-3))
    outcome, _ = store.states.release("q", message_id, now + 11, attempts=1)
    assert outcome == "ready"
    assert files_in(store.queue_dir("q")) == [f"{message_id}.1"]
    assert store.states.release("q", message_id, now + 11, attempts=1)[0] == "gone"


def test_an_extend_between_the_movers_stat_and_its_rename_keeps_the_message_hidden(store, monkeypatch):
    message_id = ready_message(store, "q")
    now = time.time() + 1  # The mover acts a second after the claim (see SETTLE_SECONDS).
    store.states.claim("q", message_id, now - 1)  # Its timer ran out: the mover is about to release it.
    in_delay = store.delay_path("q", message_id, 1)
    real_rename, extended = disk_module.rename_noreplace, []

    def extend_first(source, target):
        # A consumer's extend lands after the mover read the due time, before its rename.
        if source == in_delay and not extended:
            extended.append(store.states.extend("q", message_id, 1, now + 30))
        real_rename(source, target)

    monkeypatch.setattr(disk_module, "rename_noreplace", extend_first)
    outcome, due = store.states.release("q", message_id, now, attempts=1)
    assert extended == [True]  # The extend answered 200, so it must hold.
    assert (outcome, due) == ("not_due", pytest.approx(now + 30, abs=1e-3))
    assert os.path.exists(in_delay) and files_in(store.queue_dir("q")) == []
    # An extend that comes after the rename finds no file in delay/ and is refused instead.
    monkeypatch.setattr(disk_module, "rename_noreplace", real_rename)
    assert store.states.release("q", message_id, now + 31, attempts=1)[0] == "ready"
    assert store.states.extend("q", message_id, 1, now + 60) is False


def test_a_release_that_finds_the_message_away_and_back_times_it_again_never_removes_it(store, monkeypatch):
    # Two movers (--peers) release one message; the other one moves it into the queue, sees
    # an extend and puts it back, all while this one's rename runs.
    message_id = ready_message(store, "q")
    now = time.time() + 1  # The mover acts a second after the claim (see SETTLE_SECONDS).
    store.states.claim("q", message_id, now - 1)
    in_delay, in_queue = store.delay_path("q", message_id, 1), store.ready_path("q", message_id, 1)
    real_rename = disk_module.rename_noreplace

    def the_other_mover_meanwhile(source, target):
        if source != in_delay:
            return real_rename(source, target)
        real_rename(in_delay, in_queue)                         # its release
        os.utime(in_queue, (now + 30, now + 30))                 # the extend it then sees
        try:
            real_rename(source, target)                          # this mover's rename: ENOENT
        finally:
            real_rename(in_queue, in_delay)                      # its putting back

    monkeypatch.setattr(disk_module, "rename_noreplace", the_other_mover_meanwhile)
    outcome, due = store.states.release("q", message_id, now, attempts=1)
    monkeypatch.setattr(disk_module, "rename_noreplace", real_rename)
    assert (outcome, due) == ("not_due", pytest.approx(now + 30, abs=1e-3))
    assert os.path.exists(in_delay) and files_in(store.folder("remove")) == []


def test_notices_are_best_effort(store):
    assert store.notices.read("q") == ""  # None posted yet.
    assert store.notices.post("q") is True
    token = store.notices.read("q")
    assert token and store.notices.post("q") and store.notices.read("q") not in ("", token)
    # A notices/ that cannot hold files (here: a file in its place) fails no caller: a post
    # says False, a read says None ("cannot tell", taken as no change).
    os.rename(store.folder("notices"), store.folder("notices") + ".away")
    open(store.folder("notices"), "w").close()
    assert store.notices.post("q") is False
    assert store.notices.read("q") is None


def test_sweep_notice_temps_unlinks_only_old_temporary_files(store):
    store.notices.post("q")
    old, young = (os.path.join(store.folder("notices"), f".{new_id()}.tmp") for _ in range(2))
    for path in (old, young):
        open(path, "w").close()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.notices.sweep_temps(min_age=3600) == 1
    assert sorted(files_in(store.folder("notices"))) == sorted(["ready:q", os.path.basename(young)])


def test_release_of_a_message_whose_queue_was_deleted_sends_it_to_remove(store):
    message_id = ready_message(store, "q")
    store.states.claim("q", message_id, time.time())
    os.rename(store.queue_dir("q"), os.path.join(store.folder("remove"), "q:old.queue"))
    assert store.states.release("q", message_id, time.time() + 1, attempts=1)[0] == "removed"
    assert f"q:{message_id}" in files_in(store.folder("remove"))


@pytest.mark.parametrize("state", ["new", "ready", "delayed", "in_flight", "redelivered"])
def test_remove_finds_a_message_in_every_state(store, state):
    message_id = new_id()
    store.write_new("q", message_id, b"x", time.time() + 60 if state == "delayed" else None)
    if state != "new":
        store.states.deliver_new("q", message_id, delayed=state == "delayed")
    if state in ("in_flight", "redelivered"):
        store.states.claim("q", message_id, time.time())
    if state == "redelivered":
        store.states.release("q", message_id, time.time() + 1, attempts=1)
        store.states.claim("q", message_id, time.time(), attempts=1)  # now delay/q:id.2
    assert store.states.remove("q", message_id, max_attempts=3) is not None
    assert files_in(store.folder("remove")) == [f"q:{message_id}"]
    for folder in ("new", "delay"):
        assert files_in(store.folder(folder)) == []
    assert files_in(store.queue_dir("q")) == []
    assert store.states.remove("q", message_id, max_attempts=3) is None


def test_a_message_past_the_probed_counts_is_found_from_a_count_it_had(store):
    # retry -1 redelivers forever: a lookup by id probes 0 to 101 deliveries, then from a count
    # the message had (a fetch actor's record, a listing), as many names again, never more.
    message_id = ready_message(store, "q")
    os.rename(store.ready_path("q", message_id, 0), store.ready_path("q", message_id, 499))
    assert store.states.locate("q", message_id, 101) is None
    assert store.queues.listed_delivery("q", message_id) == 499
    assert store.states.locate("q", message_id, 101, near=420) == ("ready", 499)
    assert store.states.locate("q", message_id, 101, near=300) is None  # Past near + 101.
    store.states.claim("q", message_id, time.time(), attempts=499)
    assert store.queues.list_delivered_past(101) == {("q", message_id): 500}
    assert store.queues.list_delivered_past(500) == {}
    assert store.queues.listed_delivery("q", message_id) == 500
    assert store.states.locate("q", message_id, 101, near=499) == ("in_flight", 500)
    assert len(list(store.states.candidates("q", message_id, 101, near=10**9))) == 1 + 2 * 2 * 102
    assert store.states.remove("q", message_id, 101) is None
    assert store.states.remove("q", message_id, 101, near=499) is not None
    assert files_in(store.folder("remove")) == [f"q:{message_id}"]
    assert store.queues.listed_delivery("q", message_id) is None


def test_delete_queue_moves_its_messages_in_every_state_to_remove(store):
    ready = ready_message(store, "q")
    flying = ready_message(store, "q")
    store.states.claim("q", flying, time.time() + 60)
    fresh = new_id()
    store.write_new("q", fresh, b"x", None)
    other = ready_message(store, "qq")
    store.write_new("qq", new_id(), b"y", None)

    assert store.queues.delete_queue("q") == 2  # the in-flight one and the one in new/
    assert not store.queues.queue_exists("q")
    assert files_in(store.folder("delay")) == []
    assert [n for n in files_in(store.folder("new")) if n.startswith("q:")] == []
    assert len(files_in(store.folder("new"))) == 1  # queue qq's is untouched
    assert files_in(store.queue_dir("qq")) == [other]
    assert ready not in files_in(store.queue_dir("qq"))
    with pytest.raises(NotFound):
        store.queues.delete_queue("q")


def test_clean_new_moves_every_leftover_to_remove_and_spares_fresh_ones_with_min_age(store):
    old = [f"q:{new_id()}" for _ in range(3)] + ["junk"]
    for name in old:
        path = os.path.join(store.folder("new"), name)
        with open(path, "wb") as f:
            f.write(b"MQ\x01 partial")
    # Age is the later of mtime and ctime (a spare taken keeps an old mtime): let them age.
    poll_for(lambda: time.time() - os.stat(path).st_ctime > 0.3, what="files 0.3 s old")
    fresh = store.write_new("q", new_id(), b"in progress", None)
    assert store.recovery.clean_new(min_age=0.3) == 4
    assert files_in(store.folder("new")) == [os.path.basename(fresh)]
    assert store.recovery.clean_new() == 1
    assert files_in(store.folder("new")) == []
    assert sorted(files_in(store.folder("remove"))) == sorted(old + [os.path.basename(fresh)])


def test_reap_unlinks_files_and_deleted_queue_folders(store):
    ready_message(store, "q")
    ready_message(store, "q")
    store.queues.delete_queue("q")
    store.write_new("x", new_id(), b"x", None)
    store.recovery.clean_new()
    assert store.recovery.reap() == 2
    assert files_in(store.folder("remove")) == []


def test_list_ready_and_list_delayed_read_the_folders(store):
    a, b = ready_message(store, "q"), ready_message(store, "q")
    due = time.time() + 5
    store.states.claim("q", b, due)
    assert store.states.list_ready("q") == [(a, 0)]
    assert store.states.list_ready("missing") == []
    assert store.states.list_ready("q", known={a}) == []  # Names the caller has are skipped.
    [(found_due, queue, message_id, attempts)] = store.states.list_delayed()
    assert (queue, message_id, attempts) == ("q", b, 1)
    assert found_due == pytest.approx(due, abs=1e-3)
    # What the mover already times is skipped: only new entries come back.
    store.states.claim("q", a, due)
    assert [entry[1:] for entry in store.states.list_delayed(known={("q", b, 1)})] == [("q", a, 1)]


def test_both_sync_modes_flush_without_error(tmp_path):
    for sync in ("fs", "file"):
        store = Store(str(tmp_path / sync), sync=sync)
        store.init()
        message_id = new_id()
        store.write_new("q", message_id, b"x", None)
        store.flush_data()
        store.flush({store.folder("new"), store.states.deliver_new("q", message_id, False)})
    with pytest.raises(ValueError):
        Store(str(tmp_path / "x"), sync="sometimes")


# -- the fetch actor's index ---------------------------------------------------------------------


def test_index_hands_out_the_oldest_first_whatever_the_order_it_learned_them_in():
    ids = [new_id() for _ in range(50)]
    index = QueueIndex([(i, 0) for i in reversed(ids[:25])])
    for message_id in reversed(ids[25:]):
        index.add(message_id)
    assert [index.take()[0] for _ in ids] == ids
    assert index.take() is None and len(index) == 0


def test_index_discard_is_lazy_but_a_discarded_id_is_never_handed_out():
    ids = [new_id() for _ in range(6)]
    index = QueueIndex([(i, 0) for i in ids])
    index.discard(ids[0])
    index.discard(ids[3])
    assert len(index) == 4
    assert len(index.heap) == 6  # still in the heap until it reaches the top
    assert [index.take()[0] for _ in range(4)] == [ids[1], ids[2], ids[4], ids[5]]
    assert index.take() is None
    assert index.heap == []


def test_index_keeps_delivery_counts_and_never_duplicates_an_id():
    message_id = new_id()
    index = QueueIndex([(message_id, 2)])
    index.add(message_id, 3)
    assert len(index) == 1 and len(index.heap) == 1
    assert index.attempts(message_id) == 3
    assert index.take() == (message_id, 3)
    assert index.attempts(message_id) is None


def test_index_with_spread_picks_among_the_oldest_and_loses_none():
    ids = [new_id() for _ in range(40)]
    index = QueueIndex([(i, 0) for i in ids])
    taken = []
    while (item := index.take(spread=3)) is not None:
        assert item[0] in ids[len(taken):len(taken) + 4] or item[0] in ids
        taken.append(item[0])
    assert sorted(taken) == ids


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "discard", "take"]), st.integers(0, 15)),
                max_size=80))
def test_index_behaves_like_a_sorted_set(ops):
    ids = sorted(new_id() for _ in range(16))
    index, model = QueueIndex([]), {}
    for op, n in ops:
        if op == "add":
            index.add(ids[n], n)
            model[ids[n]] = n
        elif op == "discard":
            index.discard(ids[n])
            model.pop(ids[n], None)
        else:
            expected = min(model) if model else None
            got = index.take()
            assert (got[0] if got else None) == expected
            if expected:
                assert got[1] == model.pop(expected)
        assert len(index) == len(model)


def test_fetch_actor_serves_from_its_index_without_listing_the_folder(store_mq):
    mq = store_mq  # Debug: the re-listings that found nothing are logged at that level.
    # Each save actor and the mover ask every fetch actor to re-list once they start; on a
    # loaded machine one may arrive late, and would rightly list the folder after the index is
    # built. Wait for all three before the index is built.
    owner = f"fetch-{fetch_actor_for('indexed', 2)}"
    mq.wait_for_events("fetch.relist", count=3, process=owner)
    first, second, third = (mq.add("indexed", b"%d" % i) for i in range(3))
    assert mq.fetch("indexed").header("X-Message-Id") == first  # the index is built here
    # Another writer on the root (a peer, the Spark source) adds an older message by rename.
    store = Store(str(mq.root))
    ms = id_time_ms(first) - 1000  # Older, yet well within the queue's retention.
    older = ready_message(store, "indexed", b"older", f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7000-8000-000000000001")
    assert older < first
    # A fetch that listed the folder would hand out the older one first; the index does not.
    assert mq.fetch("indexed").header("X-Message-Id") == second
    assert mq.fetch("indexed").header("X-Message-Id") == third
    # Once the index is empty it is rebuilt from the folder, and the older one shows up.
    found = poll_for(lambda: (r := mq.fetch("indexed")).status == 200 and r, 30)
    assert found.header("X-Message-Id") == older
    assert found.body == b"older"


def test_dedup_sweep_unlinks_only_keys_older_than_their_queues_window(store):
    now = time.time()
    for queue, key in (("short", "old"), ("short", "young"), ("long", "old")):
        assert store.dedup.record(queue, key, new_id(), 300, now) is None
    ten_minutes_ago = now - 600
    for queue in ("short", "long"):
        os.utime(store.dedup.path(queue, "old"), (ten_minutes_ago, ten_minutes_ago), follow_symlinks=False)
    windows = {"short": 300.0, "long": 3600.0}

    assert store.dedup.sweep(windows.__getitem__) == 1
    assert not os.path.lexists(store.dedup.path("short", "old"))
    assert os.path.lexists(store.dedup.path("short", "young"))
    assert os.path.lexists(store.dedup.path("long", "old"))  # Within its queue's longer window.
    assert store.dedup.record("short", "old", new_id(), 300, now) is None  # The key is free again.


@pytest.mark.parametrize("size", [0, 1, 100, 4096, 3 << 20])
def test_read_all_reads_every_byte_of_a_file_in_a_buffer_of_its_size(tmp_path, size):
    import tracemalloc

    from mq.store.reads import read_all

    data = os.urandom(size)
    path = tmp_path / "message"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        tracemalloc.start()
        try:
            assert read_all(fd) == data
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        os.close(fd)
    # A buffer far larger than the body, shrunk after the read, fragmented the fetch actor's
    # heap under steady traffic: the peak is the body and a little bookkeeping.
    assert peak <= size + 4096, peak


def test_read_all_reads_on_when_there_is_more_than_the_size_said():
    from mq.store.reads import READ_CHUNK, read_all

    # A pipe's size is 0: the first read finds more, as a file that grew would.
    data = os.urandom(3 * READ_CHUNK // 2)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            os.write(write_end, data)  # More than a pipe buffer may hold: the child writes.
            os._exit(0)
        os.close(write_end)
        write_end = -1
        assert read_all(read_end) == data
        os.waitpid(pid, 0)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_every_part_of_a_store_changes_the_root_through_the_one_disk_it_was_given(tmp_path):
    # Each part (queues, states, accumulation, recovery, staging, streams, keys, notices,
    # spares) holds the Disk: one put in its place later would be used by none of them.
    disk = fmt.Disk("fs")
    store = Store(str(tmp_path / "root"), disk=disk)
    parts = [store.queues, store.states, store.accumulation, store.recovery, store.staging,
             store.streams, store.dedup, store.notices, store.spares]
    assert all(part.disk is disk for part in parts)
    with pytest.raises(AttributeError):
        store.disk = fmt.Disk("fs")  # type: ignore[misc]
    assert store.disk is disk


def hexdump(data: bytes) -> str:
    """data as `xxd` shows it: offset, eight groups of two bytes, the printable characters."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at:at + 16]
        groups = " ".join(row[i:i + 2].hex() for i in range(0, len(row), 2))
        text = "".join(chr(b) if 0x20 <= b < 0x7f else "." for b in row)
        lines.append(f"{at:08x}: {groups:<39}  {text}")
    return "\n".join(lines) + "\n"


def test_a_message_file_is_the_one_the_format_doc_shows_plus_its_writer(store_mq):
    block = shown("FORMAT.md", "tests/store/test_store.py", "00000000: ")
    documented = bytes.fromhex("".join(line[10:49] for line in block.text.splitlines()))
    assert hexdump(documented) == block.text, "the dump is not what xxd shows of its bytes"
    # Read as the document's layout says: magic, header length, msgpack header, body.
    length = int.from_bytes(documented[3:7], "big")
    assert documented[:3] == b"MQ\x01"
    header, body = msgpack.unpackb(documented[7:7 + length]), documented[7 + length:]
    # What encode_message writes without a writer...
    assert fmt.encode_message(body, header["ct"], header["t"], header["id"]) == documented
    # ...and what the daemon wrote for the same add: the same keys, with its writer last.
    mq = store_mq
    resp = mq.request("POST", "/orders/messages", body, headers={"Content-Type": header["ct"]})
    assert resp.status == 201, resp.body
    message_id = resp.json()["id"]
    written = (mq.root / "queues" / "orders" / message_id).read_bytes()
    real, _ = decode_header("orders", message_id, written)
    assert list(real) == [*header, "w"]
    assert written == fmt.encode_message(body, header["ct"], real["t"], message_id, writer=real["w"])
