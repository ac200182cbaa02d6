"""Renames that decide who owns a message never replace a name, and what a network file
system answers in a race or an outage maps to a lost race or to 503 (docs/CLUSTER.md,
"Exclusive renames" and "Errors").

A client of a network file system that lost a race to a peer still has the source name
cached; the peer's new name holds the same file. On one local disk a hard link gives that
exact view: two names of one file, the source and the target of a claim.
"""

import errno
import json
import os
import time

import pytest

from actor_support import Actors
from disks import FailingDisk
from mq.errors import StorageFailure, Unavailable, from_os_error
from mq.ids import new_id
from mq.store import Disk, Store, encode_message
from mq.store.renames import check_exclusive, checked_rename, rename_noreplace
from support import files_in


def ready_message(store: Store, queue: str, body: bytes = b"x") -> str:
    """Add one ready message the way the save actor does; return its id."""
    message_id = new_id()
    store.write_new(queue, message_id, encode_message(body, "text/plain", 1, message_id), None)
    store.states.deliver_new(queue, message_id, delayed=False)
    return message_id


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "root"), sync="fs")
    s.init()
    return s


# -- renames that never replace -----------------------------------------------------------------


def test_a_state_change_never_replaces_an_existing_name(tmp_path):
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    with pytest.raises(FileExistsError):
        Disk("fs").rename(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "a").read_text() == "a" and (tmp_path / "b").read_text() == "b"
    Disk("fs").rename(str(tmp_path / "a"), str(tmp_path / "c"))
    assert sorted(os.listdir(tmp_path)) == ["b", "c"]


def test_a_refused_flag_is_asked_for_once_and_the_target_still_checked(tmp_path, monkeypatch):
    """GlusterFS answers RENAME_NOREPLACE with EINVAL, a round trip to its client each time."""
    from mq.store import disk as disk_module

    asked = []

    def refused(source: str, target: str) -> None:
        asked.append(target)
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), source, None, target)

    monkeypatch.setattr(disk_module, "rename_noreplace", refused)
    for name in "abc":
        (tmp_path / name).write_text(name)
    disk = Disk("file")
    disk.rename(str(tmp_path / "a"), str(tmp_path / "d"))
    disk.rename(str(tmp_path / "b"), str(tmp_path / "e"))
    assert len(asked) == 1 and disk.refuses_noreplace
    with pytest.raises(FileExistsError):
        disk.rename(str(tmp_path / "c"), str(tmp_path / "d"))
    assert (tmp_path / "c").read_text() == "c" and (tmp_path / "d").read_text() == "a"


def test_a_small_file_is_still_replaced_whole(tmp_path):
    disk = Disk("fs")
    path = str(tmp_path / "props.json")
    disk.replace(path, b"1")
    disk.replace(path, b"2")
    assert open(path, "rb").read() == b"2" and os.listdir(tmp_path) == ["props.json"]


def test_a_claim_whose_target_already_names_the_file_is_a_lost_race(store):
    # What the loser's kernel sees: its cached source and the winner's new name are one file.
    message_id = ready_message(store, "q", b"once")
    source, target = store.ready_path("q", message_id), store.delay_path("q", message_id, 1)
    os.link(source, target)
    assert store.states.claim("q", message_id, time.time() + 30) is None
    assert os.path.samefile(source, target)  # Untouched: it is the winner's.


def test_a_checked_rename_sees_a_rename_that_only_seemed_to_succeed(tmp_path):
    # rename(2) between two names of one file does nothing and returns 0 (POSIX).
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    os.rename(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a").exists()
    with pytest.raises(FileExistsError):
        checked_rename(str(tmp_path / "a"), str(tmp_path / "b"))
    checked_rename(str(tmp_path / "b"), str(tmp_path / "c"))  # A real rename passes.
    assert sorted(os.listdir(tmp_path)) == ["a", "c"]


def test_the_start_up_check_finds_renameat2_on_a_local_disk(tmp_path):
    assert check_exclusive(str(tmp_path))[0] == "noreplace"
    assert os.listdir(tmp_path) == []  # Its scratch files are gone.


def test_rename_noreplace_names_both_paths_in_its_error(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        rename_noreplace(str(tmp_path / "a"), str(tmp_path / "b"))
    assert caught.value.filename == str(tmp_path / "a")
    assert caught.value.filename2 == str(tmp_path / "b")


# -- errors of network file systems -------------------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOTCONN, errno.ESTALE, errno.EIO, errno.ECONNREFUSED,
                                  errno.EHOSTUNREACH, errno.ETIMEDOUT, errno.EREMOTEIO,
                                  errno.ENOENT, errno.EPROTO])  # ENOENT outside a race; unlisted
def test_an_outage_of_a_network_file_system_is_503_with_retry_after(code):
    error = from_os_error(OSError(code, os.strerror(code)), "cannot fetch")
    assert isinstance(error, Unavailable) and error.retry_after == 1
    assert os.strerror(code) in error.message


def test_an_error_no_wait_cures_stays_a_storage_failure():
    assert isinstance(from_os_error(OSError(errno.EACCES, "x"), "cannot add"), StorageFailure)


class RemovedMeanwhileDisk(Disk):
    """A peer removes the message (DELETE by id, then the reaper) right after this claim's
    rename: setting the due time finds the file gone, as a network file system answers."""

    def __init__(self, code: int):
        super().__init__("fs")
        self.code = code

    def set_mtime(self, fd, when):
        """The file leaves delay/ first, then the time change fails."""
        delay = os.path.dirname(os.readlink(f"/proc/self/fd/{fd}"))
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        os.unlink(os.path.join(delay, name))
        raise OSError(self.code, os.strerror(self.code))


@pytest.mark.parametrize("code", [errno.ESTALE, errno.ENOENT])
def test_a_claimed_file_removed_before_its_due_time_is_set_is_a_lost_race(tmp_path, code):
    actors = Actors(tmp_path, disk=RemovedMeanwhileDisk(code))
    actors.add({"queue": "q", "body": b"gone"})
    result = actors.call("fetch", queue="q")
    assert result == {"empty": True} or result.get("empty"), result


@pytest.mark.parametrize("op", ["rename", "set_mtime"])
@pytest.mark.parametrize("code", [errno.ENOTCONN, errno.EIO])
def test_a_fetch_during_an_outage_is_503_and_the_message_stays(tmp_path, op, code):
    disk = FailingDisk("fs", **{op: code}, after={"rename": 1} if op == "rename" else {})
    actors = Actors(tmp_path, disk=disk)
    added = actors.add({"queue": "q", "body": b"kept"})[0]
    result = actors.call("fetch", queue="q")
    assert isinstance(result, Unavailable) and result.retry_after == 1, result
    disk.armed = False
    fetched = actors.call("fetch", queue="q")
    assert fetched["id"] == added["id"] and fetched["body"] == b"kept"


class StaleOnce(FailingDisk):
    """Fails the first armed rename with ESTALE, then none."""

    def fail(self, op):
        """Raise once, then disarm."""
        try:
            super().fail(op)
        except OSError:
            self.armed = False
            raise


def test_a_rename_refused_as_stale_by_a_fetch_is_the_next_message_not_an_error(tmp_path):
    # ESTALE at the claim's rename: the handle of a file a peer moved and that is gone.
    disk = StaleOnce("fs", rename=errno.ESTALE)
    actors = Actors(tmp_path, disk=disk)
    disk.armed = False
    first = actors.add({"queue": "q", "body": b"1"})[0]
    second = actors.add({"queue": "q", "body": b"2"})[0]
    disk.armed = True  # The first claim's rename fails, the second's passes.
    fetched = actors.call("fetch", queue="q")
    assert fetched["id"] == second["id"], fetched
    assert first["id"] in "".join(files_in(actors.store.queue_dir("q")))


def test_the_daemon_logs_how_its_root_renames_at_start(start_mq):
    daemon = start_mq()
    events = [json.loads(line) for line in daemon.log_path.read_text().splitlines()
              if line.startswith("{")]
    checks = [e for e in events if e.get("event") == "supervisor.rename_check"]
    assert checks and checks[0]["mode"] == "noreplace", checks
