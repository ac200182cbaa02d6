"""Hostile input against a real daemon: random requests (hypothesis) and broken HTTP framing.

Whatever arrives, the daemon answers no 5xx but a 503 with Retry-After, no process of the
tree dies, nothing is written outside the root, and every message acknowledged before it is
still there, byte for byte.
"""

import errno
import os
import socket

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import Daemon, checked_body

METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "BREW", "get"]
#: Path pieces a hostile client tries: traversal, encodings, reserved names, odd characters.
SEGMENTS = ["..", ".", "%2e%2e", "..%2f..%2fetc", "%2F", "_mq", "_defaults", "messages",
            "properties", "peek", "purge", "redrive", "health", "q", "kept", "a" * 300,
            "%00", "%ff%fe", "caf%C3%A9", "\u00e9", "%", "%%", "01a20764-a8fd-7000-81e9-a2cb9f77c540",
            "01a20764-a8fd-7000-81e9-a2cb9f77c540.1", "?", "#", ";", "*"]
QUERY_KEYS = ["delay", "at", "wait", "dedup_id", "reply", "receipt", "seconds", "max", "after", "x"]
HEADER_NAMES = ["Content-Type", "X-Delay", "X-At", "X-Wait", "X-Dedup-Id", "X-Receipt",
                "Transfer-Encoding", "Expect", "Accept-Encoding", "X-Junk"]
TEXT = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=40)
KEPT = 20
#: Where the acknowledged messages wait: a name no drawn path has, since a drawn DELETE or
#: purge of a queue it names ("kept") is the daemon doing as told, not a loss.
KEPT_QUEUE = "hoard"


class Hostile(tuple):
    """(daemon, workdir, names outside the root, kept bodies), shown short in failures."""

    def __repr__(self) -> str:
        return "Hostile(...)"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A daemon with acknowledged messages in queue 'kept', the folder around its root, and
    those messages' bodies."""
    workdir = tmp_path_factory.mktemp("hostile")
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=60).start()
    try:
        daemon.wait_ready()
        kept = {daemon.add(KEPT_QUEUE, body): body for body in (checked_body(n, 100) for n in range(KEPT))}
        outside = sorted(name for name in os.listdir(workdir) if name != "root")
        yield Hostile((daemon, workdir, outside, kept))
    finally:
        daemon.cleanup()


def raw_request(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send bytes as they are on a new connection; what came back before it closed or went quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # The front refused what it had read so far and closed: read its answer.
        except OSError as err:
            if err.errno != errno.ENOTCONN:
                raise
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def assert_no_failure(reply: bytes) -> None:
    """No 5xx, except 503 with Retry-After."""
    if not reply:
        return  # Closed without a reply: allowed for input that is not HTTP.
    status_line, _, rest = reply.partition(b"\r\n")
    parts = status_line.split()
    assert len(parts) >= 2 and parts[0].startswith(b"HTTP/1."), reply[:200]
    status = int(parts[1])
    if status >= 500:
        assert status == 503 and b"\r\nretry-after:" in b"\r\n" + rest.lower(), reply[:300]


@st.composite
def requests(draw) -> bytes:
    """A request line, headers and body, each drawn from what a hostile client sends."""
    method = draw(st.sampled_from(METHODS))
    path = "/" + "/".join(draw(st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=4)))
    query = draw(st.lists(st.tuples(st.sampled_from(QUERY_KEYS), TEXT), max_size=3))
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query)
    headers = draw(st.lists(st.tuples(st.sampled_from(HEADER_NAMES), TEXT), max_size=4))
    body = draw(st.binary(max_size=2000))
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers
                    if name.lower() != "transfer-encoding")
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=requests())
# Found by this test: a handler attribute named `options` shadowed the OPTIONS method (500).
@example(data=b"OPTIONS /q HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
def test_random_requests_get_no_5xx_but_503(hostile, data):
    daemon = hostile[0]
    assert_no_failure(raw_request(daemon.port, data))


#: Framing a parser must survive: wrong lengths, truncated and bad chunked bodies, bad bytes.
BROKEN = [
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nshort",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nlonger than two",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    b"POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    b"GET /\xff\xfe/messages HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /q/messages HTTP/1.1\r\nHost: x\r\nX-Wait: \xff\xff\r\n\r\n",
    b"GET /q/messages HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"a" * 100_000 + b"\r\n\r\n",
    b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello
    b"GET / HTTP/9.9\r\n\r\n",
    b"\r\n\r\n\r\n",
    b"POST /../../etc/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
    b"POST /%2e%2e%2f%2e%2e%2fetc/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
]


@pytest.mark.parametrize("data", BROKEN, ids=range(len(BROKEN)))
def test_broken_framing_gets_no_5xx_but_503(hostile, data):
    daemon = hostile[0]
    assert_no_failure(raw_request(daemon.port, data, timeout=3.0))


#: Numbers no actor frame can carry (a 64-bit integer at most), or no float can hold.
HUGE_NUMBERS = ["1" + "0" * 25, "9" * 5000, "1e400", "18446744073709551616"]
#: Every numeric parameter of the message routes, as query or header ({} is the number).
NUMERIC_PARAMETERS = [
    ("GET", "/numbers/messages?max={}", {}),
    ("GET", "/numbers/messages?max=1&wait={}", {}),
    ("GET", "/numbers/messages?wait={}", {}),
    ("GET", "/numbers/messages", {"X-Wait": "{}"}),
    ("GET", "/numbers/peek?max={}", {}),
    ("GET", "/_mq/messages?qre=numbers&wait={}", {}),
    ("POST", "/numbers/messages?delay={}", {}),
    ("POST", "/numbers/messages", {"X-Delay": "{}"}),
    ("POST", "/numbers/messages?at={}", {}),
    ("POST", "/numbers/messages/{id}?reply=ext&seconds={}&receipt={receipt}", {}),
]


@pytest.mark.parametrize("number", HUGE_NUMBERS, ids=lambda number: number[:24])
@pytest.mark.parametrize("method, path, headers", NUMERIC_PARAMETERS,
                         ids=[f"{m} {p} {' '.join(h)}".strip() for m, p, h in NUMERIC_PARAMETERS])
def test_a_number_too_big_for_any_parameter_is_a_json_400(hostile, method, path, headers, number):
    daemon = hostile[0]
    delivery = {}
    if "{id}" in path:  # A message in flight, so that only the number can be wrong.
        daemon.add("numbers-ext", b"x")
        fetched = daemon.fetch("numbers-ext")
        delivery = {"id": fetched.header("X-Message-Id"), "receipt": fetched.header("X-Receipt")}
        path = path.replace("/numbers/", "/numbers-ext/")
    headers = {name: value.format(number) for name, value in headers.items()}
    body = b"x" if method == "POST" else None
    resp = daemon.request(method, path.format(number, **delivery), body, headers)
    assert resp.status == 400, (resp.status, resp.body)
    assert resp.json()["error"] == "invalid" and len(resp.body) < 400, resp.body


def test_after_the_hostile_input_nothing_died_nothing_leaked_and_nothing_was_lost(hostile):
    # Runs after the tests above in this module (pytest keeps file order).
    daemon, workdir, outside, kept = hostile
    health = daemon.health()
    assert all(c["alive"] and c["restarts"] == 0 for c in health["children"]), health
    assert sorted(name for name in os.listdir(workdir) if name != "root") == outside
    assert not os.path.exists("/etc/messages") and not os.path.exists(workdir / "etc")
    seen = {}
    while (resp := daemon.fetch(KEPT_QUEUE)).status == 200:
        seen[resp.header("X-Message-Id")] = resp.body
    assert seen == kept
