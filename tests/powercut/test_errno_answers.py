"""Reads of the root failing with a real errno from a real file system: lazyfs with faults
armed (lazyfs.FaultyLazyFS). Each answer goes through core/errors.py ERRNO_KINDS: EIO and
ENOTCONN, what a network file system gives while its server or metadata engine is away, are
503 with Retry-After; EACCES, an operator's error, a 500 "storage"; never an internal error,
and never an absence (404) that is not one."""

import errno
import socket

import msgpack
import pytest

from support import Daemon, free_port, poll_for
from test_power_cut import LazyMount, fuse_missing

#: The front's reads under test: pull-any (its queue list), SQS ListQueues (query protocol).
READS = ("/_mq/messages?qre=ord.*", "/?Action=ListQueues")


def rpc_error(port: int, method: str, *params):
    """The error of one MessagePack-RPC request (None when it succeeded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(msgpack.packb([0, 1, method, list(params)], use_bin_type=True))
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            for _, _, error, _ in unpacker:
                return error
            unpacker.feed(sock.recv(65536))


def answers(daemon: Daemon) -> list:
    """(status, Retry-After, body) of each of the front's reads."""
    out = []
    for path in READS:
        resp = daemon.request("GET", path)
        out.append((resp.status, resp.header("Retry-After"), resp.body))
    return out


def faulty_daemon(tmp_path):
    """(lazyfs mount with a faults file, its faults file, a ready daemon on mnt/root)."""
    backing, mountpoint, run = tmp_path / "backing", tmp_path / "mnt", tmp_path / "run"
    for folder in (backing, mountpoint, run):
        folder.mkdir()
    faults = tmp_path / "faults"
    lazy = LazyMount(backing, mountpoint, tmp_path / "lazyfs.log", faults=faults)
    lazy.mount()
    try:
        daemon = Daemon(mountpoint / "root", tmp_path, workers=1,
                        args=(f"--run-dir={run}", f"--rpc-port={free_port()}"),
                        log_file=tmp_path / "mq.log").start()
        daemon.rpc_port = int(daemon.args[-1].split("=")[1])
    except BaseException:
        lazy.cleanup()
        raise
    return lazy, faults, daemon


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}")
def test_a_failing_read_of_the_root_in_the_front_is_answered_by_its_errno(tmp_path):
    lazy, faults, daemon = faulty_daemon(tmp_path)
    try:
        daemon.wait_ready()
        message_id = daemon.add("orders", b"hello")
        for code in (errno.EIO, errno.ENOTCONN):
            faults.write_text(f"readdir /root/queues {code}\n")
            for status, retry_after, body in answers(daemon):
                assert (status, retry_after) == (503, "1"), body
            error = rpc_error(daemon.rpc_port, "pull_any", "ord.*", 0)
            assert error["error"] == "unavailable", error
        faults.write_text(f"readdir /root/queues {errno.EACCES}\n")
        pull_any, list_queues = answers(daemon)
        assert pull_any[0] == 500 and b'"error":"storage"' in pull_any[2], pull_any
        assert list_queues[0] == 500 and b"InternalFailure" not in list_queues[2], list_queues
        logged = daemon.wait_for_events("front.disk_error", count=5)
        assert {line["kind"] for line in logged} == {"unavailable", "storage"}
        faults.write_text("")
        resp = poll_for(lambda: (r := daemon.request("GET", READS[0])).status == 200 and r, 10,
                        what="pull-any to answer again")
        assert resp.header("X-Message-Id") == message_id
        assert daemon.request("GET", READS[1]).status == 200
    finally:
        daemon.cleanup()
        lazy.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}")
def test_a_queue_whose_folder_cannot_be_looked_up_is_503_not_404(tmp_path):
    lazy, faults, daemon = faulty_daemon(tmp_path)
    try:
        daemon.wait_ready()
        assert daemon.request("PUT", "/quiet").status == 201
        assert daemon.request("GET", "/quiet/messages").status == 204
        faults.write_text(f"getattr /root/queues/quiet {errno.ENOTCONN}\n")
        # The kernel may answer from its attribute cache for up to a second: then the fault.
        resp = poll_for(lambda: (r := daemon.request("GET", "/quiet/messages")).status != 204 and r,
                        10, what="the lookup to reach the file system")
        assert (resp.status, resp.header("Retry-After")) == (503, "1"), resp.body
        faults.write_text("")
        poll_for(lambda: daemon.request("GET", "/quiet/messages").status == 204, 10,
                 what="the queue to answer again")
    finally:
        daemon.cleanup()
        lazy.cleanup()
