"""An op that declares its REST route and RPC method (`rest=`, `rpc=`, mq.operations.wire) and
names its command function (`@serves`) is served over REST, MessagePack-RPC and the Python
client with no other code: a throw-away op, declared in a module of its own that every process
of a real daemon imports first (sitecustomize.py), is routed, checked and answered as its
declaration says."""

import importlib.util
import socket
import sys
from dataclasses import dataclass

import pytest
from access_support import RpcClient
from support import Daemon, free_port, poll_for

from mq.actors.commands import SERVED
from mq.client import Client, InvalidError
from mq.operations import OPS, Purge
from mq.operations.fields import OnQueue, Queue, operation
from mq.operations.wire import Rest, Rpc

#: The whole of the throw-away op: its declaration and its command function.
PROBE = '''
from dataclasses import dataclass
from typing import TypedDict

from mq.actors.commands import serves
from mq.operations.fields import READ, OnQueue, Queue, operation
from mq.operations.wire import Rest, Rpc


class Counted(TypedDict):
    queue: str
    ready: int
    label: str


@operation("count_ready", scope=READ,
           rest=Rest("GET", "/{queue}/count", query={"label": "label"}),
           rpc=Rpc("count_ready", ("queue", "label"), required=1, reply=True))
@dataclass(slots=True, frozen=True, kw_only=True)
class CountReady(OnQueue[Counted]):
    """How many messages of the queue are ready, answered with a label."""

    queue: Queue
    label: str = ""


@serves(CountReady)
def count_ready(actor, batch, request, sender) -> Counted:
    """The queue's ready count, from its index."""
    return {"queue": request.queue, "ready": len(actor.indexes.of(request.queue)),
            "label": request.label}


@operation("echo_note", scope=READ, rest=Rest("PUT", "/{queue}/note", body="note", status=201))
@dataclass(slots=True, frozen=True, kw_only=True)
class EchoNote(OnQueue):
    """The note the request's body holds, answered back."""

    queue: Queue
    note: dict


@serves(EchoNote)
def echo_note(actor, batch, request, sender) -> dict:
    """The note, as it came."""
    return {"queue": request.queue, "note": request.note}
'''


@pytest.fixture(scope="module")
def probe_mq(tmp_path_factory):
    """A daemon (with RPC) whose every process declares the throw-away op before it starts."""
    workdir = tmp_path_factory.mktemp("declared")
    site = workdir / "site"
    site.mkdir()
    (site / "count_probe.py").write_text(PROBE)
    (site / "sitecustomize.py").write_text("import count_probe  # noqa: F401\n")
    port = free_port()
    daemon = Daemon(workdir / "root", workdir, workers=1, args=(f"--rpc-port={port}",),
                    env={"PYTHONPATH": str(site)})
    daemon.rpc_port = port
    try:
        daemon.start().wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        for body in (b"one", b"two"):
            assert daemon.request("POST", "/dw-q/messages", body).status == 201
        yield daemon
    finally:
        daemon.cleanup()


@pytest.fixture
def probe_op(probe_mq):
    """The throw-away op declared in this process too (for the client), undeclared after."""
    spec = importlib.util.spec_from_loader("count_probe", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["count_probe"] = module
    try:
        exec(compile(PROBE, "count_probe.py", "exec"), module.__dict__)
        yield module
    finally:
        for name in ("count_ready", "echo_note"):
            SERVED.pop(OPS.pop(name, None), None)
        sys.modules.pop("count_probe", None)


def test_the_declared_route_runs_the_op_and_answers_its_reply(probe_mq):
    resp = probe_mq.request("GET", "/dw-q/count?label=here")
    assert resp.status == 200, resp.body
    assert resp.json() == {"queue": "dw-q", "ready": 2, "label": "here"}
    assert resp.headers["Content-Type"] == "application/json"
    assert probe_mq.request("GET", "/dw-q/count").json()["label"] == ""


def test_the_declared_route_refuses_what_the_declaration_does_not_take(probe_mq):
    resp = probe_mq.request("GET", "/dw-q/count?lable=x")  # Not a declared query parameter.
    assert resp.status == 400 and "'lable'" in resp.json()["message"], resp.body
    resp = probe_mq.request("GET", "/_mq/count")  # The op's own check of its queue field.
    assert resp.status == 400 and resp.json()["error"] == "invalid", resp.body
    resp = probe_mq.request("POST", "/dw-q/count")  # No op declares this method here.
    assert resp.status == 405, resp.body


def test_a_declared_body_fills_its_field_and_the_declared_status_answers(probe_mq):
    resp = probe_mq.request("PUT", "/dw-q/note", b'{"a": [1, 2]}')
    assert resp.status == 201 and resp.json() == {"queue": "dw-q", "note": {"a": [1, 2]}}
    resp = probe_mq.request("PUT", "/dw-q/note", b"[1]")  # The op's check: a map.
    assert resp.status == 400 and "note" in resp.json()["message"], resp.body
    resp = probe_mq.request("PUT", "/dw-q/note", b"{")
    assert resp.status == 400 and "JSON" in resp.json()["message"], resp.body


def test_the_declared_rpc_method_runs_the_op(probe_mq):
    rpc = RpcClient(probe_mq.rpc_port)
    try:
        assert rpc.answer("count_ready", "dw-q") == (
            None, {"queue": "dw-q", "ready": 2, "label": ""})
        assert rpc.answer("count_ready", "dw-q", "x")[1]["label"] == "x"
        error, _ = rpc.answer("count_ready")
        assert error["error"] == "invalid" and "count_ready(name, label)" in error["message"]
        error, _ = rpc.answer("count_ready", "dw-q", 7)  # The op's check of its label.
        assert error["error"] == "invalid" and "label" in error["message"], error
    finally:
        rpc.close()


def test_the_client_runs_the_declared_op(probe_mq, probe_op):
    with Client(f"http://127.0.0.1:{probe_mq.port}") as client:
        assert client.run(probe_op.CountReady, queue="dw-q", label="c") == {
            "queue": "dw-q", "ready": 2, "label": "c"}
        assert client.run(probe_op.EchoNote, queue="dw-q", note={"b": "é"}) == {
            "queue": "dw-q", "note": {"b": "é"}}
        with pytest.raises(InvalidError):
            client.run(probe_op.CountReady, queue="bad name")


def test_the_client_refuses_a_field_the_declared_route_does_not_carry(probe_mq):
    # Purge has `keys`, but its route takes no query parameter: sent without it, the purge
    # would keep the queue's de-duplication keys, and the next add with one would be dropped
    # as a duplicate.
    assert probe_mq.request("PUT", "/dw-purge").status == 201
    with Client(f"http://127.0.0.1:{probe_mq.port}") as client:
        with pytest.raises(InvalidError, match="keys"):
            client.run(Purge, queue="dw-purge", keys=True)
        with pytest.raises(InvalidError, match="lable"):
            client.run(Purge, queue="dw-purge", lable="x")
        assert client.run(Purge, queue="dw-purge", keys=False) == {"queue": "dw-purge", "purged": 0}


def test_a_declaration_that_names_no_field_of_the_op_is_refused():
    with pytest.raises(TypeError, match="'to'"):
        @operation("misdeclared", rest=Rest("POST", "/{queue}/x", query={"to": "to"}))
        @dataclass(slots=True, frozen=True, kw_only=True)
        class Misdeclared(OnQueue):
            queue: Queue
    with pytest.raises(TypeError, match="'target'"):
        @operation("misdeclared", rpc=Rpc("misdeclared", ("queue", "target")))
        @dataclass(slots=True, frozen=True, kw_only=True)
        class Misdeclared2(OnQueue):
            queue: Queue
    assert "misdeclared" not in OPS
