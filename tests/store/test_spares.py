"""Spare files: the reaper keeps removed messages' files, and adds write new messages into them.

A file is written again only once its old message's removal is durable, never while another
name points at it, and a reader that did not claim a message never takes a spare's new bytes
for the message the file held before.
"""

import os
import time

import pytest

from crash_model import RecordingDisk
from mq.ids import new_id
from mq.store import CorruptMessage, Store, encode_message
from mq.store import listing, recovery, spares
from mq.store.spares import SPARE_MAX_BYTES
from support import poll_for
from test_flush_ordering import (Rig, assert_as_written, assert_gone, assert_live, assert_sound,
                                 check_every_cut)


def stored(store: Store, queue: str, body: bytes) -> str:
    """Add a ready message the way a save actor does; return its id."""
    message_id = new_id()
    store.write_new(queue, message_id, encode_message(body, "text/plain", 1, message_id), None)
    store.flush_data()
    store.states.deliver_new(queue, message_id, False)
    store.flush({store.queue_dir(queue), store.folder("new")})
    return message_id


def spares_of(store: Store) -> dict:
    """inode -> name of every file in spare/."""
    folder = store.folder("spare")
    return {os.stat(os.path.join(folder, name)).st_ino: name for name in os.listdir(folder)}


@pytest.fixture
def list_spares_at_once(monkeypatch):
    """A writer lists spare/ again LIST_SECONDS after a listing found it empty: here at once,
    so that an add right after the reaper's pass looks at what it kept."""
    monkeypatch.setattr(spares, "LIST_SECONDS", 0.0)


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "root"), "fs")
    store.init()
    return store


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("list_spares_at_once")
def test_an_add_writes_into_a_removed_message_s_file_and_cuts_it_to_length(store):
    old = stored(store, "q", b"a much longer body than the next one" * 10)
    store.states.remove("q", old)
    assert store.spares.recycle_removed(10, grace=0) == (1, 0)
    [inode] = spares_of(store)
    new = stored(store, "q", b"short")
    path = store.ready_path("q", new)
    assert os.stat(path).st_ino == inode, "the add did not take the spare file"
    assert spares_of(store) == {}
    message, _ = listing.read_unclaimed(path, "q", new)
    assert message.body == b"short"
    assert os.path.getsize(path) == len(encode_message(b"short", "text/plain", 1, new))


@pytest.mark.timeout(30)
def test_the_reaper_flushes_the_removals_before_it_keeps_any_file(tmp_path):
    disk = RecordingDisk("fs")
    store = Store(str(tmp_path / "root"), "fs", disk=disk)
    store.init()
    ids = [stored(store, "q", b"m%d" % i) for i in range(3)]
    for message_id in ids:
        store.states.remove("q", message_id)
    disk.syncfs(store.root)
    recording = disk.start_recording(store.root)
    assert store.spares.recycle_removed(10, grace=0) == (3, 0)
    disk.stop_recording()
    kinds = [(e.kind, e.target.split("/")[0]) for e in recording.events]
    assert kinds[0] == ("syncfs", ""), f"a file was kept before the removals were flushed: {kinds}"
    assert kinds[1:] == [("rename", "spare")] * 3


@pytest.mark.timeout(30)
def test_the_reaper_unlinks_what_it_must_not_keep(store):
    small = [stored(store, "q", b"small %d" % i) for i in range(2)]
    big = stored(store, "q", b"x" * (SPARE_MAX_BYTES + 1))
    linked = stored(store, "q", b"also named elsewhere")
    os.link(store.ready_path("q", linked), os.path.join(store.root, "elsewhere"))
    linked_inode = os.stat(store.ready_path("q", linked)).st_ino
    for message_id in small + [big, linked]:
        store.states.remove("q", message_id)
    foreign = stored(store, "q", b"written by another user")
    os.chown(store.ready_path("q", foreign), 12345, 12345)
    store.states.remove("q", foreign)
    os.mkdir(store.trash_path("q", "queue"))
    # The big file, the one with another name, the other user's and the folder are unlinked.
    assert store.spares.recycle_removed(10, grace=0) == (2, 4)
    assert linked_inode not in spares_of(store), "a file with another name was kept"
    assert os.listdir(store.folder("remove")) == []
    # Room for one more: of three, one is kept.
    for message_id in [stored(store, "q", b"more %d" % i) for i in range(3)]:
        store.states.remove("q", message_id)
    assert store.spares.recycle_removed(3, grace=0) == (1, 2)
    assert len(spares_of(store)) == 3


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sync, limit", [("file", 10), ("fs", 0)])
def test_without_recycling_the_reaper_empties_remove_and_spare(tmp_path, sync, limit):
    store = Store(str(tmp_path / "root"), "fs")
    store.init()
    kept = stored(store, "q", b"kept by an earlier run")
    store.states.remove("q", kept)
    assert store.spares.recycle_removed(10, grace=0) == (1, 0)
    gone = stored(store, "q", b"removed now")
    store.states.remove("q", gone)
    store = Store(store.root, sync)
    assert store.spares.recycle_removed(limit, grace=0) == (0, 2)
    assert spares_of(store) == {} and os.listdir(store.folder("remove")) == []


@pytest.mark.timeout(30)
def test_a_removed_file_is_kept_only_once_nobody_changed_it_for_the_grace(store):
    # A process that opened it before the removal may still write it or set its time.
    message_id = stored(store, "q", b"removed just now")
    store.states.remove("q", message_id)
    assert store.spares.recycle_removed(10, grace=60) == (0, 0)
    assert os.listdir(store.folder("remove")) == [f"q:{message_id}"]
    poll_for(lambda: store.spares.recycle_removed(10, grace=0.3) == (1, 0), what="kept after 0.3 s")
    assert len(spares_of(store)) == 1


@pytest.mark.timeout(30)
def test_the_grace_of_a_removed_file_counts_from_the_pass_that_first_listed_it(store):
    # A pass looks only at files an earlier pass listed at least the grace ago: under load
    # remove/ holds the last grace seconds of removals, and a stat of each at every pass was
    # most of the reaper's work. So an old file is kept only after a second pass.
    message_id = stored(store, "q", b"removed a while ago")
    store.states.remove("q", message_id)
    removed = os.lstat(os.path.join(store.folder("remove"), f"q:{message_id}")).st_ctime
    poll_for(lambda: time.time() - removed > 0.5, what="the removal half a second old")
    assert store.spares.recycle_removed(10, grace=0.3) == (0, 0)
    assert os.listdir(store.folder("remove")) == [f"q:{message_id}"]
    poll_for(lambda: store.spares.recycle_removed(10, grace=0.3) == (1, 0),
             what="kept 0.3 s after its first listing")


@pytest.mark.timeout(30)
def test_two_reapers_on_one_root_keep_spare_within_its_limit(store, monkeypatch):
    # Each reaper counts the spares it made since it last listed spare/; a peer daemon's
    # reaper adds to the same folder, which a listing every RELIST_SECONDS takes in.
    monkeypatch.setattr(spares, "RELIST_SECONDS", 0.0)
    peer = Store(store.root, "fs")
    for reaper, count in ((store, 2), (peer, 2), (store, 2)):
        for message_id in [stored(store, "q", b"m%d" % i) for i in range(count)]:
            store.states.remove("q", message_id)
        reaper.spares.recycle_removed(5, grace=0)
    assert len(spares_of(store)) == 5
    assert os.listdir(store.folder("remove")) == []


@pytest.mark.timeout(30)
def test_a_spare_just_taken_into_new_is_not_old_for_the_clean_up_of_new(store, monkeypatch):
    # A spare keeps its old message's mtime; its ctime says it was just taken.
    path = store.new_path("q", new_id())
    with open(path, "wb") as f:
        f.write(encode_message(b"old message", "text/plain", 1, new_id()))
    os.utime(path, (1, 1))
    assert store.recovery.clean_new(min_age=60) == 0
    # Its writer died before writing: no header of its own; the reaper moves it once it is old.
    assert store.recovery.clean_new(dead=lambda writer: False) == 0
    monkeypatch.setattr(recovery, "ABANDONED_SECONDS", 0.0)
    assert store.recovery.clean_new(dead=lambda writer: False) == 1
    assert os.listdir(store.folder("new")) == []


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("list_spares_at_once")
def test_a_writer_of_another_user_takes_no_spare(store):
    old = stored(store, "q", b"removed")
    store.states.remove("q", old)
    assert store.spares.recycle_removed(10, grace=0) == (1, 0)
    os.chown(store.folder("spare"), 12345, 12345)
    stored(store, "q", b"created, not written into a spare")
    assert len(spares_of(store)) == 1


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("list_spares_at_once")
def test_a_spare_that_cannot_be_written_is_dropped_and_the_add_creates_its_file(store):
    os.mkdir(store.spare_path("not-a-file"))
    message_id = stored(store, "q", b"stored all the same")
    message, _ = listing.read_unclaimed(store.ready_path("q", message_id), "q", message_id)
    assert message.body == b"stored all the same"
    assert os.listdir(store.folder("new")) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("plant", ["symlink", "hard link", "fifo"])
@pytest.mark.usefixtures("list_spares_at_once")
def test_an_add_never_writes_through_a_spare_that_is_not_a_file_of_its_own(store, tmp_path, plant):
    # Anything planted in spare/ (a symbolic link or a second name of a file outside the
    # root; a fifo, whose open for writing would wait for a reader) is dropped, never written.
    outside = tmp_path / "outside"
    outside.write_bytes(b"not mq's to write")
    spare = store.spare_path(new_id())
    if plant == "symlink":
        os.symlink(outside, spare)
    elif plant == "hard link":
        os.link(outside, spare)
    else:
        os.mkfifo(spare)
    message_id = stored(store, "q", b"stored all the same")
    assert outside.read_bytes() == b"not mq's to write"
    assert os.lstat(outside).st_nlink == 1 and os.listdir(store.folder("spare")) == []
    path = store.ready_path("q", message_id)
    assert os.path.isfile(path) and not os.path.islink(path) and os.stat(path).st_nlink == 1
    message, _ = listing.read_unclaimed(path, "q", message_id)
    assert message.body == b"stored all the same"
    assert os.listdir(store.folder("new")) == []


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("list_spares_at_once")
def test_an_add_takes_no_spare_through_a_spare_folder_replaced_by_a_link(store, tmp_path):
    # spare/ swapped for a link to a folder outside the root: its files are not the root's
    # spares, and taking one would move it into the root and write over it.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / new_id()).write_bytes(b"not mq's to take")
    os.rmdir(store.folder("spare"))
    os.symlink(outside, store.folder("spare"))
    stored(store, "q", b"created, not written into a spare")
    [name] = os.listdir(outside)
    assert (outside / name).read_bytes() == b"not mq's to take"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("delay", [None, 3600.0])
@pytest.mark.usefixtures("list_spares_at_once")
def test_a_message_written_into_a_spare_has_its_own_time_not_the_old_message_s(store, delay):
    # A spare keeps the mtime of the message it held (an in-flight one's due time, maybe far
    # ahead); the add's write moves it to the add's time, or the delayed add's due time.
    old = stored(store, "q", b"removed while in flight" * 10)
    os.utime(store.ready_path("q", old), (4e9, 4e9))
    store.states.remove("q", old)
    assert store.spares.recycle_removed(10, grace=0) == (1, 0)
    message_id, before = new_id(), time.time()
    due = None if delay is None else before + delay
    path = store.write_new("q", message_id, encode_message(b"new", "text/plain", 1, message_id), due)
    assert spares_of(store) == {}, "the add did not take the spare file"
    mtime = os.stat(path).st_mtime
    if due is None:
        assert before - 0.1 <= mtime <= time.time() + 0.1
    else:
        assert mtime == pytest.approx(due, abs=1e-6)


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("list_spares_at_once")
def test_a_reader_whose_file_became_another_message_sees_its_message_gone(store, monkeypatch):
    # A peek opens a message's file; before it reads, the message is removed, and its file
    # recycled and written again as another message. The read must not return those bytes.
    old = stored(store, "q", b"old body")
    path = store.ready_path("q", old)
    real_read_all = listing.read_all

    def recycled_meanwhile(fd):
        store.states.remove("q", old)
        assert store.spares.recycle_removed(10, grace=0) == (1, 0)
        new = stored(store, "q", b"new body")
        assert os.stat(store.ready_path("q", new)).st_ino == os.fstat(fd).st_ino
        return real_read_all(fd)

    monkeypatch.setattr(listing, "read_all", recycled_meanwhile)
    assert listing.read_unclaimed(path, "q", old) is None


@pytest.mark.timeout(30)
def test_a_file_holding_another_message_is_not_read_as_this_one(store):
    one, other = stored(store, "q", b"one"), stored(store, "q", b"other")
    os.rename(store.ready_path("q", other), store.ready_path("q", one))
    with pytest.raises(CorruptMessage, match="holds message"):
        listing.read_unclaimed(store.ready_path("q", one), "q", one)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("list_spares_at_once")
def test_a_recycled_file_never_shows_its_new_bytes_under_the_old_name_at_every_point(tmp_path):
    rig = Rig(tmp_path, "fs")
    [gone] = rig.add({"queue": "q", "body": b"removed"})
    [stays] = rig.add({"queue": "q", "body": b"stays"})
    rig.record()
    # Writeback may write a file's pages before any flush: the model leaks data too.
    rig.disk.recording.leak_data = True
    # The removal's rename, and the reaper's pass before the remover's own flush (the
    # reaper is another process).
    rig.store.states.remove("q", gone["id"])
    assert rig.store.spares.recycle_removed(10, grace=0) == (1, 0)
    [inode] = spares_of(rig.store)
    [new] = rig.add({"queue": "q", "body": b"new"})
    assert os.stat(rig.store.ready_path("q", new["id"])).st_ino == inode
    rig.acked("new", new)

    torn: list = []

    def check(view, acknowledged):
        # One flush after the add's rename: a cut can leave the new name on the old bytes,
        # which no reader takes for the new message (assert_as_written).
        assert_sound(view, torn=torn)
        assert_as_written(view, rig.written)
        assert_live(view, stays["id"], "q", b"stays")
        places = view.live(gone["id"])
        if places:
            assert_live(view, gone["id"], "q", b"removed")
        if "new" in acknowledged:
            assert_live(view, new["id"], "q", b"new")
            assert_gone(view, gone["id"], "after its file was written again")

    check_every_cut(rig, check)
    assert torn, "no cut left the new name on the spare's old bytes"


@pytest.mark.timeout(60)
def test_a_daemon_writes_new_messages_into_the_files_of_removed_ones(start_mq, tmp_path):
    daemon = start_mq(args=("--sync=fs",))
    first = {daemon.add("q", b"first %d" % i) for i in range(20)}
    daemon.drain("q", first)
    spare = tmp_path / "root" / "spare"
    poll_for(lambda: len(os.listdir(spare)) == 20, what="the reaper keeping 20 removed files")
    inodes = {os.stat(spare / name).st_ino for name in os.listdir(spare)}
    added = {}

    def an_add_took_a_spare():
        # A save actor lists an empty spare/ again 0.5 s after it last found none.
        message_id = daemon.add("q", b"again %d" % len(added))
        added[message_id] = b"again %d" % len(added)
        return os.stat(tmp_path / "root" / "queues" / "q" / message_id).st_ino in inodes

    poll_for(an_add_took_a_spare, interval=0.1, what="an add written into a spare file")
    assert daemon.drain("q", set(added)) == added


def test_a_discarded_write_becomes_a_spare_not_a_freed_inode(store):
    # An add refused after its file was written (past its deadline, a failed batch) must
    # store nothing, and must not free the inode either: on ext4 without a journal every
    # create near an inode freed lately scans past it, so unlinking the files of discarded
    # batches made the next adds dearer, and then late in turn.
    message_id = new_id()
    store.write_new("q", message_id, encode_message(b"x", "text/plain", 1, message_id), None)
    inode = os.stat(store.new_path("q", message_id)).st_ino
    store.discard_new("q", message_id)
    assert os.listdir(store.folder("new")) == [] and os.listdir(store.folder("queues")) == []
    assert store.spares.recycle_removed(16, grace=0.0) == (1, 0)
    assert list(spares_of(store)) == [inode]
