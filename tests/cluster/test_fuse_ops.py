"""On JuiceFS every change of a name or of an inode's times is durable when its call returns, and
the kernel answers a folder's fsync itself (JuiceFS answers FSYNCDIR with ENOSYS), so a root there
fsyncs only the files it writes: no folder is opened to be fsynced, and a due time is not
followed by an fsync (docs/FORMAT.md, "Durability"). Counted by the file system itself: the
client's `.stats` (bench/fs_ops.py counts whole adds and fetch+acks the same way).

Needs root and the packages `make test-packages` installs; skipped with one line otherwise.
"""

import os
import time

import pytest

from repo_support import bench_importable

bench_importable()

from fs_ops import fuse_ops  # noqa: E402

from mq.ids import new_id  # noqa: E402
from mq.store import Changes, Disk, Store, encode_message  # noqa: E402
from mq.store.disk import mount_type  # noqa: E402


def add_fetch_ack(store: Store) -> None:
    """One add, its claim and its ack, each flushed as an actor's batch flushes it."""
    message_id, changes = new_id(), Changes()
    store.write_new("q", message_id, encode_message(b"body", "text/plain", 1, message_id), None)
    store.flush_data()
    store.states.deliver_new("q", message_id, False, changes)
    store.flush(changes)
    changes = Changes()
    assert store.states.claim("q", message_id, time.time() + 30, 0, changes) is not None
    store.flush(changes)
    changes = Changes()
    assert store.states.ack("q", message_id, 1, changes)
    store.flush(changes)


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")
@pytest.mark.timeout(180)
def test_a_juicefs_root_fsyncs_no_folder_and_no_due_time(tmp_path, shared_volumes):
    # The session's volume (conftest.py): no other test runs meanwhile, so what the mount
    # counts is this test's.
    volume = shared_volumes.get("juicefs")
    mount = volume.mounts[0]
    assert mount_type(mount) == "fuse.juicefs"
    store = Store(os.path.join(mount, tmp_path.name), "auto")
    store.init()
    assert (store.sync, store.disk.synchronous_metadata) == ("file", True)
    # The same calls with every folder fsynced: what the count below leaves out.
    plain = Store(store.root, disk=Disk("file"))
    add_fetch_ack(store)
    add_fetch_ack(plain)  # Both warm: the queue exists, the kernel knows the folders.
    counts = {}
    for name, each in (("synchronous", store), ("per folder", plain)):
        before = fuse_ops(mount)
        add_fetch_ack(each)
        after = fuse_ops(mount)
        after.subtract(before)
        counts[name] = after
    assert counts["per folder"]["opendir"] >= 4, counts  # new/, queues/q/, delay/, remove/
    assert counts["synchronous"]["opendir"] == 0, counts
    assert counts["synchronous"]["fsync"] == 1, counts  # The message file's, as written.
    assert counts["per folder"]["fsync"] == 2, counts  # And the claimed file's, its due time.
