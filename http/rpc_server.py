"""The MessagePack-RPC server on --rpc-port: framing and transport (the methods are in
http/rpc_methods.py).

A connection carries a stream of msgpack values. A request `[0, msgid, method, params]` is
answered `[1, msgid, error, result]` as soon as it is done, so pipelined requests may be
answered out of order; a notification `[2, method, params]` is run and never answered. A value
that is neither is a malformed frame: it is answered with an error when its msgid can be read,
and the connection is closed either way, since the stream can no longer be trusted. Nothing a
client sends can stop the front: every failure ends as an error value or a closed connection.
"""

import asyncio

import msgpack

from mq import logs
from mq.config import Options
from mq.errors import Invalid, MqError
from mq.http.disk_errors import disk_error
from mq.http.rpc_methods import Caller, call_method, traceparent_of
from mq.http.service import QueueService
from mq.tokens import TokenFile

REQUEST, RESPONSE, NOTIFICATION = 0, 1, 2
#: Requests of one connection being served at once; reading pauses while it has this many.
MAX_IN_FLIGHT = 256
#: Bytes read from the socket at a time.
READ_SIZE = 256 * 1024


def error_value(error: MqError) -> dict:
    """An error as the `error` of a response: the HTTP API's JSON error, as a map."""
    value: dict[str, str | int] = {"error": error.kind, "message": error.message}
    if error.retry_after is not None:
        value["retry_after"] = error.retry_after
    return value


def parse_frame(frame) -> tuple[int, int | None, str, list]:
    """(type, msgid or None, method, params) of a request or notification; ValueError naming
    what is wrong with anything else."""
    if not isinstance(frame, list) or not frame:
        raise ValueError("a frame must be an array")
    if frame[0] == REQUEST and len(frame) == 4:
        _, msgid, method, params = frame
        if isinstance(msgid, bool) or not isinstance(msgid, int) or not 0 <= msgid < 1 << 32:
            raise ValueError("msgid must be an unsigned 32-bit integer")
    elif frame[0] == NOTIFICATION and len(frame) == 3:
        msgid, (_, method, params) = None, frame
    else:
        raise ValueError("expected [0, msgid, method, params] or [2, method, params]")
    if not isinstance(method, str) or not isinstance(params, list):
        raise ValueError("method must be a string and params an array")
    return frame[0], msgid, method, params


def known_msgid(frame) -> int | None:
    """The msgid of a malformed request, when it has a usable one, to address the error to."""
    if isinstance(frame, list) and len(frame) >= 2 and frame[0] == REQUEST:
        msgid = frame[1]
        if isinstance(msgid, int) and not isinstance(msgid, bool) and 0 <= msgid < 1 << 32:
            return msgid
    return None


class Connection:
    """One client: reads frames, runs each request as its own task, writes the responses."""

    def __init__(self, server: "RpcServer", reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.tasks: set[asyncio.Task] = set()
        self.caller = Caller(server.service, server.options, server.tokens)
        self.log = logs.get().bind(peer=str(writer.get_extra_info("peername")))

    async def run(self) -> None:
        """Serve until the client closes, sends a malformed frame, or the server stops."""
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=self.server.max_frame)
        try:
            while True:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                try:
                    unpacker.feed(data)
                    frames = list(unpacker)
                except Exception as err:  # Not msgpack, or a value over the size limit.
                    self.log.warning("rpc.bad_frame", error=str(err) or type(err).__name__)
                    break
                if not self.start_all(frames):
                    break
                while len(self.tasks) >= MAX_IN_FLIGHT:
                    await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            await self.close()

    def start_all(self, frames: list) -> bool:
        """Start a task per frame; on a malformed one answer it if possible and return False."""
        for frame in frames:
            try:
                kind, msgid, method, params = parse_frame(frame)
            except ValueError as err:
                self.log.warning("rpc.bad_frame", error=str(err))
                msgid = known_msgid(frame)
                if msgid is not None:
                    self.respond(msgid, Invalid(f"malformed request: {err}"), None)
                return False
            task = asyncio.ensure_future(self.serve(kind, msgid, method, params))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return True

    async def serve(self, kind: int, msgid: int | None, method: str, params: list) -> None:
        """Run one method; answer a request with its result or its error."""
        self.server.in_flight += 1
        try:
            try:
                result, error = await call_method(self.caller, method, params), None
            except MqError as err:
                result, error = None, err
            except OSError as err:  # A read of the root (the queue list of pull_any) that failed.
                result, error = None, disk_error(err, f"cannot {method}", self.server.options.root)
            except Exception:
                self.log.exception("rpc.error", method=method)
                result, error = None, MqError("internal error")
            self.server.log_call(method, error, traceparent_of(method, params, result),
                                 self.caller.token_name)
            if kind == REQUEST:
                assert msgid is not None, "parse_frame gives every request a msgid"
                self.respond(msgid, error, result)
                try:
                    # Waits while the client reads slower than it asks: its requests in
                    # flight then stay at MAX_IN_FLIGHT and reading pauses.
                    await self.writer.drain()
                except ConnectionError:
                    pass
        finally:
            self.server.in_flight -= 1

    def respond(self, msgid: int, error: MqError | None, result) -> None:
        """Write one response, unless the client is gone."""
        if self.writer.is_closing():
            return
        value = error_value(error) if error is not None else None
        self.writer.write(msgpack.packb([RESPONSE, msgid, value, result], use_bin_type=True))

    async def close(self) -> None:
        """Withdraw the long polls still waiting for this client, then close the socket."""
        self.caller.hang_up()
        if self.tasks:
            await asyncio.wait(self.tasks)
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class RpcServer:
    """The listening socket and its connections."""

    def __init__(self, service: QueueService, options: Options, tokens: TokenFile | None = None) -> None:
        self.service = service
        self.options = options
        self.tokens = tokens  # The front's TokenFile; None: access control is off.
        # A frame holds at most one body, plus a little for the method and params.
        self.max_frame = options.max_body_bytes + 64 * 1024
        self.connections: set[Connection] = set()
        self.in_flight = 0
        self.server: asyncio.Server | None = None
        self.access_log = options.access_log

    async def start(self) -> None:
        """Listen on --host and --rpc-port (with SO_REUSEPORT when several fronts share it, as
        for --port; TLS with --tls-cert, the handshake bounded by --idle-timeout)."""
        tls = self.options.server_tls()
        self.server = await asyncio.start_server(
            self.accept, self.options.host, self.options.rpc_port,
            reuse_port=self.options.fronts > 1, ssl=tls,
            ssl_handshake_timeout=self.options.idle_timeout if tls else None)
        logs.get().info("rpc.start", host=self.options.host, port=self.options.rpc_port,
                        tls=tls is not None)

    async def accept(self, reader, writer) -> None:
        """Serve one connection."""
        connection = Connection(self, reader, writer)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)

    def log_call(self, method: str, error: MqError | None, traceparent: str | None = None,
                 token: str | None = None) -> None:
        """The access log's line for one call (with the trace context it carried, if any, and
        the name of the connection's token)."""
        if self.access_log:
            fields = {"traceparent": traceparent} if traceparent else {}
            if token is not None:
                fields["token"] = token
            logs.get("mq.access").info("rpc.call", method=method,
                                       error=error.kind if error is not None else None, **fields)

    def stop_accepting(self) -> None:
        """Stop taking new connections (the ones open are served on)."""
        if self.server is not None:
            self.server.close()

    async def close(self) -> None:
        """Close every connection; their waiting long polls are withdrawn."""
        self.stop_accepting()
        for connection in list(self.connections):
            connection.writer.close()
            connection.caller.hang_up()
