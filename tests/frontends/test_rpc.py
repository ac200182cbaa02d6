"""The MessagePack-RPC server (--rpc-port): every method over a real TCP socket with a client
built on the msgpack package, pipelined requests answered out of order, notifications, a
malformed frame (answered, connection closed, server unharmed), and README.md's example."""

import itertools
import os
import re
import socket
import subprocess
import sys
import time

import msgpack
import pytest

from support import Daemon, free_port, poll_for
from repo_support import REPO

README = REPO / "docs" / "HTTP.md"
names = (f"rpc-{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def rpc_mq(tmp_path_factory):
    """A daemon with the RPC server on a free port, and debug lines that show polls waiting."""
    workdir = tmp_path_factory.mktemp("rpc")
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30,
                    args=("--log-level=debug", f"--rpc-port={free_port()}")).start()
    daemon.rpc_port = int(daemon.args[-1].split("=")[1])
    try:
        daemon.wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", daemon.rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        yield daemon
    finally:
        daemon.cleanup()


class RpcClient:
    """A MessagePack-RPC client on one TCP connection: requests may be pipelined."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.ids = itertools.count(1)
        self.answers: dict[int, tuple] = {}

    def send(self, *frames) -> None:
        """Write frames (lists) at once."""
        self.sock.sendall(b"".join(msgpack.packb(f, use_bin_type=True) for f in frames))

    def request(self, method: str, *params) -> int:
        """Send a request; return its msgid."""
        msgid = next(self.ids)
        self.send([0, msgid, method, list(params)])
        return msgid

    def read(self):
        """The next value from the server; None when it closed the connection."""
        while True:
            for value in self.unpacker:
                return value
            data = self.sock.recv(65536)
            if not data:
                return None
            self.unpacker.feed(data)

    def answer(self, msgid: int) -> tuple:
        """(error, result) of a request, whatever order the responses come in."""
        while msgid not in self.answers:
            kind, got, error, result = self.read()
            assert kind == 1
            self.answers[got] = (error, result)
        return self.answers.pop(msgid)

    def call(self, method: str, *params):
        """A request's result; AssertionError with the error if it failed."""
        error, result = self.answer(self.request(method, *params))
        assert error is None, error
        return result

    def close(self) -> None:
        """Hang up."""
        self.sock.close()


@pytest.fixture
def rpc(rpc_mq):
    """A client connected for one test."""
    client = RpcClient(rpc_mq.rpc_port)
    yield client
    client.close()


def test_push_pull_done_round_trip_every_kind_of_content(rpc):
    queue = next(names)
    contents = [b"\x00raw bytes", "text \u00e9t\u00e9", {"to": "ann", "n": [1, 2.5, None]}, 42]
    for content in contents:
        assert rpc.call("push", queue, content) == "ok"
    for content in contents:
        got = rpc.call("pull", queue)
        assert (got["queue"], got["type"], got["content"], got["attempts"]) == \
            (queue, "normal", content, 1)
        assert rpc.call("done", queue, got["id"]) == "ok"
    assert rpc.call("pull", queue) == "empty"


def test_a_message_pushed_over_rpc_is_the_same_message_over_http(rpc, rpc_mq):
    queue = next(names)
    rpc.call("push", queue, "hello")
    resp = rpc_mq.request("GET", f"/{queue}/messages")
    assert resp.status == 200 and resp.body == b"hello"
    assert resp.header("Content-Type") == "text/plain; charset=utf-8"
    rpc_mq.add(queue, b"\xffbinary")
    assert rpc.call("pull", queue)["content"] == b"\xffbinary"


def test_release_gives_a_message_back_and_retain_keeps_it(rpc):
    queue = next(names)
    rpc.call("push", queue, "job")
    first = rpc.call("pull", queue)
    assert rpc.call("retain", queue, first["id"]) == "ok"
    assert rpc.call("pull", queue) == "empty"
    assert rpc.call("release", queue, first["id"], first["receipt"]) == "ok"
    again = rpc.call("pull", queue)
    assert (again["id"], again["attempts"]) == (first["id"], 2)
    # The first delivery's receipt is stale now: done with it fails, with the HTTP error kind.
    error, _ = rpc.answer(rpc.request("done", queue, first["id"], first["receipt"]))
    assert error["error"] == "conflict" and "stale receipt" in error["message"]
    assert rpc.call("done", queue, again["id"], again["receipt"]) == "ok"


def test_a_message_past_101_deliveries_is_answered_without_its_receipt(rpc):
    """retry -1 redelivers forever; done, retain and release by id find it at any count."""
    queue = next(names)
    assert rpc.call("update_props", queue, {"retry": -1}) == "ok"
    rpc.call("push", queue, "again")
    for n in range(1, 103):  # Past 101 deliveries, the most a `retry` count allows.
        got = rpc.call("pull", queue)
        assert got["attempts"] == n
        assert rpc.call("release", queue, got["id"], got["receipt"]) == "ok"
    got = rpc.call("pull", queue)
    assert got["attempts"] == 103
    assert rpc.call("retain", queue, got["id"]) == "ok"
    assert rpc.call("release", queue, got["id"]) == "ok"
    again = rpc.call("pull", queue)
    assert (again["id"], again["attempts"]) == (got["id"], 104)
    assert rpc.call("done", queue, got["id"]) == "ok"
    assert rpc.call("pull", queue) == "empty"


def test_pull_with_a_timeout_waits_for_a_push_and_answers_empty_after_it(rpc, rpc_mq):
    queue = next(names)
    rpc_mq.request("PUT", f"/{queue}")
    waiting = rpc.request("pull", queue, 10)
    rpc_mq.wait_for_events("fetch.wait", 1, queue=queue)
    rpc_mq.add(queue, b"late")
    error, got = rpc.answer(waiting)
    assert error is None and got["content"] == b"late"
    started = time.monotonic()
    assert rpc.call("pull", queue, 0.3) == "empty"
    assert 0.25 <= time.monotonic() - started < 6  # After the wait, with a loaded machine's room.


def test_push_all_and_pull_any_by_regexp(rpc, rpc_mq):
    prefix = next(names)
    for suffix in ("a", "b", "c"):
        rpc.call("update_props", f"{prefix}-{suffix}")
    assert rpc.call("push_all", f"{prefix}-[ab]", {"v": 1}) == "ok"
    got = [rpc.call("pull_any", f"{prefix}-.*") for _ in range(2)]
    assert sorted(g["queue"] for g in got) == [f"{prefix}-a", f"{prefix}-b"]
    assert all(g["content"] == {"v": 1} for g in got)
    assert rpc.call("pull_any", f"{prefix}-.*") == "empty"
    waiting = rpc.request("pull_any", f"{prefix}-.*", 10)
    rpc_mq.wait_for_events("fetch.watch", 1, queue=f"{prefix}-a")
    rpc.call("push", f"{prefix}-c", "wake")
    error, got = rpc.answer(waiting)
    assert error is None and (got["queue"], got["content"]) == (f"{prefix}-c", "wake")
    error, _ = rpc.answer(rpc.request("push_all", f"{prefix}-zzz", "x"))
    assert error["error"] == "not_found"


def test_properties_and_default_rules(rpc, rpc_mq):
    queue = next(names)
    assert rpc.call("update_props", queue, {"timeout": 5, "retry": 1}) == "ok"
    props = rpc_mq.request("GET", f"/{queue}/properties").json()
    assert props["own"] == {"timeout": 5.0, "retry": 1}
    assert rpc.call("update_props", queue) == "ok"
    assert rpc_mq.request("GET", f"/{queue}/properties").json()["own"] == {}
    rules = [[f"{queue}-.*", {"timeout": 60.0}]]
    assert rpc.call("set_default_props", rules) == "ok"
    assert rpc.call("get_default_props") == rules
    assert rpc.call("set_default_props", []) == "ok"
    error, _ = rpc.answer(rpc.request("update_props", queue, {"nonsense": 1}))
    assert error["error"] == "invalid"


def test_delete_removes_the_queue(rpc, rpc_mq):
    queue = next(names)
    rpc.call("push", queue, "x")
    assert rpc.call("delete", queue) == "ok"
    assert rpc_mq.request("GET", f"/{queue}").status == 404
    error, result = rpc.answer(rpc.request("pull", queue))
    assert error["error"] == "not_found" and result is None


def test_pipelined_requests_are_each_answered_by_msgid_even_out_of_order(rpc):
    waiting_on, pushed_to = next(names), next(names)
    rpc.call("update_props", waiting_on)
    # A long pull first, then 50 pushes in the same write: every push is answered while the
    # pull still waits, so the first request is answered last.
    frames = [[0, 1000, "pull", [waiting_on, 10]]]
    frames += [[0, 2000 + n, "push", [pushed_to, f"m{n}"]] for n in range(50)]
    rpc.send(*frames)
    answered = []
    while len(answered) < 50:
        kind, msgid, error, result = rpc.read()
        assert (kind, error, result) == (1, None, "ok")
        answered.append(msgid)
    assert sorted(answered) == [2000 + n for n in range(50)]
    assert rpc.call("push", waiting_on, "last") == "ok"
    error, result = rpc.answer(1000)
    assert error is None and result["content"] == "last"
    assert [rpc.call("pull", pushed_to)["content"] for _ in range(50)] == \
        [f"m{n}" for n in range(50)]


def test_a_notification_runs_and_gets_no_answer(rpc):
    queue = next(names)
    rpc.send([2, "push", [queue, "notified"]])
    got = poll_for(lambda: (r := rpc.call("pull", queue)) != "empty" and r, 10,
                   what="the notified push to arrive", ignore=(AssertionError,))
    assert got["content"] == "notified"
    # Only the pulls were answered: nothing else is waiting on the socket.
    rpc.sock.settimeout(0.2)
    with pytest.raises(socket.timeout):
        rpc.sock.recv(1)


def test_errors_are_values_and_the_connection_stays_open(rpc):
    for method, params, kind in [("nosuch", [], "invalid"), ("push", ["bad:name", "x"], "invalid"),
                                 ("push", ["q"], "invalid"), ("pull", ["q", 99], "invalid"),
                                 ("pull_any", ["(unclosed", 0], "invalid"),
                                 ("done", ["q", "not-an-id"], "invalid")]:
        error, result = rpc.answer(rpc.request(method, *params))
        assert error["error"] == kind and result is None, (method, error)
    # A push's content is checked where the save actor decodes it; its answer is the same.
    for options, says in [({"dedup_id": "k" * 257}, "dedup_id must be 1 to 256 characters"),
                          ({"content_type": "a\r\nb"}, "must not contain control characters"),
                          ({"content_type": 7}, "content_type must be a string")]:
        error, result = rpc.answer(rpc.request("push", "checked", "x", options))
        assert error["error"] == "invalid" and says in error["message"], (options, error)
    assert rpc.call("get_default_props") is not None


@pytest.mark.parametrize("frame, answered", [
    (msgpack.packb([0, 7, 12345, []]), 7),          # method is not a string
    (msgpack.packb([0, 8, "push"]), 8),             # a request of three elements
    (msgpack.packb({"not": "an array"}), None),
    (b"\xc1\x00\x01", None),                         # not msgpack at all
])
def test_a_malformed_frame_is_answered_if_it_can_be_and_closes_the_connection(rpc_mq, frame,
                                                                                 answered):
    client = RpcClient(rpc_mq.rpc_port)
    client.sock.sendall(frame)
    if answered is not None:
        kind, msgid, error, result = client.read()
        assert (kind, msgid, error["error"], result) == (1, answered, "invalid", None)
        assert "malformed request" in error["message"]
    assert client.read() is None  # closed by the server
    client.close()
    other = RpcClient(rpc_mq.rpc_port)
    assert other.call("get_default_props") is not None
    other.close()
    assert rpc_mq.children().get("front-0") is not None
    assert not rpc_mq.events("front.error") and not rpc_mq.events("rpc.error")


def test_a_pull_whose_client_hung_up_claims_nothing(rpc_mq):
    queue = next(names)
    rpc_mq.request("PUT", f"/{queue}")
    client = RpcClient(rpc_mq.rpc_port)
    client.request("pull", queue, 15)
    rpc_mq.wait_for_events("fetch.wait", 1, queue=queue)
    client.close()
    rpc_mq.wait_for_events("fetch.cancelled", 1, queue=queue)
    message_id = rpc_mq.add(queue, b"for a live consumer")
    got = rpc_mq.request("GET", f"/{queue}/messages")
    assert got.status == 200 and got.header("X-Message-Id") == message_id


def readme_example() -> str:
    """The Python block of README.md's MessagePack-RPC section."""
    section = README.read_text().split("## MessagePack-RPC", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)[0]


def test_the_readme_example_runs_as_written(rpc_mq, tmp_path):
    code = readme_example()
    assert "18800" in code
    script = tmp_path / "rpc_example.py"
    script.write_text(code.replace("18800", str(rpc_mq.rpc_port)))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=30, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr
    expected = re.findall(r"^# (.*)$", code.split("# prints:", 1)[1], re.M)
    assert result.stdout.splitlines() == expected
