"""MqHandler: a logging.Handler that ships an application's log records to an mq queue in
batches, from a background thread, without making the application wait on the daemon."""

import collections
import datetime
import json
import logging
import sys
import threading
import time
import warnings

from mq.client.api import DEFAULT_URL
from mq.client.errors import ClientError, ServerError, UnavailableError
from mq.client.sync import Client
from mq.operations import MAX_BATCH_MESSAGES

#: The content type of every shipped record.
JSON = "application/json"


def record_json(record: logging.LogRecord, text: str) -> str:
    """The body of one record: text itself when it is a JSON object (structlog's JSONRenderer),
    else an object of its timestamp, level, logger, message and exception text."""
    if text.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return text
        except ValueError:
            pass
    line = {"timestamp": datetime.datetime.fromtimestamp(record.created, datetime.UTC)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(), "logger": record.name, "message": text}
    if record.exc_info:
        line["exc_info"] = logging.Formatter().formatException(record.exc_info)
    elif record.exc_text:
        line["exc_info"] = record.exc_text
    return json.dumps(line, ensure_ascii=False, default=str)


class MqHandler(logging.Handler):
    """Ship log records to queue: every batch_size records or interval seconds, whichever
    comes first; at most capacity records wait, and a record that finds them all taken waits
    up to block seconds for room, then is dropped and counted in `dropped`."""

    def __init__(self, queue: str, url: str = DEFAULT_URL, *, batch_size: int = 100,
                 interval: float = 1.0, capacity: int = 10_000, block: float = 0.1,
                 close_timeout: float = 10.0, level: int = logging.NOTSET, **client_options):
        """client_options (token, ca, timeout, retries, backoff, max_backoff) go to the Client
        that sends the batches; its retries and back-off apply to each batch."""
        if not 1 <= batch_size <= MAX_BATCH_MESSAGES:
            raise ValueError(f"batch_size must be 1 to {MAX_BATCH_MESSAGES}, not {batch_size!r}")
        if capacity < batch_size:
            raise ValueError(f"capacity must be at least batch_size ({batch_size}), not {capacity!r}")
        for name, value in (("interval", interval), ("block", block),
                            ("close_timeout", close_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 \
                    or (name == "interval" and not value > 0):  # A sender that never waits spins.
                raise ValueError(f"{name} must be a number of seconds >= 0 (interval > 0), "
                                 f"not {value!r}")
        super().__init__(level)
        self.queue, self.batch_size, self.interval = queue, batch_size, float(interval)
        self.capacity, self.block, self.close_timeout = capacity, float(block), float(close_timeout)
        self.client = Client(url, **client_options)
        #: Records dropped: no room within `block`, refused by the daemon, or unsent at close.
        self.dropped = 0
        #: Batches the daemon stored.
        self.batches = 0
        self._pending: collections.deque[str] = collections.deque()
        self._sending = 0
        self._changed = threading.Condition(threading.RLock())
        self._flush_asked = False
        self._closing = False
        self._warned = False
        self._thread = threading.Thread(target=self._run, name=f"mq-log-{queue}", daemon=True)
        self._thread.start()

    def handle(self, record: logging.LogRecord):
        """Pass the record to emit, unless the sender itself logged it (httpx does, for each
        request): it would feed back into the queue, and wait on the lock a flush holds."""
        if threading.current_thread() is self._thread:
            return False
        return super().handle(record)

    def emit(self, record: logging.LogRecord) -> None:
        """Format the record and queue it for the next batch; never waits more than `block`."""
        try:
            text = self.format(record) if self.formatter else record.getMessage()
            body = record_json(record, text)
        except Exception:
            self.handleError(record)
            return
        with self._changed:
            if self._closing:
                return self._drop(1, "the handler is closed")
            deadline = time.monotonic() + self.block
            while len(self._pending) >= self.capacity:
                left = deadline - time.monotonic()
                if left <= 0:
                    return self._drop(1, f"{self.capacity} records wait to be sent")
                self._changed.wait(left)
            self._pending.append(body)
            if len(self._pending) >= self.batch_size:
                self._changed.notify_all()

    def flush(self) -> None:
        """Send every queued record now and wait up to close_timeout seconds for them."""
        self.drain()

    def drain(self, timeout: float | None = None) -> bool:
        """Send every queued record now and wait up to timeout (default close_timeout) seconds
        for the daemon to store them; True when none is left."""
        deadline = time.monotonic() + (self.close_timeout if timeout is None else timeout)
        with self._changed:
            self._flush_asked = True
            self._changed.notify_all()
            while self._pending or self._sending:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._changed.wait(left)
            return True

    def close(self) -> None:
        """Send what is queued (waiting up to close_timeout seconds in all), stop the thread,
        close the client; logging.shutdown calls this at interpreter exit."""
        if self._closing:
            return
        deadline = time.monotonic() + self.close_timeout
        self.flush()
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._changed:
            if self._pending:
                self._drop(len(self._pending), "the daemon did not take them before close")
                self._pending.clear()
        if not self._thread.is_alive():
            self.client.close()  # Else the sender still holds it, in a batch close gave up on.
        super().close()

    def _drop(self, count: int, why: str) -> None:
        """Count dropped records; warn once (on standard error) that records are being lost."""
        self.dropped += count
        if not self._warned:
            self._warned = True
            warnings.warn(f"MqHandler({self.queue!r}): dropped {count} log record(s): {why}; "
                          f"the handler's `dropped` counts every one", RuntimeWarning, stacklevel=3)

    def _run(self) -> None:
        """The sender: take a batch when one is full, the interval passes, or a flush asks;
        after a failed batch, pause (max_backoff) and try it again, until close."""
        while True:
            with self._changed:
                due = time.monotonic() + self.interval
                while not (self._closing or (self._pending and (
                        self._flush_asked or len(self._pending) >= self.batch_size))):
                    left = due - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                if self._closing and not self._pending:
                    return
                batch = [self._pending.popleft()
                         for _ in range(min(self.batch_size, len(self._pending)))]
                self._flush_asked = self._flush_asked and bool(self._pending)
                self._sending = len(batch)
            kept = self._send(batch) if batch else []
            with self._changed:
                self._pending.extendleft(reversed(kept))
                self._sending = 0
                self._changed.notify_all()
                if kept:
                    if self._closing:
                        return  # close() counts what is left.
                    resume = time.monotonic() + (self.client.policy.max_backoff or self.interval)
                    while not self._closing and time.monotonic() < resume:
                        self._changed.wait(resume - time.monotonic())

    def _send(self, batch: list[str]) -> list[str]:
        """Store the batch; what to keep for another try (all of it while the daemon is
        unreachable or failing). A batch the daemon refuses is sent record by record, so
        one bad record (too large) loses itself alone."""
        try:
            self.client.add_many(self.queue, [{"body": b, "content_type": JSON} for b in batch])
            self.batches += 1
            return []
        except (UnavailableError, ServerError):
            return batch
        except ClientError as err:
            if len(batch) == 1:
                with self._changed:
                    self._drop(1, f"the daemon refused it: {err}")
                return []
        except Exception as err:  # noqa: BLE001 - the sender must outlive any one batch.
            print(f"MqHandler({self.queue!r}): {type(err).__name__}: {err}", file=sys.stderr)
            return batch
        kept = []
        for body in batch:
            kept.extend(self._send([body]))
        return kept
