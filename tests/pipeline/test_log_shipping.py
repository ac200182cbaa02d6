"""A real log shipper into mq: syslog-ng, with the configuration docs/OPERATIONS.md shows,
follows a file of JSON log lines and adds them in batches to a queue of a live daemon; every
line arrives as written, and mq-pipeline logstats reads the queue back into the right figures."""

import glob
import json
import os
import shutil
import signal
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from doc_blocks import blocks
from repo_support import REPO
from support import command, poll_for, read_json_lines

from mq.client import Client, NotFoundError
from mq.pipeline import cli

pytestmark = pytest.mark.spark
SYSLOG_NG = shutil.which("syslog-ng", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
HTTP_MODULE = glob.glob("/usr/lib/syslog-ng/*/libhttp.so") + glob.glob("/usr/lib/*/syslog-ng/libhttp.so")
needs_syslog_ng = pytest.mark.skipif(
    not (SYSLOG_NG and HTTP_MODULE),
    reason="syslog-ng and its HTTP destination are not installed "
           "(apt-get install syslog-ng-core syslog-ng-mod-http)")


def shipper_config() -> str:
    """The syslog-ng configuration of docs/OPERATIONS.md, "Shipping the logs", as written."""
    found = [b.text for b in blocks(REPO / "docs" / "OPERATIONS.md")
             if b.lang == "text" and "destination d_mq" in b.text]
    assert len(found) == 1, "docs/OPERATIONS.md shows one syslog-ng configuration"
    return found[0]


def request_lines(start: int, count: int) -> list[str]:
    """mq access-log lines (the fields logstats reads, and one it does not), over two minutes
    and two queues, with every kind of request and text that needs escaping."""
    kinds = [("POST", "/{q}/messages", 201), ("GET", "/{q}/messages", 200),
             ("DELETE", "/{q}/messages/01a2-{n}", 204), ("GET", "/{q}/messages", 204),
             ("POST", "/{q}/messages", 503), ("GET", "/{q}/messages/x", 404)]
    base = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)
    lines = []
    for n in range(start, start + count):
        method, path, status = kinds[n % len(kinds)]
        queue = "orders" if n % 3 else "mail"
        when = base + timedelta(seconds=n * 0.7)
        lines.append(json.dumps({
            "method": method, "path": path.format(q=queue, n=n), "status": status,
            "ms": round(1 + n % 17 * 0.37, 2), "queue": queue, "event": "http.request",
            "level": "info", "agent": 'shop "v2" – ü', "process": "front-0",
            "timestamp": when.isoformat(timespec="microseconds").replace("+00:00", "Z")},
            ensure_ascii=False, separators=(",", ":")))
    return lines


def expected_figures(lines: list[str]) -> dict:
    """(queue, minute) -> the counts logstats should find in these lines."""
    figures: dict = {}
    for line in map(json.loads, lines):
        # Spark hands a timestamp back as a naive local time.
        minute = datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
        minute = minute.replace(second=0, microsecond=0)
        key = (line["queue"], minute.astimezone().replace(tzinfo=None))
        f = figures.setdefault(key, dict.fromkeys(("requests", "adds", "fetches", "acks", "errors",
                                                   "client_errors"), 0))
        f["requests"] += 1
        f["adds"] += line["method"] == "POST" and line["path"].endswith("/messages")
        f["fetches"] += line["method"] == "GET" and line["path"].endswith("/messages")
        f["acks"] += line["method"] == "DELETE"
        f["errors"] += line["status"] >= 500
        f["client_errors"] += 400 <= line["status"] < 500
    return figures


def stored_bodies(port: int, queue: str) -> list[str]:
    """Every ready message of queue, oldest first, without consuming any."""
    out, after = [], None
    with Client(f"http://127.0.0.1:{port}") as client:
        while page := client.peek(queue, 100, after):
            out += [m.body.decode() for m in page]
            after = page[-1].id
    return out


@needs_syslog_ng
def test_syslog_ng_ships_json_lines_in_batches_and_logstats_reads_them_back(spark, capsys, start_mq,
                                                                           tmp_path):
    daemon = start_mq(workers=1, log_file=tmp_path / "mq.log")
    queue = "app-logs"
    app_log = tmp_path / "app.json"
    written = request_lines(0, 180)
    app_log.write_text("\n".join(written[:120]) + "\n")
    conf = tmp_path / "mq-ship.conf"
    conf.write_text(shipper_config())
    env = {**os.environ, "MQ_LOG_FILE": str(app_log), "MQ_URL": f"http://127.0.0.1:{daemon.port}",
           "MQ_QUEUE": queue}
    with open(tmp_path / "syslog-ng.out", "wb") as out:
        shipper = subprocess.Popen(
            [SYSLOG_NG, "-F", "-f", str(conf), "--no-caps", "--persist-file", str(tmp_path / "ship.persist"),
             "--pidfile", str(tmp_path / "ship.pid"), "--control", str(tmp_path / "ship.ctl")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        # The queue is made by the first batch syslog-ng sends: until then it is not there.
        # Each look pages through the queue over a new client: every 0.1 s, as syslog-ng sends
        # a batch every 0.5 s at most (batch-timeout), is often enough.
        poll_for(lambda: len(stored_bodies(daemon.port, queue)) == 120 or shipper.poll() is not None,
                 interval=0.1, what="the file's first lines in the queue", ignore=(NotFoundError,))
        assert shipper.poll() is None, (tmp_path / "syslog-ng.out").read_text()
        # Lines appended while it runs are followed too.
        with open(app_log, "a") as f:
            f.write("\n".join(written[120:]) + "\n")
        poll_for(lambda: len(stored_bodies(daemon.port, queue)) >= 180, interval=0.1,
                 what="every line in the queue")
    finally:
        shipper.send_signal(signal.SIGTERM)
        shipper.wait(30)

    assert stored_bodies(daemon.port, queue) == written
    adds = [line for line in read_json_lines(daemon.log_path)
            if line.get("event") == "http.request" and line.get("path") == f"/{queue}/messages"]
    assert {a["method"] for a in adds} == {"POST"} and {a["status"] for a in adds} == {201}
    assert sum(a["count"] for a in adds) == 180
    assert 2 <= len(adds) < 180 and max(a["count"] for a in adds) <= 100  # batch-lines(100)

    output = str(tmp_path / "stats")
    args = cli.build_parser().parse_args(["logstats", "--root", str(daemon.root), "--queue", queue,
                                          "--output", output])
    result = cli.run(args, spark)
    assert result["read"] == 180 and f"queue {queue}" in capsys.readouterr().out
    found = {(r["queue"], r["minute"]):
             {k: r[k] for k in ("requests", "adds", "fetches", "acks", "errors", "client_errors")}
             for r in spark.read.parquet(output).collect()}
    assert found == expected_figures(written)


def test_logstats_of_a_queue_without_its_root_exits_2():
    done = subprocess.run([command("mq-pipeline"), "logstats", "--queue", "app-logs", "--output", "/tmp/x"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--root" in done.stderr
