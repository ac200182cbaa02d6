"""The reaper without spares (--sync=file, a network or FUSE root) lists remove/ and spare/ only
when their mtime moved since a pass found them empty: an idle daemon's passes then cost a stat
each, not an open, two reads and a close of each folder."""

import os
import time

import pytest

from mq.ids import new_id
from mq.store import Store, encode_message
from mq.store import recovery


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "root"), "file")
    store.init()
    return store


def removed(store: Store, queue: str = "q") -> str:
    """Add a ready message and remove it; return its id."""
    message_id = new_id()
    store.write_new(queue, message_id, encode_message(b"body", "text/plain", 1, message_id), None)
    store.states.deliver_new(queue, message_id, False)
    store.states.remove(queue, message_id)
    return message_id


def age_mtime(path: str, seconds: float) -> int:
    """Set a folder's mtime `seconds` back; return it (ns)."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(then, then))
    return then


def put_back(path: str, mtime_ns: int) -> None:
    """Give a folder the mtime it had: a change its mtime does not show."""
    os.utime(path, ns=(mtime_ns, mtime_ns))


@pytest.mark.timeout(30)
def test_a_folder_found_empty_is_listed_again_only_once_its_mtime_moved(store):
    remove = store.folder("remove")
    for folder in (remove, store.folder("spare")):
        age_mtime(folder, 5)
    assert store.spares.recycle_removed(10) == (0, 0)  # Both found empty, settled.
    mtime = os.stat(remove).st_mtime_ns
    removed(store)
    put_back(remove, mtime)
    assert store.spares.recycle_removed(10) == (0, 0)  # Not listed: its mtime did not move.
    assert len(os.listdir(remove)) == 1
    removed(store)  # Moves the mtime.
    assert store.spares.recycle_removed(10) == (0, 2)
    assert os.listdir(remove) == []


@pytest.mark.timeout(30)
def test_a_folder_whose_mtime_was_fresh_when_found_empty_is_listed_again(store):
    """A change within SETTLED_MTIME_NS of the mtime seen may leave it as it was (a coarse
    mtime, or JuiceFS's --skip-dir-mtime): such a folder is listed at the next pass whatever."""
    remove = store.folder("remove")
    mtime = age_mtime(remove, 0.01)
    assert store.spares.recycle_removed(10) == (0, 0)
    removed(store)
    put_back(remove, mtime)
    assert store.spares.recycle_removed(10) == (0, 1)


@pytest.mark.timeout(30)
def test_a_folder_found_empty_is_listed_again_after_a_while_whatever_its_mtime(store, monkeypatch):
    """A network file system's client may answer a stat from attributes it cached."""
    monkeypatch.setattr(recovery, "RELIST_EMPTY_SECONDS", 0.0)
    remove = store.folder("remove")
    mtime = age_mtime(remove, 5)
    assert store.spares.recycle_removed(10) == (0, 0)
    removed(store)
    put_back(remove, mtime)
    assert store.spares.recycle_removed(10) == (0, 1)
