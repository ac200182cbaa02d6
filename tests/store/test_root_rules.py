"""What a root accepts and refuses: reserved names, long names, its folders and flushes, and
the check that keeps a second daemon off a root it would damage."""

import os
import socket
import subprocess
import tempfile
import time

import pytest

from actor_support import Actors
from cli_support import run_forked
from mq import store as fmt
from mq.errors import Invalid
from mq.ids import new_id
from mq.store import Disk, Store
from mq.supervisor import main as supervisor
from support import files_in, free_port, init_root_at_once, poll_for


def run_mq(*args: str):
    """mq's main() to completion in a child forked from this process: what the command does with
    these options, without an interpreter's imports (a start that should be refused)."""
    return run_forked(supervisor.main, list(args), dict(os.environ), timeout=60)


@pytest.mark.parametrize("name", fmt.RESERVED_NAMES)
def test_no_queue_may_take_a_name_the_root_uses(name):
    with pytest.raises(Invalid):
        fmt.validate_queue(name)


def test_a_queue_named_like_the_default_rules_file_is_refused_and_rules_keep_working(mq):
    assert mq.request("PUT", "/_defaults/properties", b'{"retry": 1}').status == 400
    assert mq.request("POST", "/q/messages", b"x").status == 201
    assert mq.request("GET", "/q/messages").status == 200


def test_a_queue_with_a_long_name_is_deleted_whole(tmp_path):
    actors = Actors(tmp_path)
    queue = "q" * fmt.MAX_QUEUE_NAME
    actors.add({"queue": queue, "body": b"x", "dedup_id": "k"})
    assert actors.call("props_put", queue=queue, properties={"retry": 7})["own"] == {"retry": 7}
    assert actors.call("queue_delete", queue=queue)["queue"] == queue
    assert not os.path.exists(actors.store.props_path(queue))
    assert not os.path.exists(actors.store.dedup_dir(queue))
    # Re-created, it starts clean: no old properties, no old keys.
    again = actors.add({"queue": queue, "body": b"x", "dedup_id": "k"})[0]
    assert not again.get("duplicate")
    assert actors.call("props_get", queue=queue)["own"] == {}


class FsyncRecorder(Disk):
    """A real Disk that records which folders it fsynced."""

    def __init__(self, sync):
        super().__init__(sync)
        self.fsynced = []

    def fsync_dir(self, path):
        """Record, then fsync."""
        self.fsynced.append(path)
        super().fsync_dir(path)


def test_folders_made_at_start_and_for_keys_are_durable_in_their_parent(tmp_path):
    disk = FsyncRecorder("file")
    store = Store(str(tmp_path / "root"), disk=disk)
    store.init()
    assert store.root in disk.fsynced  # Each of the root's folders was created in it.
    disk.fsynced.clear()
    store.dedup.record("q", "key", new_id(), 60, 0)
    assert store.folder("dedup") in disk.fsynced


def test_a_root_whose_folder_is_a_link_to_another_place_is_refused(tmp_path):
    root = tmp_path / "root"
    Store(str(root)).init()
    elsewhere = tmp_path / "elsewhere"
    os.rename(root / "delay", elsewhere)
    os.symlink(elsewhere, root / "delay")
    with pytest.raises(Invalid, match="symbolic link"):
        Store(str(root)).init()
    result = run_mq(f"--root={root}", f"--port={free_port()}")
    assert result.returncode == 2 and "symbolic link" in result.stderr


def test_a_libc_without_syncfs_falls_back_to_flushing_each_file(tmp_path):
    disk = Disk("fs", libc=object())
    assert disk.fell_back and disk.sync == "file"
    actors = Actors(tmp_path, disk)
    stored = actors.add({"queue": "q", "body": b"kept"})[0]
    assert files_in(actors.store.queue_dir("q")) == [stored["id"]]


def test_a_second_daemon_sees_the_first_whose_sockets_are_outside_the_root(start_mq, tmp_path):
    first = start_mq(workers=1, args=(f"--run-dir={tmp_path / 'sockets'}",))
    result = run_mq(f"--root={first.root}", f"--port={free_port()}")
    assert result.returncode == 2 and "in use" in result.stderr
    assert poll_for(lambda: first.request("GET", "/_mq/health").status == 200)


def test_a_dead_daemons_folder_goes_with_the_socket_folder_mq_made_for_it(start_mq, tmp_path):
    root = tmp_path / "root"
    Store(str(root)).init()
    dead = subprocess.Popen(["true"])
    dead.wait()  # Its pid is nobody's now, as a supervisor killed with -9 leaves it.
    folder = root / "run" / f"{socket.gethostname()}-{dead.pid}"
    folder.mkdir()
    sockets = tempfile.mkdtemp(prefix="mq-run-")
    (folder / "ipc").write_text(sockets)
    start_mq(root=root, workers=1)
    assert not folder.exists() and not os.path.exists(sockets)


def test_the_reaper_cleans_new_files_whose_writer_died_and_frees_their_keys(start_mq, tmp_path):
    root = tmp_path / "root"
    store = Store(str(root))
    store.init()
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = {}
    for name, pid in (("dead", dead.pid), ("alive", os.getpid())):
        message_id = new_id()
        writer = f"local/{socket.gethostname()}-{pid}"
        store.write_new("q", message_id, fmt.encode_message(b"x", "text/plain", 0, message_id,
                                                            name, writer), None)
        store.dedup.record("q", name, message_id, 300, time.time())
        left[name] = message_id
    # --peers: the start-up clean-up leaves young files alone, so only the reaper can act.
    daemon = start_mq(root=root, workers=1, args=("--peers=1",))
    poll_for(lambda: not os.path.exists(store.new_path("q", left["dead"])), 10,
             what="the reaper to clean the dead writer's file")
    assert store.dedup.lookup("q", "dead", 300, time.time()) is None
    assert os.path.exists(store.new_path("q", left["alive"]))
    assert daemon.events("reaper.cleaned_new")[0]["count"] == 1


def test_processes_creating_one_new_root_at_once_all_accept_it(tmp_path):
    root = tmp_path / "root"
    init_root_at_once(root, 12)
    assert (root / "FORMAT").read_text() == f"mq-format {fmt.FORMAT_VERSION}\n"
    assert [n for n in os.listdir(root) if n.endswith(".tmp")] == []
