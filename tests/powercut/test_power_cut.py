"""Power cuts on a real file system: the daemon runs on lazyfs (a FUSE file system that forgets
every change not flushed), is killed with kill -9 under concurrent adds, the power is cut
(lazyfs unmounted: only what fsync made durable stays), the file system mounted again and the
daemon restarted: every acknowledged message is there, byte for byte.

kill -9 alone keeps the page cache, so it cannot show a missing flush; this can. It also shows
why --sync=auto picks per-file fsync on FUSE: syncfs(2) never reaches a FUSE file system, so
with --sync=fs the same run loses acknowledged messages (docs/CLUSTER.md, "The flush").
"""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import Daemon, body_is_whole, checked_body, poll_for

LAZYFS = Path(__file__).with_name("lazyfs.py")
FUSERMOUNT = shutil.which("fusermount3") or shutil.which("fusermount")
#: The daemon's --timeout: messages in flight at the cut come back this long after their fetch.
TIMEOUT_SECONDS = 2.0


def fuse_missing() -> str:
    """Why FUSE cannot be used here, or "" when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not FUSERMOUNT:
        return "no fusermount3 (Debian/Ubuntu: apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401  (raises when libfuse is not installed)
    except (ImportError, OSError, EnvironmentError) as err:
        return f"mfusepy unusable: {err}"
    return ""


pytestmark = pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}")


class LazyMount:
    """lazyfs over a backing folder, mounted in a child process; unmount() cuts the power."""

    def __init__(self, backing: Path, mountpoint: Path, log: Path, faults: Path | None = None):
        """faults: the file of faults to inject (lazyfs.FaultyLazyFS), if any."""
        self.backing, self.mountpoint, self.log, self.faults = backing, mountpoint, log, faults
        self.proc = None

    def mount(self) -> "LazyMount":
        """Mount and wait until the mount point is one."""
        faults = ["--faults", str(self.faults)] if self.faults else []
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, str(LAZYFS), str(self.backing),
                                          str(self.mountpoint), *faults], stdout=log, stderr=log)
        poll_for(lambda: os.path.ismount(self.mountpoint), 20, what="lazyfs to be mounted")
        return self

    def cut_power(self) -> None:
        """Unmount: lazyfs rewrites the backing folder to its durable image and exits."""
        subprocess.run([FUSERMOUNT, "-u", str(self.mountpoint)], check=True)
        assert self.proc.wait(30) == 0, self.log.read_text()

    def cleanup(self) -> None:
        """Unmount whatever is still mounted (after a failure)."""
        if self.proc and self.proc.poll() is None:
            subprocess.run([FUSERMOUNT, "-u", "-z", str(self.mountpoint)])
            self.proc.wait(30)


class Producers:
    """Threads adding checkable bodies until told to stop or the daemon stops answering."""

    def __init__(self, daemon: Daemon, threads: int):
        self.daemon = daemon
        self.acknowledged: dict[str, bytes] = {}  # id -> body of every add answered 201
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.produce, args=(n,)) for n in range(threads)]
        for thread in self.threads:
            thread.start()

    def produce(self, n: int) -> None:
        """Add until stopped; a refused or broken connection ends this producer."""
        i = 0
        while not self.stopping.is_set():
            i += 1
            body = checked_body(n * 100_000 + i, 200 + 37 * (i % 50))
            try:
                resp = self.daemon.request("POST", f"/cut-{n % 2}/messages", body, timeout=10)
            except OSError:
                return
            if resp.status == 201:
                self.acknowledged[resp.header("X-Message-Id")] = body

    def stop(self) -> dict[str, bytes]:
        """Stop and wait for every thread; the acknowledged adds."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        return dict(self.acknowledged)


def survivors(daemon: Daemon, want: set[str], timeout: float) -> dict[str, bytes]:
    """id -> body of every message the restarted daemon hands out (fetched and deleted), until
    every id in want came or timeout seconds passed (in-flight ones return with their timer)."""
    seen: dict[str, bytes] = {}
    deadline = time.monotonic() + timeout
    while True:
        for queue in ("cut-0", "cut-1"):
            while (resp := daemon.fetch(queue)).status == 200:
                seen[resp.header("X-Message-Id")] = resp.body
                daemon.delete(queue, resp.header("X-Message-Id"))
            assert resp.status in (204, 404), (resp.status, resp.body)
        if want <= set(seen) or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def cut_power_under_load(tmp_path: Path, sync: str) -> tuple[dict, dict, list]:
    """Run the daemon on lazyfs with --sync, add under load, kill -9, cut, remount, restart;
    return (acknowledged, survived, the supervisor.sync_chosen lines of the first start)."""
    backing, mountpoint = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mountpoint.mkdir()
    lazy = LazyMount(backing, mountpoint, tmp_path / "lazyfs.log")
    daemon = None
    try:
        lazy.mount()
        # Sockets and logs off the FUSE mount: only the root is on it.
        args = (f"--sync={sync}", f"--run-dir={tmp_path / 'run'}")
        (tmp_path / "run").mkdir()
        daemon = Daemon(mountpoint / "root", tmp_path, workers=2, timeout=TIMEOUT_SECONDS,
                        args=args, log_file=tmp_path / "mq.log").start().wait_ready()
        chosen = daemon.events("supervisor.sync_chosen")
        producers = Producers(daemon, threads=4)
        poll_for(lambda: len(producers.acknowledged) >= 80, 60, what="80 adds acknowledged")
        # Some in flight at the cut: claimed (renamed into delay/, due time set), never acked.
        in_flight = [daemon.fetch("cut-0") for _ in range(5)]
        assert all(resp.status == 200 for resp in in_flight)
        daemon.kill_tree()  # While the producers are still adding.
        acknowledged = producers.stop()
        lazy.cut_power()
        lazy.mount()
        daemon.start().wait_ready()
        return acknowledged, survivors(daemon, set(acknowledged), TIMEOUT_SECONDS + 10), chosen
    finally:
        if daemon:
            daemon.cleanup()
        lazy.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_every_acknowledged_message_survives_a_power_cut_on_fuse_with_sync_auto(tmp_path):
    acknowledged, survived, chosen = cut_power_under_load(tmp_path, "auto")
    assert [(c["sync"], c["filesystem"]) for c in chosen] == [("file", "fuse")]
    assert len(acknowledged) >= 80
    lost = set(acknowledged) - set(survived)
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged messages lost"
    changed = [i for i in acknowledged if survived[i] != acknowledged[i]]
    assert not changed, f"{len(changed)} bodies changed"
    assert all(body_is_whole(body) for body in survived.values())
