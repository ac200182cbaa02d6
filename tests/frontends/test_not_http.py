"""Bytes that are not HTTP on the HTTP port (another protocol's client pointed at mq by
mistake) are answered 400 and the connection closed at once, logged once with the peer,
instead of waiting out the idle timeout; slow but real HTTP clients are not mistaken for them."""

import socket
import time

import pytest

from support import poll_for, ready_daemon

#: A TLS 1.2 ClientHello's first bytes: a handshake record, then the hello.
TLS_HELLO = bytes.fromhex("160301005a010000560303") + bytes(32) + bytes.fromhex("000004c02f00ff0100")
NOT_HTTP = {"tls": TLS_HELLO, "redis": b"PING\r\n", "beanstalk": b"put 0 0 1 5\r\n"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with the default idle timeout (60 s)."""
    yield from ready_daemon(tmp_path_factory.mktemp("not-http"), workers=1, timeout=30)


def answer(daemon, data: bytes) -> tuple[bytes, float, int]:
    """(what the server sent until it closed, seconds that took, the local port) for one
    connection that sends data and then waits."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=3) as sock:
        started = time.monotonic()
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass  # Timed out: the check of the time below fails. Reset: closed, unread bytes left.
        return received, time.monotonic() - started, sock.getsockname()[1]


@pytest.mark.parametrize("kind", sorted(NOT_HTTP))
def test_another_protocol_gets_a_400_and_a_close_within_a_second_or_two(daemon, kind):
    received, took, port = answer(daemon, NOT_HTTP[kind])
    assert took < 2, f"{kind}: {took:.1f} s"
    assert received.startswith(b"HTTP/1.1 400 ") or received == b""
    events = poll_for(lambda: [e for e in daemon.events("front.not_http")
                               if e["peer"] == f"127.0.0.1:{port}"], 5, what="the log line")
    assert len(events) == 1
    assert events[0]["first_bytes"] == NOT_HTTP[kind][:16].hex()


def test_a_slow_http_client_is_not_taken_for_another_protocol(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        for part in (b"\r\nGE", b"T /health HT", b"TP/1.1\r\nHost: x", b"\r\n\r\n"):
            sock.sendall(part)
            time.sleep(0.3)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # And again on the same connection.
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
