"""The front's limits against a real daemon: URL length (414), header size, body size (the
option and a queue's property, 413), and the idle and body timeouts that close the connection
of a client too slow to send its request."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import Daemon

IDLE_S, BODY_S = 1.0, 1.0
MAX_URL, MAX_HEADER, MAX_BODY = 300, 2048, 1000


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with small limits and one-second timeouts."""
    workdir = tmp_path_factory.mktemp("limits")
    mq = Daemon(workdir / "root", workdir, workers=2, timeout=30, args=(
        f"--idle-timeout={IDLE_S}", f"--body-timeout={BODY_S}", f"--max-url-bytes={MAX_URL}",
        f"--max-header-bytes={MAX_HEADER}", f"--max-body-bytes={MAX_BODY}"))
    try:
        yield mq.start().wait_ready()
    finally:
        mq.cleanup()


def raw(daemon) -> socket.socket:
    """A plain TCP connection to the daemon, reads timing out after 10 s."""
    sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_url_over_the_limit_is_a_json_414(daemon):
    resp = daemon.request("GET", "/q/peek?after=" + "a" * MAX_URL)
    assert resp.status == 414
    assert resp.json()["error"] == "too_long"
    assert daemon.request("GET", "/q/peek?max=" + "0" * (MAX_URL - 20) + "1").status in (200, 404)


def test_headers_over_the_limit_close_the_connection_without_a_reply(daemon):
    with raw(daemon) as sock:
        sock.sendall(b"GET /q HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MAX_HEADER + b"\r\n\r\n")
        assert read_until_closed(sock) == b""
    assert daemon.request("GET", "/q", headers={"X-Big": "a" * (MAX_HEADER // 2)}).status == 404


def test_slow_and_idle_clients_are_cut_off_after_their_timeouts(daemon):
    """Three connections at once (so the test waits one timeout, not three): one stalls in its
    headers, one stays idle after a request, one stalls in its body; meanwhile a long poll
    longer than the idle timeout is answered, not cut off."""
    daemon.request("PUT", "/polled")
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(daemon.request, "GET", "/polled/messages?wait=1.5")
        cut_off(daemon)
        assert poll.result().status == 204


def cut_off(daemon) -> None:
    """The three slow connections of the test above, checked."""
    stalled, idle, slow_body = raw(daemon), raw(daemon), raw(daemon)
    started = time.monotonic()
    stalled.sendall(b"GET /q HTTP/1.1\r\nHost: x\r\n")  # ... and never the blank line.
    idle.sendall(b"GET /q HTTP/1.1\r\nHost: x\r\n\r\n")
    slow_body.sendall(b"POST /slow/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
                      + b"x" * 10)
    replies = []
    for sock in (stalled, idle, slow_body):
        with sock:
            replies.append(read_until_closed(sock))
            assert min(IDLE_S, BODY_S) * 0.9 <= time.monotonic() - started
    assert time.monotonic() - started < max(IDLE_S, BODY_S) + 5
    assert replies[0] == b"" and replies[2] == b""
    assert replies[1].startswith(b"HTTP/1.1 404")
    assert daemon.request("GET", "/slow").status == 404  # The slow add did not even create it.


def test_a_body_over_the_option_or_the_queue_property_is_a_json_413(daemon):
    resp = daemon.request("POST", "/big/messages", b"x" * (MAX_BODY + 1))
    assert resp.status == 413 and resp.json()["error"] == "too_large"
    resp = daemon.request("PUT", "/big/properties", b'{"max_body_bytes": 10}')
    assert resp.status == 200 and resp.json()["properties"]["max_body_bytes"] == 10
    resp = daemon.request("POST", "/big/messages", b"x" * 11)
    assert resp.status == 413 and resp.json()["error"] == "too_large"
    assert "limit of 10 bytes" in resp.json()["message"]
    assert daemon.request("POST", "/big/messages", b"x" * 10).status == 201
    # A property above the daemon's option does not raise it.
    daemon.request("PUT", "/big/properties", b'{"max_body_bytes": 100000}')
    assert daemon.request("POST", "/big/messages", b"x" * (MAX_BODY + 1)).status == 413
