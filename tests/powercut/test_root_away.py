"""The root's file system goes away under a running daemon, and comes back.

A FUSE file system (lazyfs, the power-cut test's) unmounted lazily, or the root hidden by an
empty folder bind-mounted over it: the root's path then leads to an empty folder. The daemon
must see it, refuse what needs the root with 503 and Retry-After, write nothing into that
folder, keep publishing health.json, log root.lost, and resume by itself when the root is back
(root.back) with every message acknowledged before still there.
"""

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from support import Daemon, checked_body, poll_for
from test_power_cut import FUSERMOUNT, LazyMount, fuse_missing


def bind_mount_missing() -> str:
    """Why `mount --bind` cannot be used here, or "" when it can."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return "mount --bind needs root and mount(8)"
    return ""


def health_file(daemon: Daemon) -> Path:
    """Where the supervisor publishes health.json while the root is away."""
    run_dir = daemon.run_dir()
    if run_dir.is_relative_to(daemon.root):
        # Socket folder under the root: the host's temporary folder meanwhile (docs/OPERATIONS.md).
        return Path(os.environ.get("TMPDIR", "/tmp")) / f"mq-health-{daemon.pid}.json"
    return run_dir / "health.json"


def refused(resp) -> bool:
    """The answer to an operation that needs a root that is away."""
    return resp.status == 503 and resp.header("Retry-After") is not None


def lose_and_regain(daemon: Daemon, bare: Path | None, take_away, bring_back,
                    why: str = "FORMAT is missing", kill_actor: bool = False) -> None:
    """Add, take the root away, check every refusal and that `bare` (the folder the root's path
    then leads to, if any) stays empty, bring the root back, check that everything resumes."""
    bodies = [checked_body(i, 300) for i in range(20)]
    acknowledged = {daemon.add("kept", body): body for body in bodies}
    daemon.request("PUT", "/other")
    long_poll: dict = {}
    waiting = threading.Thread(target=lambda: long_poll.update(
        resp=daemon.request("GET", "/other/messages?wait=15", timeout=60)))
    waiting.start()
    daemon.wait_for_events("fetch.wait", queue="other")  # Parked (a debug line).
    pull_any: dict = {}
    watching = threading.Thread(target=lambda: pull_any.update(
        resp=daemon.request("GET", "/_mq/messages?qre=other&wait=15", timeout=60)))
    watching.start()
    daemon.wait_for_events("fetch.watch", queue="other")  # A pull-any watch, parked too.
    take_away()
    lost = daemon.wait_for_events("root.lost", timeout=10)[0]
    assert lost["root"] == str(daemon.root) and why in lost["error"], lost
    for method, path, body in (("POST", "/kept/messages", b"x"), ("GET", "/kept/messages", None),
                               ("POST", "/made-now/messages", b"x"),  # auto-create
                               ("PUT", "/made-too", None), ("GET", "/other/messages", None)):
        resp = daemon.request(method, path, body)
        assert refused(resp), (method, path, resp.status, resp.body)
        assert b"is not available" in resp.body, resp.body  # The root's refusal, not another
    waiting.join(10)  # A long poll parked before the loss is refused too, not left waiting.
    assert refused(long_poll["resp"]), long_poll
    watching.join(10)  # So is a pull-any watch: its actor keeps no deadline to spin on.
    assert refused(pull_any["resp"]), pull_any
    health = daemon.request("GET", "/health")
    assert health.status == 503 and "root" in health.json()["down"], health.body
    assert b"mq_root_available 0.0" in daemon.request("GET", "/metrics").body
    since = time.time()
    # Still written: a stamp taken after the loss was seen, with the root's state in it.
    poll_for(lambda: health_file(daemon).stat().st_mtime > since + 0.5, 10,
             what="health.json rewritten while the root is away")
    assert '"state": "lost"' in health_file(daemon).read_text()
    if kill_actor:
        # A child that dies meanwhile waits for the root: its start would read it.
        spawned = daemon.wait_for_events("supervisor.spawn", child="fetch-0")[0]
        daemon.kill_child("fetch-0")
        crash = daemon.wait_for_events("supervisor.crash", child="fetch-0")[0]
        assert crash["restart_in_s"] < 1
        seen_dead = time.time()
        poll_for(lambda: health_file(daemon).stat().st_mtime > seen_dead + 1.5, 10,
                 what="health.json rewritten after the restart was due")
        rows = json.loads(health_file(daemon).read_text())["children"]
        assert [r["alive"] for r in rows if r["name"] == "fetch-0"] == [False]
        assert [
            line for line in daemon.events("supervisor.spawn") if line["child"] == "fetch-0"
        ] == [spawned], "restarted while the root was away"
    if bare is not None:
        assert list(bare.iterdir()) == [], "the daemon wrote into the folder that hides the root"
    bring_back()
    daemon.wait_for_events("root.back", timeout=10)
    if kill_actor:
        daemon.wait_for_events("supervisor.spawn", count=2, child="fetch-0")
    poll_for(lambda: daemon.request("POST", "/kept/messages", b"after").status == 201, 10,
             what="adds to resume")
    assert b"mq_root_available 1.0" in daemon.request("GET", "/metrics").body
    poll_for(lambda: daemon.request("GET", "/health").status == 200, 10, what="/health 200")
    seen = daemon.drain("kept", set(acknowledged))
    assert all(seen[i] == body for i, body in acknowledged.items())


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}")
@pytest.mark.parametrize("how", ["unmounted", "killed"])
def test_a_fuse_root_gone_under_the_daemon_is_refused_then_resumed(tmp_path, how):
    """unmounted: lazily, the root's path then leads to the empty mount point; killed: the FUSE
    process gets SIGKILL, every path under the mount fails with ENOTCONN until it is unmounted."""
    backing, mountpoint, run = tmp_path / "backing", tmp_path / "mnt", tmp_path / "run"
    for folder in (backing, mountpoint, run):
        folder.mkdir()
    lazy = LazyMount(backing, mountpoint, tmp_path / "lazyfs.log")
    daemon = None
    try:
        lazy.mount()
        # Sockets off the FUSE mount, as the power-cut test: only the root is on it.
        daemon = Daemon(mountpoint / "root", tmp_path, args=(f"--run-dir={run}", "--log-level=debug"),
                        log_file=tmp_path / "mq.log").start().wait_ready()

        def unmount_lazily():
            subprocess.run([FUSERMOUNT, "-u", "-z", str(mountpoint)], check=True)
            # lazyfs exits once nothing holds the detached mount (it keeps its durable image).
            assert lazy.proc.wait(30) == 0, lazy.log.read_text()

        def kill():
            lazy.proc.kill()
            lazy.proc.wait(30)

        def remount():
            if how == "killed":  # "Transport endpoint is not connected" until unmounted.
                subprocess.run([FUSERMOUNT, "-u", "-z", str(mountpoint)], check=True)
            lazy.mount()

        if how == "unmounted":
            lose_and_regain(daemon, mountpoint, unmount_lazily, remount)
        else:
            lose_and_regain(daemon, None, kill, remount, why="not connected")
    finally:
        if daemon:
            daemon.cleanup()
        lazy.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.skipif(bool(bind_mount_missing()), reason=bind_mount_missing())
def test_a_root_hidden_by_an_empty_bind_mount_is_refused_then_resumed(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    # The default socket folder (under the root): health.json goes to the temporary folder.
    daemon = Daemon(tmp_path / "root", tmp_path, args=("--log-level=debug",),
                    log_file=tmp_path / "mq.log").start().wait_ready()
    mounted = False
    try:
        def hide():
            nonlocal mounted
            subprocess.run(["mount", "--bind", str(empty), str(daemon.root)], check=True)
            mounted = True

        def unhide():
            nonlocal mounted
            subprocess.run(["umount", str(daemon.root)], check=True)
            mounted = False

        lose_and_regain(daemon, empty, hide, unhide, kill_actor=True)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(daemon.root)])
        daemon.cleanup()
