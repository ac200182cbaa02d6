"""Consumer and AsyncConsumer against the real daemon: acks, nacks, timers left to run out,
extensions of slow handlers, concurrency, and a graceful stop on SIGTERM."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from delivery_support import fresh_queue, shared_mq  # noqa: F401
from support import poll_for

from mq.client import AsyncClient, AsyncConsumer, Client, Consumer, NotFoundError

#: The module's tests on one xdist worker: spread over the workers, each started its daemon.
pytestmark = pytest.mark.xdist_group("client-consumer")


class CountingClient(Client):
    """Client that counts the fetches begun, so that a test sees a worker inside one."""

    gets = 0

    def get(self, queue, *, wait=0.0):
        """Count, then fetch."""
        type(self).gets += 1
        return super().get(queue, wait=wait)


class CountingAsyncClient(AsyncClient):
    """AsyncClient that counts the fetches begun."""

    gets = 0

    async def get(self, queue, *, wait=0.0):
        """Count, then fetch."""
        type(self).gets += 1
        return await super().get(queue, wait=wait)


class Running:
    """A Consumer, or an AsyncConsumer on its own loop, consuming in a background thread.

    The handler is a plain function either way: the async variant runs it in a thread
    (asyncio.to_thread), so that both can block on test events."""

    def __init__(self, kind: str, url: str, queue: str, handler, **options):
        self.error: BaseException | None = None
        if kind == "sync":
            self.client = type("Counting", (CountingClient,), {})(url)
            self.consumer = Consumer(self.client, queue)
            run = lambda: self.consumer.consume(handler, **options)  # noqa: E731
        else:
            self.client = type("Counting", (CountingAsyncClient,), {})(url)
            self.consumer = AsyncConsumer(self.client, queue)

            async def handle(message):
                """The plain handler, in a thread."""
                await asyncio.to_thread(handler, message)

            run = lambda: asyncio.run(self.consumer.consume(handle, **options))  # noqa: E731
        self.thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self.thread.start()

    def _run(self, run) -> None:
        """Run consume(), keeping what it raised for stop()."""
        try:
            run()
        except BaseException as err:  # Reported by stop().
            self.error = err

    def stop(self, timeout: float = 15.0) -> None:
        """stop(), and wait for consume() to return; raise what it raised."""
        self.consumer.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "consume() did not return after stop()"
        if self.error is not None:
            raise self.error


@pytest.fixture(params=["sync", "async"])
def kind(request):
    """Each test runs with Consumer and with AsyncConsumer."""
    return request.param


@pytest.fixture
def url(shared_mq):  # noqa: F811
    """The module's daemon (redelivery timer 1 s)."""
    return f"http://127.0.0.1:{shared_mq.port}"


@pytest.fixture
def client(url):
    """A plain client of the same daemon, for the test's own looks."""
    with Client(url) as made:
        yield made


def assert_acked(client: Client, queue: str, message_id: str) -> None:
    """Acked means deleted: a revoke finds nothing (it would delete one still in flight)."""
    with pytest.raises(NotFoundError):
        client.revoke(queue, message_id)


def test_a_handler_that_returns_acks_its_message(kind, url, client):
    queue = fresh_queue("ok")
    ids = [client.put(queue, f"m{n}") for n in range(3)]
    seen = []
    running = Running(kind, url, queue, lambda m: seen.append((m.id, m.attempts, m.body)),
                      wait=0.5)
    poll_for(lambda: len(seen) == 3, what="three messages handled")
    running.stop()
    assert seen == [(i, 1, f"m{n}".encode()) for n, i in enumerate(ids)]
    for message_id in ids:
        assert_acked(client, queue, message_id)


def test_a_handler_that_raises_nacks_its_message_for_another_delivery(kind, url, client):
    queue = fresh_queue("fail")
    # A long timer: only a nack brings the message back within the poll's deadline.
    client.set_properties(queue, timeout=60)
    message_id = client.put(queue, b"flaky")
    attempts = []

    def handler(message):
        attempts.append(message.attempts)
        if message.attempts == 1:
            raise RuntimeError("first try fails")

    running = Running(kind, url, queue, handler, wait=0.5)
    poll_for(lambda: attempts == [1, 2], what="a second delivery after the failure")
    running.stop()
    assert_acked(client, queue, message_id)


def test_on_error_wait_leaves_a_failed_message_to_its_timer(kind, url, client):
    queue = fresh_queue("wait")
    message_id = client.put(queue, b"flaky")
    deliveries = []

    def handler(message):
        deliveries.append((message.attempts, time.monotonic()))
        if message.attempts == 1:
            raise RuntimeError("first try fails")

    running = Running(kind, url, queue, handler, on_error="wait", wait=0.5)
    poll_for(lambda: len(deliveries) == 2, what="a second delivery once the timer ran out")
    running.stop()
    (first, at_first), (second, at_second) = deliveries
    assert (first, second) == (1, 2)
    # A nack would bring it back at once; the queue's timer is 1 s.
    assert at_second - at_first >= 0.9
    assert_acked(client, queue, message_id)


def test_a_slow_handler_keeps_its_message_hidden_past_the_timer(kind, url, client):
    queue = fresh_queue("slow")
    assert client.properties(queue)["timeout"] == 1.0
    message_id = client.put(queue, b"slow work")
    calls, done = [], threading.Event()

    def handler(message):
        calls.append(message.attempts)
        time.sleep(2.5)  # The work itself: longer than two timers.
        done.set()

    running = Running(kind, url, queue, handler, wait=0.5)
    poll_for(lambda: calls, what="the handler to start")
    # Anyone else fetching meanwhile must get nothing: the timer was extended each half.
    while not done.is_set():
        taken = client.get(queue)
        assert taken is None, f"the message came back while its handler ran ({taken})"
        time.sleep(0.05)
    running.stop()
    assert calls == [1]
    assert_acked(client, queue, message_id)


def test_concurrency_n_runs_n_handlers_at_once_and_no_more(kind, url, client):
    queue = fresh_queue("conc")
    ids = [client.put(queue, f"m{n}") for n in range(5)]
    lock, release = threading.Lock(), threading.Event()
    state = {"running": 0, "peak": 0, "done": 0}

    def handler(message):
        with lock:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
        release.wait(10)
        with lock:
            state["running"] -= 1
            state["done"] += 1

    running = Running(kind, url, queue, handler, concurrency=3, wait=0.5)
    poll_for(lambda: state["running"] == 3, what="three handlers running at once")
    # Every worker is busy: the other two messages stay ready.
    assert client.stat(queue)["ready"] == 2
    release.set()
    poll_for(lambda: state["done"] == 5, what="all five handled")
    running.stop()
    assert state["peak"] == 3
    for message_id in ids:
        assert_acked(client, queue, message_id)


def test_a_message_a_long_poll_brings_after_stop_is_given_back_at_once(kind, url, client):
    queue = fresh_queue("late")
    client.set_properties(queue, timeout=60)  # Only a nack makes it ready again soon.
    client.put(queue, b"warm-up")
    handled = []
    running = Running(kind, url, queue, lambda m: handled.append(m.body), wait=5)
    poll_for(lambda: handled, what="the warm-up message handled")
    # The worker is inside its next fetch, a long poll on an empty queue.
    poll_for(lambda: running.client.gets >= 2, what="the worker's second fetch")
    running.consumer.stop()
    late = client.put(queue, b"came after stop")
    running.stop()
    assert handled == [b"warm-up"]
    assert [(m.id, m.attempts) for m in client.peek(queue)] == [(late, 1)]


CONSUMER_SCRIPT = """
import asyncio, os, pathlib, sys, time
from mq.client import AsyncClient, AsyncConsumer, Client, Consumer

marks, queue, kind = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]

def handle(message):
    (marks / "started").write_text(message.id)
    while not (marks / "go").exists():
        time.sleep(0.01)
    (marks / "finished").write_text(message.id)

async def handle_async(message):
    await asyncio.to_thread(handle, message)

async def main():
    async with AsyncClient(os.environ["MQ_URL"]) as client:
        await AsyncConsumer(client, queue).consume(handle_async, wait=1)

if kind == "sync":
    with Client(os.environ["MQ_URL"]) as client:
        Consumer(client, queue).consume(handle, wait=1)
else:
    asyncio.run(main())
(marks / "returned").write_text("yes")
"""


def test_sigterm_lets_the_in_flight_handler_finish_and_ack_before_exit(kind, url, client,
                                                                       tmp_path):
    queue = fresh_queue("term")
    first = client.put(queue, b"in flight")
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), queue, kind],
                            env={**os.environ, "MQ_URL": url}, stderr=subprocess.PIPE)
    try:
        # Its content, not the file alone: write_text creates the file before writing.
        poll_for(lambda: (tmp_path / "started").exists() and (tmp_path / "started").read_text()
                 or proc.poll() is not None, 15, what="the handler to start")
        assert (tmp_path / "started").read_text() == first
        second = client.put(queue, b"not taken after the signal")
        proc.send_signal(signal.SIGTERM)
        # The consumer waits for its handler: let the handler finish only now.
        (tmp_path / "go").write_text("")
        assert proc.wait(15) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "finished").read_text() == first
    assert (tmp_path / "returned").exists()
    assert_acked(client, queue, first)
    assert [m.id for m in client.peek(queue)] == [second]


def test_consume_in_the_main_thread_installs_stop_signals_and_restores_them(kind, url, client):
    queue = fresh_queue("sig")
    client.put(queue, b"one")
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    during = {}

    def look(consumer):
        during.update({sig: signal.getsignal(sig) for sig in before})
        consumer.stop()

    if kind == "sync":
        consumer = Consumer(client, queue)
        consumer.consume(lambda m: look(consumer), wait=0.5)
    else:
        async def main():
            async with AsyncClient(url) as aclient:
                consumer = AsyncConsumer(aclient, queue)

                async def handle(message):
                    look(consumer)

                await consumer.consume(handle, wait=0.5)
        asyncio.run(main())
    assert during and all(during[sig] != before[sig] for sig in before)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_bad_options_are_refused_before_any_message_is_taken(client):
    queue = fresh_queue("bad")
    client.put(queue, b"untouched")
    consumer = Consumer(client, queue)
    for options, error in [({"concurrency": 0}, "concurrency"), ({"on_error": "drop"}, "on_error"),
                           ({"wait": 21}, "wait")]:
        with pytest.raises(ValueError, match=error):
            consumer.consume(print, **options)
    with pytest.raises(TypeError, match="callable"):
        consumer.consume("print")
    with pytest.raises(TypeError, match="async function"):
        asyncio.run(AsyncConsumer(AsyncClient(), queue).consume(print))
    assert client.stat(queue)["ready"] == 1
