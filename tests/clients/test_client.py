"""mq.client against the real daemon: every method of Client and AsyncClient, the typed
errors, retries (against a real scripted HTTP server on 127.0.0.1 for the 503s), Producer, and
the README's "Python client" examples run as written."""

import asyncio
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from delivery_support import fresh_queue, shared_mq  # noqa: F401
from doc_blocks import printed
from support import free_port, poll_for
from repo_support import REPO

from mq.client import (AsyncClient, Client, ClientError, ConflictError, InvalidError, Message,
                       NotFoundError, Producer, ServerError, TooLargeError, UnavailableError)

README = REPO / "docs" / "CLIENTS.md"


class Blocking:
    """An AsyncClient driven from plain test code: each coroutine runs on a private loop, so
    that one test body checks both clients."""

    def __init__(self, client: AsyncClient):
        self.client = client
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name):
        """The client's coroutine method `name`, as a blocking function."""
        method = getattr(self.client, name)
        assert inspect.iscoroutinefunction(method), f"AsyncClient.{name} is not a coroutine"
        return lambda *args, **kwargs: self.loop.run_until_complete(method(*args, **kwargs))

    def settle(self, value):
        """A Producer's result: awaited when it is a coroutine (it must be, for this client)."""
        assert inspect.isawaitable(value), value
        return self.loop.run_until_complete(value)

    def __enter__(self):
        """The wrapper itself."""
        return self

    def __exit__(self, *exc_info):
        """Close the client, then the loop."""
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


class Sync(Client):
    """Client with the same settle() as Blocking, for Producer's results."""

    def settle(self, value):
        """A Producer's result as it is: a blocking client's methods return plain values."""
        assert not inspect.isawaitable(value), value
        return value


def make_client(kind: str, url: str, **settings):
    """A Client or a Blocking(AsyncClient) of the daemon at url."""
    return Sync(url, **settings) if kind == "sync" else Blocking(AsyncClient(url, **settings))


@pytest.fixture(params=["sync", "async"])
def kind(request):
    """Each test runs once with Client and once with AsyncClient."""
    return request.param


@pytest.fixture
def client(kind, shared_mq):  # noqa: F811
    """A client of the module's daemon (redelivery timer 1 s)."""
    with make_client(kind, f"http://127.0.0.1:{shared_mq.port}") as made:
        yield made


# -- every method -------------------------------------------------------------------------


def test_queues_are_created_inspected_configured_and_deleted(client):
    queue = fresh_queue("cq")
    assert client.queue_exists(queue) is False
    assert client.create_queue(queue) is True
    assert client.create_queue(queue) is False
    assert client.queue_exists(queue) is True
    stat = client.stat(queue)
    assert stat["queue"] == queue and stat["ready"] == 0
    assert stat["properties"]["timeout"] == 1.0
    effective = client.set_properties(queue, retry=5, timeout=3)
    assert effective["retry"] == 5 and effective["timeout"] == 3.0
    assert client.properties(queue) == effective
    client.put(queue, b"one")
    assert client.stat(queue)["ready"] == 1
    client.delete_queue(queue)
    assert client.queue_exists(queue) is False
    with pytest.raises(NotFoundError):
        client.stat(queue)


def test_redrive_moves_the_dead_letters_back_and_stats_count_them(client):
    queue = fresh_queue("rd")
    client.create_queue(queue)
    client.put(f"{queue}.dead", b"dead one")

    def counted():
        entry = client.stats()["queues"].get(queue)
        return entry is not None and entry["dead"] == 1
    poll_for(counted, what="the statistics to count the dead letter")
    assert client.redrive(queue) == {"queue": queue, "dead_letter_queue": f"{queue}.dead",
                                     "moved": 1}
    assert client.get(queue).body == b"dead one"


def test_put_get_ack_carry_body_content_type_receipt_and_attempts(client):
    queue = fresh_queue("cm")
    before = int(time.time() * 1000)
    binary = client.put(queue, b"\x00\xffbinary")
    text = client.put(queue, "h\u00e9llo")
    typed = client.put(queue, b'{"a": 1}', content_type="application/json")
    first = client.get(queue)
    assert first == Message(queue=queue, id=binary, body=b"\x00\xffbinary",
                            content_type="application/octet-stream", receipt=f"{binary}.1",
                            attempts=1, created_ms=first.created_ms)
    assert before - 5 <= first.created_ms <= time.time() * 1000 + 5
    second, third = client.get(queue), client.get(queue)
    assert (second.id, second.body, second.content_type) == (
        text, "h\u00e9llo".encode(), "text/plain; charset=utf-8")
    assert (third.id, third.content_type) == (typed, "application/json")
    assert client.get(queue) is None
    for message in (first, second, third):
        client.ack(message)
    # Acked means gone, not in flight: a revoke finds nothing.
    for message_id in (binary, text, typed):
        with pytest.raises(NotFoundError):
            client.revoke(queue, message_id)


def test_extend_keeps_a_message_hidden_and_nack_gives_it_back_at_once(client):
    queue = fresh_queue("cx")
    client.put(queue, b"work")
    message = client.get(queue)
    receipt = message.receipt
    due = client.extend(message, 5)
    assert time.time() + 3 < due < time.time() + 6
    assert message.receipt == receipt
    # Past the queue's 1 s timer, the extended message is still hidden.
    assert client.get(queue, wait=1.6) is None
    client.nack(message)
    again = client.get(queue)
    assert (again.id, again.attempts, again.receipt) == (message.id, 2, f"{message.id}.2")
    with pytest.raises(ConflictError) as stale:
        client.ack(message)
    assert stale.value.status == 409 and stale.value.kind == "conflict"
    assert f"stale receipt {receipt}" in stale.value.message
    assert client.extend(again) > time.time()  # The queue's timeout by default.
    client.ack(again)


def test_delay_at_and_dedup_id(client):
    queue = fresh_queue("cd")
    soon = time.time() + 0.6
    ids = [client.put(queue, b"delay", delay=0.6),
           client.put(queue, b"at datetime", at=datetime.fromtimestamp(soon, timezone.utc)),
           client.put(queue, b"at seconds", at=soon)]
    later = client.put(queue, b"later", delay=60)
    assert client.get(queue) is None
    got = [client.get(queue, wait=5) for _ in ids]
    assert all(m is not None for m in got), got
    assert sorted(m.id for m in got) == sorted(ids)
    assert time.time() >= soon - 0.05
    first = client.put(queue, b"charge", dedup_id="pay-42")
    assert client.put(queue, b"charge again", dedup_id="pay-42") == first
    assert [m.id for m in client.peek(queue)] == [first]
    client.revoke(queue, later)


def test_peek_revoke_and_purge(client):
    queue = fresh_queue("cp")
    ids = [client.put(queue, f"body {n}") for n in range(3)]
    peeked = client.peek(queue, max=2)
    assert [(m.id, m.body, m.receipt, m.attempts) for m in peeked] == [
        (ids[0], b"body 0", None, 0), (ids[1], b"body 1", None, 0)]
    assert peeked[0].content_type == "text/plain; charset=utf-8" and peeked[0].created_ms > 0
    assert [m.id for m in client.peek(queue, after=ids[0])] == ids[1:]
    client.revoke(queue, ids[1])
    assert [m.id for m in client.peek(queue)] == [ids[0], ids[2]]
    with pytest.raises(NotFoundError):
        client.revoke(queue, ids[1])
    client.put(queue, b"delayed", delay=60)
    assert client.get(queue).id == ids[0]  # In flight now.
    assert client.purge(queue) == 3
    assert client.peek(queue) == [] and client.stat(queue)["ready"] == 0
    assert client.queue_exists(queue)


# -- errors -------------------------------------------------------------------------------


def test_refusals_raise_typed_errors_with_kind_and_message(client):
    queue = fresh_queue("ce")
    with pytest.raises(NotFoundError) as missing:
        client.get(fresh_queue("never"))
    assert (missing.value.status, missing.value.kind) == (404, "not_found")
    assert "does not exist" in missing.value.message
    with pytest.raises(NotFoundError):
        client.revoke(queue, str(uuid.uuid4()))
    with pytest.raises(InvalidError) as bad_name:
        client.put("bad:name", b"x")
    assert (bad_name.value.status, bad_name.value.kind) == (400, "invalid")
    assert "invalid queue name 'bad:name'" in bad_name.value.message
    with pytest.raises(InvalidError, match="wait must be between"):
        client.get(queue, wait=30)
    with pytest.raises(InvalidError, match="unknown property 'retries'"):
        client.set_properties(queue, retries=1)
    with pytest.raises(InvalidError, match="either delay or at"):
        client.put(queue, b"x", delay=1, at=time.time() + 5)
    client.set_properties(queue, max_body_bytes=10)
    with pytest.raises(TooLargeError) as too_large:
        client.put(queue, b"x" * 11)
    assert (too_large.value.status, too_large.value.kind) == (413, "too_large")
    assert isinstance(too_large.value, ClientError)


def test_bad_arguments_fail_before_any_request(client):
    queue = fresh_queue("ca")
    with pytest.raises(TypeError, match="body must be bytes or str"):
        client.put(queue, 42)
    with pytest.raises(InvalidError, match="timezone-aware"):
        client.put(queue, b"x", at=datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="delay must be a number"):
        client.put(queue, b"x", delay="soon")
    with pytest.raises(InvalidError, match="must not be empty"):
        client.get("")
    # A reserved name is refused by the daemon's own rule, before any request: this client's
    # daemon is nowhere (a request would be UnavailableError), and '.' or '..' would otherwise
    # reach another route, '_mq' the fan-out endpoint.
    with Client(f"http://127.0.0.1:{free_port()}", retries=0) as nowhere:
        for name in (".", "..", "_mq", "_defaults", "a/b"):
            for call in (lambda: nowhere.put(name, b"x"), lambda: nowhere.get(name),
                         lambda: nowhere.add_many(name, [b"x"]), lambda: nowhere.stat(name)):
                with pytest.raises(InvalidError, match=f"invalid queue name {re.escape(repr(name))}"):
                    call()
    client.put(queue, b"x")
    with pytest.raises(InvalidError, match="has no receipt"):
        client.ack(client.peek(queue)[0])
    # What the daemon would refuse with 400 raises the same InvalidError, before any request.
    for call, match in [(lambda: client.fetch_many(queue, max=101), "from 1 to 100"),
                        (lambda: client.fetch_many(queue, max=0), "from 1 to 100"),
                        (lambda: client.add_many(queue, []), "1 to 1000 messages"),
                        (lambda: client.add_many(queue, [{"body": b"x", "dedup_id": "a\nb"}]),
                         "one line"),
                        (lambda: client.ack_many([]), "one queue")]:
        with pytest.raises(InvalidError, match=match) as refused:
            call()
        assert (refused.value.status, refused.value.kind) == (400, "invalid")
        assert isinstance(refused.value, ValueError)  # What it raised before: still caught.
    with pytest.raises(TypeError, match="max must be an int"):
        client.fetch_many(queue, max="10")
    with pytest.raises(TypeError, match="expected a Message"):
        client.nack("not a message")
    with pytest.raises(ValueError, match="url must start with http"):
        Client("127.0.0.1:8080")
    with pytest.raises(ValueError, match="retries must be"):
        AsyncClient(retries=-1)
    assert client.stat(queue)["ready"] == 1


# -- retries, against a scripted HTTP server ---------------------------------------------------


class ScriptedServer:
    """A real HTTP/1.1 server on 127.0.0.1 answering each request with the next scripted
    answer: (status, headers, body), or "drop" to close the connection without one."""

    def __init__(self, answers: list):
        self.answers = list(answers)
        self.seen: list[tuple[float, str, str]] = []  # (monotonic time, method, path)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                """Quiet: the test reads `seen`, not a log."""

            def answer(self):
                """Record the request and send the next scripted answer."""
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                server.seen.append((time.monotonic(), self.command, self.path))
                answer = server.answers.pop(0)
                if answer == "drop":
                    self.close_connection = True
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        """Start serving."""
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        """Stop serving and close the socket."""
        self.http.shutdown()
        self.http.server_close()


def unavailable(retry_after: str) -> tuple:
    """The daemon's 503 for an add while a save actor restarts."""
    body = b'{"error":"unavailable","message":"save actor 0 is not running; it is being restarted"}'
    return 503, {"Content-Type": "application/json", "Retry-After": retry_after}, body


def created(message_id: str) -> tuple:
    """The daemon's 201 for an add."""
    return 201, {"Content-Type": "application/json", "X-Message-Id": message_id}, \
        json.dumps({"id": message_id, "queue": "q"}).encode()


def test_a_503_is_retried_after_its_retry_after_and_then_succeeds(kind):
    message_id = str(uuid.uuid4())
    with ScriptedServer([unavailable("1"), unavailable("0"), created(message_id)]) as server, \
            make_client(kind, server.url, backoff=0.01) as client:
        assert client.put("q", b"x") == message_id
    times = [seen[0] for seen in server.seen]
    assert [seen[1:] for seen in server.seen] == [("POST", "/q/messages")] * 3
    assert times[1] - times[0] >= 0.95, "Retry-After: 1 was not honoured"
    assert times[2] - times[1] < 0.5, "Retry-After: 0 should leave only the short backoff"


def test_503s_beyond_the_retries_raise_unavailable_and_retry_after_is_capped(kind):
    with ScriptedServer([unavailable("3600")] * 3) as server, \
            make_client(kind, server.url, retries=2, backoff=0.01, max_backoff=0.1) as client:
        started = time.monotonic()
        with pytest.raises(UnavailableError) as gave_up:
            client.put("q", b"x")
    assert len(server.seen) == 3
    assert time.monotonic() - started < 2
    assert (gave_up.value.status, gave_up.value.kind) == (503, "unavailable")
    assert "being restarted" in gave_up.value.message


def test_a_dropped_connection_is_retried(kind):
    message_id = str(uuid.uuid4())
    with ScriptedServer(["drop", created(message_id)]) as server, \
            make_client(kind, server.url, backoff=0.01) as client:
        assert client.put("q", b"x") == message_id
    assert len(server.seen) == 2


def test_a_refused_connection_raises_unavailable_after_the_retries(kind):
    url = f"http://127.0.0.1:{free_port()}"
    with make_client(kind, url, retries=2, backoff=0.01) as client:
        with pytest.raises(UnavailableError) as refused:
            client.get("q")
    assert refused.value.kind == "unavailable" and url in refused.value.message
    assert isinstance(refused.value.__cause__, httpx.ConnectError)


@pytest.mark.parametrize("status, body, error, kind_, message", [
    (409, b'{"error":"conflict","message":"stale receipt"}', ConflictError, "conflict",
     "stale receipt"),
    (500, b'{"error":"storage","message":"EACCES"}', ServerError, "storage", "EACCES"),
    (502, b"bad gateway", ServerError, "internal", "bad gateway"),
])
def test_other_errors_are_raised_at_once(kind, status, body, error, kind_, message):
    with ScriptedServer([(status, {}, body)] * 2) as server, \
            make_client(kind, server.url, backoff=0.01) as client:
        with pytest.raises(error) as raised:
            client.put("q", b"x")
    assert len(server.seen) == 1
    assert (raised.value.status, raised.value.kind, raised.value.message) == (
        status, kind_, message)


# -- Producer ------------------------------------------------------------------------------


def test_producer_puts_now_after_a_delay_and_at_a_time_and_revokes(client):
    queue = fresh_queue("cprod")
    producer = Producer(client.client if isinstance(client, Blocking) else client, queue)
    now_id = client.settle(producer.put("now", content_type="text/x-now"))
    later = [client.settle(producer.delay(b"in a minute", 60)),
             client.settle(producer.at(b"tomorrow", datetime.now(timezone.utc) + timedelta(days=1))),
             client.settle(producer.at(b"in an hour", time.time() + 3600))]
    soon = client.settle(producer.delay(b"soon", 0.3))
    message = client.get(queue)
    assert (message.id, message.content_type) == (now_id, "text/x-now")
    client.ack(message)
    assert client.get(queue, wait=5).id == soon
    assert client.settle(producer.revoke(later)) is None
    assert client.settle(producer.revoke([])) is None
    for message_id in later:
        with pytest.raises(NotFoundError):
            client.revoke(queue, message_id)
    one = client.settle(producer.delay(b"one", 60))
    client.settle(producer.revoke(one))
    with pytest.raises(NotFoundError):
        client.revoke(queue, one)
    with pytest.raises(TypeError, match="ids must be"):
        producer.revoke([1, 2])


# -- the README's examples -------------------------------------------------------------------


def readme_examples() -> list[str]:
    """The Python code blocks of README.md's "Python client" section, in order."""
    text = README.read_text()
    section = re.search(r"^## Python client\n(.*?)^## ", text, re.S | re.M)
    assert section, "README.md has no '## Python client' section followed by another"
    blocks = re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    assert blocks, "the Python client section has no python code block"
    return blocks


@pytest.mark.slow
def test_the_readme_examples_run_as_written(shared_mq, tmp_path):  # noqa: F811
    env = {**os.environ, "MQ_URL": f"http://127.0.0.1:{shared_mq.port}", "PYTHONUNBUFFERED": "1"}
    files = []
    running: list[tuple[int, str, subprocess.Popen]] = []
    try:
        for n, code in enumerate(readme_examples()):
            script = tmp_path / f"example_{n}.py"
            script.write_text(code)
            out = tmp_path / f"example_{n}.out"
            files.append(out)
            with open(out, "wb") as sink:
                proc = subprocess.Popen([sys.executable, str(script)], stdout=sink,
                                        stderr=subprocess.STDOUT, env=env)
            running.append((n, code, proc))
            if ".consume(" in code:
                # A consumer runs until it is told to stop: once it has handled what the
                # examples before it produced, SIGTERM must end it cleanly. Its parked long
                # poll ends within its wait: the examples after it (other queues) run meanwhile.
                poll_for(lambda: b"handled" in out.read_bytes() or proc.poll() is not None, 15,
                         what=f"example {n} to handle a message")
                proc.send_signal(signal.SIGTERM)
            else:
                assert proc.wait(25) == 0, f"example {n} failed:\n{code}\n{out.read_text()}"
        for n, code, proc in running:
            assert proc.wait(25) == 0, f"example {n} failed:\n{code}\n{files[n].read_text()}"
    finally:
        for _, _, proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    outputs = [out.read_text() for out in files]
    # What the examples say they print (doc_blocks.printed: the comments of their print lines).
    for code, output in zip(readme_examples(), outputs):
        if printed(code) is not None:
            assert output.splitlines() == printed(code), (code, output)
    assert 'handled {"to": "ann@example.com"}' in "".join(outputs)
