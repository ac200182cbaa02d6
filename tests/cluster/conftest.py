"""The file systems the tests of this folder share: one GlusterFS volume (replica 3) and one
JuiceFS volume, each with three mounts, made by the first test that needs it and taken down
at the end of the session; each test works in a folder of its own (named after its tmp_path)
on them. Building a volume (glusterd, create, options, start, mounts) costs more than most of
these tests: once per worker, not once per test. Every test here is in the xdist group
"distributed-fs" (one glusterd per host), so one worker runs them all, one at a time, and a
test that kills a server has it started again before the next test. A test that stops a
whole volume makes one of its own, with the session's glusterd (a GlusterFS volume stopped
and started again may leave entries to heal that are never mended, and a brick is killed
only once nothing is left to heal).
"""

import os

import pytest

from repo_support import bench_importable

bench_importable()

from cluster_fs import VOLUMES, Volume, wait_for  # noqa: E402


class SharedVolumes:
    """The volumes of this session by kind, built on first use."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.volumes: dict[str, Volume] = {}

    def get(self, kind: str) -> Volume:
        """The shared volume of this kind, whole (every server up, every mount writable);
        the test is skipped when this file system cannot be built here."""
        volume_class = VOLUMES[kind]
        if (why := volume_class.missing()):
            pytest.skip(why)
        volume = self.volumes.get(kind)
        if volume is None:
            volume = volume_class(self.workdir)
            volume.__enter__()
            self.volumes[kind] = volume
        volume.restart_servers()  # Any left down (a killed server).
        for path in volume.mounts:  # A client reconnects to restarted servers in a moment.
            wait_for(lambda path=path: os.access(path, os.W_OK), 30, f"{kind} servers at {path}")
        return volume

    def close(self) -> None:
        """Unmount and delete every volume made."""
        for volume in self.volumes.values():
            volume.__exit__()


@pytest.fixture(scope="session")
def shared_volumes(tmp_path_factory):
    """The session's SharedVolumes."""
    shared = SharedVolumes(str(tmp_path_factory.mktemp("volumes")))
    yield shared
    shared.close()
