"""Moving a ready message into another queue (POST /{queue}/messages/{id}/move?to=, RPC `move`,
Client.move, LocalClient.move): it is ready there as new, with its id, and gone from its queue;
a message in flight, or one the queue does not hold, is not moved."""

import socket

import pytest

from access_support import RpcClient
from mq.client import Client, InvalidError, NotFoundError
from mq.local import LocalClient
from support import Daemon, free_port, poll_for


@pytest.fixture(scope="module")
def move_mq(tmp_path_factory):
    """One daemon with RPC for the module (each test uses its own queues)."""
    workdir = tmp_path_factory.mktemp("move")
    port = free_port()
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30, args=(f"--rpc-port={port}",))
    daemon.rpc_port = port
    try:
        daemon.start().wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        yield daemon
    finally:
        daemon.cleanup()


def add(mq, queue: str, body: bytes) -> str:
    """Add a message; its id."""
    resp = mq.request("POST", f"/{queue}/messages", body)
    assert resp.status == 201, resp.body
    return resp.json()["id"]


def fetched(mq, queue: str):
    """The id and body of a fetch (claimed), or None when the queue has nothing ready."""
    resp = mq.request("GET", f"/{queue}/messages")
    return None if resp.status == 204 else (resp.headers["X-Message-Id"], resp.body)


def test_a_ready_message_moves_over_rest_and_is_ready_there_as_new(move_mq):
    first, second = add(move_mq, "mv-a", b"one"), add(move_mq, "mv-a", b"two")
    resp = move_mq.request("POST", f"/mv-a/messages/{first}/move?to=mv-b")
    assert resp.status == 200 and resp.json() == {"id": first, "queue": "mv-b"}, resp.body
    assert fetched(move_mq, "mv-b") == (first, b"one")
    assert fetched(move_mq, "mv-a") == (second, b"two")  # The other one stays.
    assert fetched(move_mq, "mv-a") is None


def test_only_a_ready_message_of_the_queue_moves(move_mq):
    message_id = add(move_mq, "mv-c", b"held")
    assert fetched(move_mq, "mv-c") == (message_id, b"held")  # Now in flight: not ready.
    resp = move_mq.request("POST", f"/mv-c/messages/{message_id}/move?to=mv-d")
    assert resp.status == 404 and resp.json()["error"] == "not_found", resp.body
    other = add(move_mq, "mv-c2", b"elsewhere")
    assert move_mq.request("POST", f"/mv-c/messages/{other}/move?to=mv-d").status == 404


@pytest.mark.parametrize("query, says", [
    ("", "target is required"), ("?to=mv-e", "another queue"), ("?to=_mq", "name")])
def test_a_bad_move_is_400_and_moves_nothing(move_mq, query, says):
    message_id = add(move_mq, "mv-e", b"stays")
    resp = move_mq.request("POST", f"/mv-e/messages/{message_id}/move{query}")
    assert resp.status == 400 and says in resp.json()["message"], resp.body
    assert fetched(move_mq, "mv-e") == (message_id, b"stays")


def test_a_message_moves_over_rpc_and_the_python_client(move_mq):
    rpc = RpcClient(move_mq.rpc_port)
    try:
        message_id = add(move_mq, "mv-f", b"by rpc")
        assert rpc.answer("move", "mv-f", message_id, "mv-g") == (None, "ok")
        error, _ = rpc.answer("move", "mv-f", message_id, "mv-g")
        assert error["error"] == "not_found"
    finally:
        rpc.close()
    with Client(f"http://127.0.0.1:{move_mq.port}") as client:
        assert client.move("mv-g", message_id, "mv-h") == {"id": message_id, "queue": "mv-h"}
        with pytest.raises(InvalidError):
            client.move("mv-h", message_id, "mv-h")
        with pytest.raises(NotFoundError):
            client.move("mv-g", message_id, "mv-h")
        assert client.get("mv-h").body == b"by rpc"


def test_a_message_moves_in_mq_local_and_the_daemon_serves_it_there(move_mq):
    message_id = add(move_mq, "mv-i", b"local")
    with LocalClient(str(move_mq.root)) as local:
        assert local.move("mv-i", message_id, "mv-j") == {"id": message_id, "queue": "mv-j"}
        with pytest.raises(NotFoundError):
            local.move("mv-i", message_id, "mv-j")
        with pytest.raises(InvalidError):
            local.move("mv-j", message_id, "mv-j")
    # The daemon's fetch actors read the notice the move left and list the target again.
    got = poll_for(lambda: fetched(move_mq, "mv-j"), 10, what="the moved message")
    assert got == (message_id, b"local")
    assert fetched(move_mq, "mv-i") is None
