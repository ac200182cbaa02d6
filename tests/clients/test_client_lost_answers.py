"""mq.client when the daemon acted but its answer was lost: a real daemon behind a real TCP
proxy on 127.0.0.1 that passes the first request on and swallows its answer, so that the
client times out and retries a request the daemon has already carried out."""

import asyncio
import socket
import threading

import pytest

from delivery_support import fresh_queue
from support import ready_daemon

from mq.client import AsyncClient, Client, NotFoundError

#: The client's timeout: the swallowed answer makes the first try wait this long.
TIMEOUT = 0.5


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon; a fetched message stays in flight long enough for any retry."""
    yield from ready_daemon(tmp_path_factory.mktemp("lost"), workers=1, timeout=60)


class LosingProxy:
    """Passes connections on to the daemon; the answers on the first `lose` connections are
    read and dropped. Later connections wait until a dropped answer has arrived, so that a
    retry reaches the daemon only after the first try was carried out."""

    def __init__(self, port: int, lose: int = 1):
        self.port, self.lose = port, lose
        self.answered = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        """Serve each connection in threads of its own until the listener closes."""
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            losing = self.connections <= self.lose
            if not losing:
                self.answered.wait(10)
            upstream = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self.pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(upstream, client, losing), daemon=True).start()

    def pump(self, source: socket.socket, sink: socket.socket, drop: bool) -> None:
        """Copy bytes from source to sink (or drop them, and say an answer came) until EOF."""
        try:
            while data := source.recv(65536):
                if drop:
                    self.answered.set()
                else:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting."""
        self.listener.close()


def call(kind: str, url: str, method: str, *args):
    """client.method(*args) with a Client or an AsyncClient of the daemon at url."""
    if kind == "sync":
        with Client(url, timeout=TIMEOUT, backoff=0.01) as client:
            return getattr(client, method)(*args)

    async def run():
        async with AsyncClient(url, timeout=TIMEOUT, backoff=0.01) as client:
            return await getattr(client, method)(*args)
    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("method", ["ack", "revoke"])
def test_a_removal_retried_after_a_lost_answer_is_done(daemon, kind, method):
    queue = fresh_queue("lost")
    url = f"http://127.0.0.1:{daemon.port}"
    message_id = call(kind, url, "put", queue, b"once")
    message = call(kind, url, "get", queue)
    args = (message,) if method == "ack" else (queue, message_id)
    proxy = LosingProxy(daemon.port)
    try:
        assert call(kind, proxy.url, method, *args) is None
    finally:
        proxy.close()
    assert proxy.answered.is_set() and proxy.connections == 2  # Carried out, then retried.
    assert call(kind, url, "stat", queue)["ready"] == 0
    assert call(kind, url, "purge", queue) == 0  # Removed, not merely in flight.
    # Without a lost answer, a removal of what is not there is still refused.
    with pytest.raises(NotFoundError):
        call(kind, url, method, *args)
