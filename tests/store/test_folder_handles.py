"""Folders fsynced through handles kept open (Disk.fsync_dir): a handle serves its path only
while the path names the folder it opened. A deleted or purged queue's folder is renamed
away and a new one made; an fsync through the old handle would leave the new folder's
entries unflushed."""

import os

from mq.store import Disk


def fsynced_folders(monkeypatch) -> list[str]:
    """The folders os.fsync is called on from now on (the calls still reach the disk)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_a_folder_renamed_away_and_made_again_is_fsynced_itself(tmp_path, monkeypatch):
    disk = Disk("file")
    folder = tmp_path / "q"
    folder.mkdir()
    seen = fsynced_folders(monkeypatch)
    disk.fsync_dir(str(folder))
    disk.fsync_dir(str(folder))
    assert seen == [str(folder)] * 2
    assert len(disk.dir_handles) == 1  # One handle, kept.
    folder.rename(tmp_path / "trash")
    folder.mkdir()
    disk.fsync_dir(str(folder))
    assert seen[-1] == str(folder), seen


def test_only_the_last_folders_keep_a_handle(tmp_path):
    disk = Disk("file")
    for n in range(70):
        (tmp_path / str(n)).mkdir()
        disk.fsync_dir(str(tmp_path / str(n)))
    assert list(disk.dir_handles) == [str(tmp_path / str(n)) for n in range(6, 70)]
