"""The front's Tornado I/O: readers removed lazily, TCP_NODELAY kept on, requests still served
in order when a client sends the next before the last was answered."""

import asyncio
import http.client
import socket

import pytest
import tornado.netutil
import tornado.web
from tornado.ioloop import IOLoop

from mq import event_loops
from mq.http.connection_timeouts import TimedHTTPServer
from mq.http.tornado_io import LazyReadersLoop, install

LOOPS = [event_loops.ASYNCIO] + ([event_loops.UVLOOP] if event_loops.uvloop_installed() else [])


def run(loop_name: str, main) -> object:
    """main() on a fresh loop of that kind, as the front runs."""
    with asyncio.Runner(loop_factory=event_loops.factory(loop_name)) as runner:
        return runner.run(main())


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    """Let the loop turn until predicate() holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_paused_reader_hears_nothing_and_is_removed_at_its_first_event(loop_name):
    async def main():
        loop = install()
        assert IOLoop.current() is loop and isinstance(loop, LazyReadersLoop)
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        events = []
        loop.add_handler(ours.fileno(), lambda fd, ev: events.append(ev), IOLoop.READ)
        loop.update_handler(ours.fileno(), IOLoop.ERROR)  # The stream stops reading.
        assert ours.fileno() in loop.readers, "removed at once, not lazily"
        loop.update_handler(ours.fileno(), IOLoop.ERROR | IOLoop.READ)  # ...and reads again:
        loop.update_handler(ours.fileno(), IOLoop.ERROR)  # no registration changed either time.
        theirs.send(b"x")
        await until(lambda: ours.fileno() not in loop.readers, "the paused reader removed")
        assert events == [], "a stream that did not want reads was told of one"
        loop.update_handler(ours.fileno(), IOLoop.ERROR | IOLoop.READ)
        await until(lambda: events, "the read event")
        assert events[0] == IOLoop.READ
        loop.remove_handler(ours.fileno())
        assert ours.fileno() not in loop.readers and ours.fileno() not in loop.paused
        ours.close()
        theirs.close()

    run(loop_name, main)


class NoDelayHandler(tornado.web.RequestHandler):
    """Answers whether its connection's socket has TCP_NODELAY on."""

    def get(self):
        sock = self.request.connection.stream.socket
        self.write(str(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0))


@pytest.mark.timeout(30)
def test_a_front_connection_keeps_tcp_nodelay_on_between_requests():
    # Tornado turns it off after each response; the front's server leaves it on.
    async def main():
        install()
        server = TimedHTTPServer(tornado.web.Application([(r"/", NoDelayHandler)]))
        [listener] = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets([listener])
        port = listener.getsockname()[1]

        def two_requests():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            answers = []
            for _ in range(2):
                conn.request("GET", "/")
                answers.append(conn.getresponse().read())
            conn.close()
            return answers

        try:
            return await asyncio.get_running_loop().run_in_executor(None, two_requests)
        finally:
            server.stop()

    assert run(event_loops.ASYNCIO, main) == [b"True", b"True"]


class KeepOpen:
    """A file whose close() leaves it open (http.client closes a response's file when read)."""

    def __init__(self, file):
        self.file = file

    def __getattr__(self, name):
        return getattr(self.file, name)

    def close(self):
        """Leave it open for the next response."""


@pytest.mark.timeout(60)
def test_requests_sent_before_the_last_is_answered_are_all_answered_in_order(mq):
    # The second and third requests reach the front while it has paused the connection's
    # reader: the first read event after that removes it, and the stream reads them later.
    requests = b"".join(b"POST /piped/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Type: text/plain\r\nContent-Length: 1\r\n\r\n%d" % i
                        for i in range(3))
    with socket.create_connection(("127.0.0.1", mq.port), timeout=15) as sock:
        sock.sendall(requests)
        answers = []
        reader = KeepOpen(sock.makefile("rb"))
        for _ in range(3):
            resp = http.client.HTTPResponse(sock)
            resp.fp = reader  # One reader for the three: each response starts where the last ended.
            resp.begin()
            answers.append((resp.status, resp.read()))
    assert [status for status, _ in answers] == [201, 201, 201]
    bodies = [mq.fetch("piped").body for _ in range(3)]
    assert bodies == [b"0", b"1", b"2"]
