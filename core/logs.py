"""structlog JSON lines, written whole by every process of the tree and reopened on SIGHUP."""

import functools
import logging
import os
import select
import signal
import sys
import time

import orjson

# structlog imports rich, where it is installed, for a console renderer and tracebacks mq never
# uses (it writes JSON lines): a fifth of a CPU second in every daemon's start. Hidden while
# structlog imports, so it takes rich for absent; anything imported later sees rich as it is.
if "rich" in sys.modules:
    import structlog
else:
    sys.modules["rich"] = None  # type: ignore[assignment]  # Import fails: "not installed".
    try:
        import structlog
    finally:
        del sys.modules["rich"]
from structlog.typing import EventDict, WrappedLogger  # noqa: E402

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


class LineSink:
    """Writes each log line with one write(2) on an O_APPEND descriptor, so lines never mix."""

    def __init__(self, path: str = ""):
        self.path = path
        self.fd = self._open()
        self.loop = None  # Set by batch_in: lines then wait for the end of the loop's turn.
        self.pending: list[bytes] = []

    def _open(self) -> int:
        if not self.path:
            return sys.stdout.fileno()
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def reopen(self) -> None:
        """Open the log file anew (after logrotate moved it away)."""
        if not self.path:
            return
        old, self.fd = self.fd, self._open()
        os.close(old)

    def batch_in(self, loop) -> None:
        """From now on, write the lines of one turn of this asyncio loop together.

        The front logs a line per request; one write per turn instead of per line spares the
        system calls, and the file system work each append to a log file costs.
        """
        self.loop = loop

    def write(self, line: str) -> None:
        """Write one whole line (with batch_in: at the end of this turn of the loop)."""
        self.write_bytes((line + "\n").encode())

    def write_bytes(self, data: bytes) -> None:
        """Write one whole line, its newline included, as bytes."""
        if self.loop is not None and self.loop.is_running():
            if not self.pending:
                self.loop.call_soon(self.flush)
            self.pending.append(data)
            return
        self.flush()  # The loop stopped with lines waiting: keep them in order.
        self._write(data)

    def flush(self) -> None:
        """Write the lines waiting for the end of the loop's turn: whole lines, PIPE_BUF at most
        per write(2), which even a pipe (standard output under journald) keeps whole."""
        pending, self.pending = self.pending, []
        chunk: list[bytes] = []
        size = 0
        for data in pending:
            if chunk and size + len(data) > select.PIPE_BUF:
                self._write(b"".join(chunk))
                chunk, size = [], 0
            chunk.append(data)
            size += len(data)
        if chunk:
            self._write(b"".join(chunk))

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass  # A log that cannot be written must never take a request down with it.


class LineLogger:
    """The structlog logger that hands rendered lines to a LineSink."""

    def __init__(self, sink: LineSink):
        self.sink = sink

    def msg(self, message: str) -> None:
        """Write one rendered event."""
        self.sink.write(message)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


_sink: LineSink | None = None
_process = ""  # The process name configure() was given.
_info_on = False  # Whether info lines are written (the level configure() was given).
_pid = 0  # This process's pid, read by configure() (os.getpid is a system call per line).


@functools.lru_cache(maxsize=1)
def _date_and_time(second: int) -> str:
    """The ISO date and time of day (UTC) of a whole second: formatted once a second, as
    the access log stamps a line per request."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def utc_timestamp(now: float) -> str:
    """ISO 8601 time in UTC with microseconds, as datetime's isoformat() with "Z"."""
    whole = int(now)
    micros = round((now - whole) * 1_000_000)  # Rounded half to even, as datetime does.
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    text = _date_and_time(whole)
    return f"{text}.{micros:06d}Z" if micros else f"{text}Z"


def _stamp(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    """Add what every line carries after its own fields: time (ISO, UTC), process name, pid."""
    event["timestamp"] = utc_timestamp(time.time())
    event["process"], event["pid"] = _process, _pid
    return event


def _dumps(event: dict, default=None, **_) -> str:
    """JSON text of one event; values orjson cannot encode go through structlog's fallback."""
    return orjson.dumps(event, default=default).decode()


def configure(process: str, level: str = "info", log_file: str = "") -> LineSink:
    """Set up structlog for this process: JSON lines with timestamp, level and process name."""
    global _sink, _process, _info_on, _pid
    _sink = LineSink(log_file)
    _process, _info_on, _pid = process, LEVELS[level] <= logging.INFO, os.getpid()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _stamp,
            structlog.processors.format_exc_info,
            # orjson: the access log writes a line per request, and this halves its cost.
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=lambda *_: LineLogger(_sink),
        cache_logger_on_first_use=True,
    )
    # Always: the supervisor forwards SIGHUP to every child, and without a handler SIGHUP
    # would kill them all (reopen is a no-op when logging to standard output).
    signal.signal(signal.SIGHUP, lambda *_: _sink.reopen())
    return _sink


def forget_inherited() -> None:
    """In a forked child: close the parent's log file, before configure() opens this one's."""
    global _sink
    if _sink is not None and _sink.path:
        try:
            os.close(_sink.fd)
        except OSError:
            pass
    _sink = None


def batch_lines(loop) -> None:
    """Write this process's log lines once per turn of an asyncio loop (see LineSink.batch_in)."""
    if _sink is not None:
        _sink.batch_in(loop)


def flush() -> None:
    """Write the lines still waiting for the end of a loop turn."""
    if _sink is not None:
        _sink.flush()


def info_line(event: str, fields: dict) -> None:
    """Write the line `get().info(event, **fields)` would, without structlog's processors (the
    access log writes one per request, and they are a tenth of its cost); fields is used up."""
    if _sink is None or not _info_on:
        return
    fields["event"], fields["level"] = event, "info"
    _sink.write_bytes(orjson.dumps(_stamp(None, "info", fields), default=str) + b"\n")


def get(name: str = "mq"):
    """A bound structlog logger."""
    return structlog.get_logger(name)
