"""mq.client.logging_handler.MqHandler against the real daemon: records travel in batches
(counted in the daemon's access log), as JSON; structlog's lines arrive as rendered; a stopped
daemon costs the application at most `block` per record; a clean exit sends what is queued."""

import json
import logging
import subprocess
import sys
import time
import warnings

import pytest
import structlog

from delivery_support import fresh_queue, shared_mq  # noqa: F401
from support import poll_for, read_json_lines

from mq.client import Client
from mq.client.logging_handler import MqHandler


def batch_adds(daemon, queue: str) -> int:
    """How many requests added to queue: POST /{queue}/messages lines of the access log."""
    return sum(1 for line in read_json_lines(daemon.log_path)
               if line.get("event") == "http.request" and line.get("method") == "POST"
               and line.get("path") == f"/{queue}/messages")


def shipped(daemon, queue: str) -> list:
    """Every message of queue, oldest first, as (content type, body text); consumed."""
    out = []
    with Client(f"http://127.0.0.1:{daemon.port}") as client:
        while batch := client.fetch_many(queue, 100):
            out += [(m.content_type, m.body.decode()) for m in batch]
            client.ack_many(batch)
    return out


def logger_to(handler: MqHandler) -> logging.Logger:
    """A logger of its own that writes to handler alone."""
    log = logging.getLogger(f"app.{handler.queue}")
    log.propagate, log.level = False, logging.DEBUG
    log.addHandler(handler)
    return log


def test_records_travel_in_batches_as_json_objects(shared_mq):
    queue = fresh_queue("logs")
    handler = MqHandler(queue, f"http://127.0.0.1:{shared_mq.port}", batch_size=10, interval=60)
    log = logger_to(handler)
    try:
        for n in range(24):
            log.info("request %d done", n)
        try:
            raise KeyError("gone")
        except KeyError:
            log.exception("failed at %s", "the end")
        # Two full batches leave at once; the other five wait for the interval or a flush.
        poll_for(lambda: handler.batches == 2, what="two full batches stored")
        poll_for(lambda: batch_adds(shared_mq, queue) == 2, what="two adds in the access log")
        assert handler.drain(10)
    finally:
        log.removeHandler(handler)
        handler.close()
    poll_for(lambda: batch_adds(shared_mq, queue) == 3, what="the third add in the access log")
    assert handler.dropped == 0
    lines = shipped(shared_mq, queue)
    assert {ct for ct, _ in lines} == {"application/json"}
    records = [json.loads(body) for _, body in lines]
    assert [r["message"] for r in records] == [f"request {n} done" for n in range(24)] + ["failed at the end"]
    assert {r["level"] for r in records[:24]} == {"info"} and records[24]["level"] == "error"
    assert {r["logger"] for r in records} == {f"app.{queue}"}
    assert "exc_info" not in records[0]
    assert records[24]["exc_info"].startswith("Traceback") and "KeyError: 'gone'" in records[24]["exc_info"]
    assert records[0]["timestamp"].endswith("Z") and records[0]["timestamp"] <= records[24]["timestamp"]


def test_structlog_json_lines_arrive_as_rendered(shared_mq):
    queue = fresh_queue("logs")
    handler = MqHandler(queue, f"http://127.0.0.1:{shared_mq.port}", batch_size=50, interval=0.2)
    rendered = []
    log = structlog.wrap_logger(
        logger_to(handler), wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.JSONRenderer(),
                    lambda _, __, line: rendered.append(line) or line])
    try:
        log.info("order.placed", queue="orders", id="0abc", total=12.5, note='quote " and ü')
        log.warning("order.late", minutes=3)
        poll_for(lambda: handler.batches >= 1 and not handler._pending, what="the batch stored")
    finally:
        handler.close()
    assert len(rendered) == 2
    assert [body for _, body in shipped(shared_mq, queue)] == rendered


def test_a_stopped_daemon_costs_the_app_at_most_block_per_record(start_mq):
    daemon = start_mq(workers=1)
    queue = fresh_queue("logs")
    handler = MqHandler(queue, f"http://127.0.0.1:{daemon.port}", batch_size=5, capacity=10,
                        interval=0.05, block=0.1, close_timeout=1.0, retries=1, backoff=0.01,
                        max_backoff=0.05, timeout=2)
    log = logger_to(handler)
    log.info("before the stop")
    poll_for(lambda: handler.batches == 1, what="the first record stored")
    daemon.stop()
    longest = 0.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(40):
            started = time.monotonic()
            log.info("while stopped %d", n)
            longest = max(longest, time.monotonic() - started)
    # 10 wait in the buffer and up to 5 in the batch being tried: the rest cannot wait.
    assert 40 - 15 <= handler.dropped <= 40 - 10
    assert longest < 0.1 + 0.4, longest  # block, and room for a loaded machine
    lost = [w for w in caught if issubclass(w.category, RuntimeWarning) and "MqHandler" in str(w.message)]
    assert len(lost) == 1 and "dropped" in str(lost[0].message)
    started = time.monotonic()
    handler.close()
    assert time.monotonic() - started < 1.0 + 0.5
    # What close could not send counts as dropped too: every record is stored or counted.
    assert handler.dropped + handler._sending == 40
    assert handler.batches == 1


SCRIPT = """
import logging, sys, time
from mq.client.logging_handler import MqHandler

handler = MqHandler(sys.argv[2], sys.argv[1], batch_size=1000, interval=600,
                     close_timeout=5)
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.INFO)
for n in range(300):
    logging.getLogger("worker").info("job %d finished", n)
print(len(handler._pending), time.time(), flush=True)
"""


def test_a_clean_exit_sends_every_queued_record(shared_mq):
    queue = fresh_queue("logs")
    done = subprocess.run([sys.executable, "-c", SCRIPT, f"http://127.0.0.1:{shared_mq.port}", queue],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Still all queued when the program ended: logging.shutdown's close sent them, in one batch.
    ended = time.time()
    pending, main_ended = done.stdout.split()
    assert pending == "300" and not done.stderr
    # httpx logs each request to the root logger, so to the handler: the sender must not wait
    # on the handler's lock, which logging.shutdown holds while it flushes.
    assert ended - float(main_ended) < 5
    poll_for(lambda: batch_adds(shared_mq, queue) == 1, what="one add in the access log")
    messages = [json.loads(body)["message"] for _, body in shipped(shared_mq, queue)]
    assert messages == [f"job {n} finished" for n in range(300)]


def test_bad_settings_are_refused():
    for kwargs in ({"batch_size": 0}, {"batch_size": 1001}, {"capacity": 5, "batch_size": 10},
                   {"block": -1}, {"interval": "1"}, {"interval": 0}):
        with pytest.raises(ValueError):
            MqHandler("q", "http://127.0.0.1:9", **kwargs)
