"""--fronts N: N HTTP fronts on one port (SO_REUSEPORT), each serving, each critical."""

import socket
import subprocess
import sys

import psutil
import pytest

from mq.config import Options
from mq.supervisor import tree
from support import command, free_port, poll_for

FRONTS = ("front-0", "front-1")


def died(child: tree.Child, started: float) -> None:
    """Give child a real process that has exited."""
    child.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    child.proc.wait()
    child.started = started


def answered_by(mq, requests: int) -> set[str]:
    """The fronts whose access log shows one of `requests` adds, each on a new connection."""
    offset = len(mq.events("http.request"))
    for _ in range(requests):
        assert mq.request("POST", "/spread/messages", b"x").status == 201
    lines = poll_for(lambda: (got := mq.events("http.request")[offset:]) and len(got) >= requests
                     and got, 30, what="the access log lines")
    return {line["process"] for line in lines}


@pytest.mark.timeout(60)
def test_two_fronts_share_the_port_and_one_killed_leaves_the_other_serving(start_mq):
    mq = start_mq(workers=1, args=("--fronts=2",))
    mq.wait_for_events("front.start", process="front-1")
    assert {t.split(" [")[0] for t in mq.titles()} >= {"mq: front 0", "mq: front 1"}
    # 24 new connections all on one front by chance: 2 in 2^24.
    assert answered_by(mq, 24) == set(FRONTS)
    health = poll_for(lambda: (r := mq.request("GET", "/_mq/health")).status == 200 and r.json(), 30)
    assert {c["name"] for c in health["children"]} >= set(FRONTS)

    old = mq.kill_child("front-1")
    # Connections waiting in a killed front's own accept queue are reset with it (seen once
    # on a loaded machine even after it was gone): front-0 alone serves meanwhile, and
    # front-1 is restarted and serves again.
    poll_for(lambda: not psutil.pid_exists(old) or psutil.Process(old).status() == "zombie", 30,
             ignore=(psutil.NoSuchProcess,))
    mq.wait_for_new_pid("front-1", old, timeout=20)
    mq.wait_for_events("front.start", count=2, process="front-1")
    assert answered_by(mq, 24) == set(FRONTS)


def test_every_front_is_critical_five_deaths_of_any_one_within_a_minute_stop_the_daemon(tmp_path):
    supervisor = tree.Tree(Options(root=str(tmp_path), workers=1, fronts=3), str(tmp_path))
    fronts = [c for c in supervisor.children if c.kind == "front"]
    assert [(c.name, c.critical) for c in fronts] == [(f"front-{i}", True) for i in range(3)]
    now = 5000.0
    for _ in range(tree.FRONT_MAX_CRASHES - 1):
        died(fronts[2], started=now - 0.2)
        assert supervisor.check(fronts[2], now)
        now += 1
    died(fronts[2], started=now - 0.2)
    assert not supervisor.check(fronts[2], now)


def test_fronts_do_not_join_a_port_another_program_listens_on(tmp_path):
    with socket.socket() as taken:
        # As another daemon's fronts would: SO_REUSEPORT alone would let mq's fronts join it.
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([command("mq"), f"--root={tmp_path / 'root'}", f"--port={port}",
                                 "--fronts=2"], capture_output=True, text=True, timeout=20)
    assert result.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in result.stderr


def writers(root, queue: str) -> set[str]:
    """The save actors ("save-0", ...) that wrote the messages of a queue (their files' header)."""
    import msgpack

    found = set()
    for path in (root / "queues" / queue).iterdir():
        data = path.read_bytes()
        header = msgpack.unpackb(data[7:7 + int.from_bytes(data[3:7], "big")])
        found.add(header["w"].rpartition("/")[2])
    return found


@pytest.mark.timeout(60)
def test_each_front_sends_its_adds_to_a_save_actor_of_its_own(start_mq, tmp_path):
    # One add at a time: no actor ever has --save-batch waiting, so each front keeps to the
    # first one it looks at, its own (front i: save actor i); both fronts answered (24 new
    # connections on one front by chance: 2 in 2^24), so both save actors wrote.
    mq = start_mq(workers=2, args=("--fronts=2",))
    mq.wait_for_events("front.start", process="front-1")
    assert answered_by(mq, 24) == set(FRONTS)
    assert writers(tmp_path / "root", "spread") == {"save-0", "save-1"}
