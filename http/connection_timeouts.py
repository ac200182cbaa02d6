"""TimedHTTPServer: the idle and body timeouts of the front's connections, kept by one sweep.

Tornado's own (`idle_connection_timeout`, `body_timeout`) wrap every header read and every
body read in `gen.with_timeout`: two timers and two chained futures per request, measured at
about a tenth of the front's CPU per add (bench/RESULTS.md, "Throughput"). Here a request's
deadline is a number in a dict, set when the server starts waiting for a request and again
when its headers are in, dropped once its body is read; a periodic sweep closes the
connections past theirs. As with Tornado's, the time a handler takes to answer (a long poll)
is under no deadline.
"""

import math
import time

import tornado.httpserver
import tornado.httputil
import tornado.ioloop

from mq.http import not_http
from mq.http.tornado_io import keep_nodelay

#: Longest time, in seconds, between two sweeps: a connection is closed at most that late.
SWEEP_SECONDS = 1.0


class TimedHTTPServer(tornado.httpserver.HTTPServer):
    """An HTTPServer that closes a connection idle (or still sending its request line and
    headers) longer than idle_timeout, or still sending a body after body_timeout."""

    def initialize(self, *args, idle_timeout: float = 3600.0, body_timeout: float | None = None,
                   **kwargs) -> None:
        """Tornado's options, plus the two timeouts in seconds (by default Tornado's: an hour
        idle, and no deadline for a body)."""
        super().initialize(*args, **kwargs)
        # Tornado still wraps each header read in gen.with_timeout (3600 s when it is given no
        # idle timeout): the sweep below keeps that deadline, so the wrapper is pure cost.
        self.conn_params.header_timeout = None
        self.idle_timeout = idle_timeout
        self.body_timeout = math.inf if body_timeout is None else body_timeout
        self.deadlines: dict = {}  # HTTP1ServerConnection -> monotonic time it must be done by
        every = min(SWEEP_SECONDS, idle_timeout / 4, self.body_timeout / 4)
        self.sweeper = tornado.ioloop.PeriodicCallback(self.sweep, every * 1000)
        self.sweeper.start()

    def handle_stream(self, stream, address) -> None:
        """A new connection, with TCP_NODELAY on for good (tornado_io.keep_nodelay), whose
        first read tells another protocol at once (http/not_http.py)."""
        keep_nodelay(stream)
        not_http.guard(stream, address)
        super().handle_stream(stream, address)

    def start_request(self, server_conn, request_conn) -> tornado.httputil.HTTPMessageDelegate:
        """The connection waits for a request's line and headers from now on."""
        self.deadlines[server_conn] = time.monotonic() + self.idle_timeout
        return TimedRequest(super().start_request(server_conn, request_conn), self, server_conn)

    def on_close(self, server_conn) -> None:
        """A closed connection has no deadline."""
        self.deadlines.pop(server_conn, None)
        super().on_close(server_conn)

    def sweep(self) -> None:
        """Close every connection past its deadline."""
        now = time.monotonic()
        for conn in [conn for conn, deadline in self.deadlines.items() if deadline <= now]:
            del self.deadlines[conn]
            conn.stream.close()


class TimedRequest(tornado.httputil.HTTPMessageDelegate):
    """Passes one request to the application's delegate, moving its connection's deadline."""

    def __init__(self, delegate, server: TimedHTTPServer, conn):
        self.delegate, self.server, self.conn = delegate, server, conn

    def headers_received(self, start_line, headers):
        """Headers are in: the body is due within body_timeout."""
        self.server.deadlines[self.conn] = time.monotonic() + self.server.body_timeout
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk):
        """A part of the body."""
        return self.delegate.data_received(chunk)

    def finish(self) -> None:
        """The body is read: no deadline while the application answers."""
        self.server.deadlines.pop(self.conn, None)
        self.delegate.finish()

    def on_connection_close(self) -> None:
        """The connection closed mid-request."""
        self.server.deadlines.pop(self.conn, None)
        self.delegate.on_connection_close()
