"""--sync=auto: the flush is chosen from the root's file system type (docs/CLUSTER.md, "The
flush"); a FUSE root is tested in tests/powercut/, where it also has to survive a power cut."""

import os

from mq.store import Store
from mq.store.disk import PER_FILE_FLUSH, choose_sync, filesystem_type


def test_auto_keeps_syncfs_on_a_local_file_system_and_names_its_type(tmp_path):
    kind = filesystem_type(str(tmp_path))
    assert kind not in PER_FILE_FLUSH, "the test folder is on a network or FUSE file system"
    store = Store(str(tmp_path / "not" / "yet" / "made"), "auto")
    assert (store.sync, store.filesystem) == ("fs", f"0x{kind:x}")


def test_a_mode_given_is_used_whatever_the_file_system(tmp_path):
    store = Store(str(tmp_path), "file")
    assert (store.sync, store.filesystem) == ("file", "")


def test_procfs_type_is_read_from_statfs():
    # /proc has a fixed, well-known type: PROC_SUPER_MAGIC.
    assert filesystem_type("/proc") == 0x9FA0
    assert choose_sync("/proc") == ("fs", "0x9fa0")


def test_the_broker_less_library_chooses_the_same_way(tmp_path):
    from mq.local import LocalClient

    client = LocalClient(tmp_path / "root", create_root=True)
    assert (client.store.sync, client.store.filesystem) == choose_sync(str(tmp_path))


def test_the_mount_type_is_read_from_the_mount_table_by_device(tmp_path):
    from mq.store.disk import mount_type

    device = os.stat(tmp_path).st_dev
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 0:1 / / rw shared:1 - ext4 /dev/other rw\n"
        f"36 22 {os.major(device)}:{os.minor(device)} / /mnt/jfs rw,relatime shared:7 master:2 "
        "- fuse.juicefs JuiceFS:vol rw,user_id=0\n")
    assert mount_type(str(tmp_path / "not" / "yet" / "made"), str(table)) == "fuse.juicefs"
    assert mount_type(str(tmp_path), str(tmp_path / "missing")) == ""


def test_a_local_root_fsyncs_its_folders(tmp_path):
    assert not Store(str(tmp_path), "file").disk.synchronous_metadata
