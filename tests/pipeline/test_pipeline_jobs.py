"""mq-pipeline's jobs (export, load, logstats) on small real data sets, through the command line."""

import json
import os
import subprocess
import time

import pytest

from mq import store as fmt
from mq.ids import new_id
from mq.pipeline import cli
from support import command
from test_pipeline_batch import add_directly, bodies_of

pytestmark = pytest.mark.spark
DAY_MS = 86_400_000


def run(spark, capsys, *argv) -> tuple[dict, str]:
    """Run one mq-pipeline command line on the shared session; return its result and output."""
    out = cli.run(cli.build_parser().parse_args(list(argv)), spark)
    return out, capsys.readouterr().out


def add_created(store: fmt.Store, queue: str, body: bytes, created_ms: int) -> str:
    """A ready message with a given creation time."""
    message_id = new_id(created_ms)
    store.write_new(queue, message_id, fmt.encode_message(body, "text/plain", created_ms, message_id), None)
    store.states.deliver_new(queue, message_id, False)
    return message_id


def test_export_snapshot_partitions_by_queue_and_date_and_consumes_nothing(spark, capsys, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    now_ms = int(time.time() * 1000)
    for i in range(6):
        add_created(store, "ex1", b"old %d" % i, now_ms - 2 * DAY_MS)
        add_directly(store, "ex1", b"new %d" % i)
        add_directly(store, "ex2", b"two %d" % i)
    add_directly(store, "other", b"not exported")
    output = str(tmp_path / "export")

    result, printed = run(spark, capsys, "export", "--root", store.root, "--queues", "ex.",
                          "--output", output)

    assert result["read"] == result["written"] == 18
    assert "read 18 messages" in printed and "nothing consumed" in printed and "wrote 18 rows" in printed
    days = {time.strftime("%Y-%m-%d", time.gmtime(t / 1000)) for t in (now_ms, now_ms - 2 * DAY_MS)}
    assert sorted(os.listdir(os.path.join(output, "queue=ex1"))) == sorted(f"date={d}" for d in days)
    assert os.listdir(os.path.join(output, "queue=ex2")) and not os.path.exists(os.path.join(output, "queue=other"))
    table = spark.read.parquet(output)
    assert table.count() == 18 and {"body", "id", "state", "created", "queue", "date"} <= set(table.columns)
    assert len(store.states.list_ready("ex1")) == 12 and len(store.states.list_ready("ex2")) == 6


def test_export_drain_consumes_what_it_wrote_and_load_puts_it_back(spark, capsys, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    bodies = sorted(b"drain %d" % i for i in range(30))
    for body in bodies:
        add_directly(store, "dr", body)
    output = str(tmp_path / "drained")

    result, printed = run(spark, capsys, "export", "--root", store.root, "--queue", "dr",
                          "--output", output, "--drain", "--max-per-batch", "12")

    assert result["read"] == 30 and result["batches"] >= 3 and "drained 30 messages" in printed
    assert store.states.list_ready("dr") == [] and store.streams.list_manifests("spark") == []
    assert not [n for n in os.listdir(store.folder("delay")) if n.startswith("dr:")]
    assert sorted(r["body"] for r in spark.read.parquet(output).collect()) == bodies

    # The drained Parquet loads back into a queue: body is a column of the export.
    result, printed = run(spark, capsys, "load", "--root", store.root, "--queue", "back",
                          "--input", output, "--format", "parquet")
    assert result["messages"] == 30 and "wrote 30 messages" in printed
    assert sorted(bodies_of(store.root, "back")) == bodies and store.states.list_ready("dr") == []


def test_load_reads_json_lines_text_lines_and_a_folder_of_files(spark, capsys, tmp_path):
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"body": f"rec {i}", "dedup_id": f"k{i % 3}"}) + "\n" for i in range(6)))
    raw = tmp_path / "raw.jsonl"
    raw.write_text('{"a": 1}\n{"a": 2}\n')
    text = tmp_path / "lines.txt"
    text.write_text("alpha\nbeta\ngamma\n")
    folder = tmp_path / "files"
    (folder / "sub").mkdir(parents=True)
    for name, data in (("x.bin", b"\x00\x01"), ("sub/y.bin", b"\xff" * 10)):
        (folder / name).write_bytes(data)

    result, _ = run(spark, capsys, "load", "--root", store.root, "--queue", "js", "--input", str(records))
    assert (result["format"], result["messages"], result["duplicates"]) == ("json", 3, 3)
    result, _ = run(spark, capsys, "load", "--root", store.root, "--queue", "raw", "--input", str(raw))
    assert sorted(bodies_of(store.root, "raw")) == [b'{"a": 1}', b'{"a": 2}']
    result, printed = run(spark, capsys, "load", "--root", store.root, "--queue", "tx", "--input", str(text))
    assert result["format"] == "text" and "wrote 3 messages" in printed
    assert sorted(bodies_of(store.root, "tx")) == [b"alpha", b"beta", b"gamma"]
    result, _ = run(spark, capsys, "load", "--root", store.root, "--queue", "fl", "--input", str(folder),
                    "--content-type", "application/x-blob")
    assert result["format"] == "files" and sorted(bodies_of(store.root, "fl")) == [b"\x00\x01", b"\xff" * 10]
    rows = spark.read.format("mq").option("root", store.root).option("queue", "fl").load().collect()
    assert {r["content_type"] for r in rows} == {"application/x-blob"}
    assert not os.listdir(os.path.join(store.root, "stage"))


def test_logstats_counts_a_real_daemons_log_per_queue_and_minute(spark, capsys, start_mq, tmp_path):
    log = tmp_path / "mq.log"
    daemon = start_mq(workers=2, timeout=60, log_file=log)
    for i in range(8):
        daemon.add("ls1", b"x")
    daemon.add("ls2", b"y")
    for _ in range(5):
        resp = daemon.fetch("ls1")
        daemon.delete("ls1", resp.header("X-Message-Id"))
    daemon.fetch("ls2")
    assert daemon.request("GET", "/ls1/messages/not-an-id").status in (400, 404, 405)
    daemon.stop()
    output = str(tmp_path / "stats")

    result, printed = run(spark, capsys, "logstats", "--input", str(log), "--output", output)

    rows = spark.read.parquet(output).collect()
    per_queue = {}
    for r in rows:
        q = per_queue.setdefault(r["queue"], dict.fromkeys(("adds", "fetches", "acks", "client_errors"), 0))
        for key in q:
            q[key] += r[key]
        assert r["p50_ms"] > 0 and r["p99_ms"] >= r["p50_ms"] and r["minute"].second == 0
    assert {k: v for k, v in per_queue["ls1"].items() if k != "client_errors"} == {"adds": 8, "fetches": 5, "acks": 5}
    assert per_queue["ls1"]["client_errors"] >= 1
    assert per_queue["ls2"]["adds"] == 1 and per_queue["ls2"]["fetches"] == 1
    assert "queue" in printed and "p99_ms" in printed and "ls1" in printed
    with open(result["chart"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_bad_arguments_exit_2_before_spark_starts(tmp_path):
    done = subprocess.run([command("mq-pipeline"), "load", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--queue" in done.stderr
