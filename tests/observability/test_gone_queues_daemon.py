"""A live daemon forgets a queue everywhere once it is gone: one deleted on the root by another
writer (no daemon heard of it) leaves no table of any process, and the front's own tables, the
StatsD totals sent and the SQS API's purge times, forget a queue deleted over HTTP."""

import socket

import pytest

from mq.store import Store
from support import poll_for, ready_daemon


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon sending StatsD lines every 0.2 s (to a socket nobody reads)."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    try:
        yield from ready_daemon(tmp_path_factory.mktemp("gone"), workers=2, timeout=30,
                                args=(f"--statsd=127.0.0.1:{sink.getsockname()[1]}",
                                      "--statsd-interval=0.2"))
    finally:
        sink.close()


def tables(daemon) -> dict:
    """Per process, how many queues each of its per-queue tables holds."""
    resp = daemon.request("GET", "/_mq/stats?tables=1")
    assert resp.status == 200
    return resp.json()["tables"]


def no_table_holds_more_than(daemon, queues: int) -> dict:
    """Poll until no table of any process holds more queues than there are."""
    def small():
        sizes = tables(daemon)
        return all(n <= queues for held in sizes.values() for n in held.values()) and sizes
    # Half a second apart: each look asks every process (some milliseconds of CPU each), and
    # what is awaited is the sweeps' and the mover's seconds-long while.
    return poll_for(small, 20, interval=0.5,
                    what=f"every per-queue table to hold at most {queues} queues")


@pytest.mark.slow
def test_a_queue_another_writer_deleted_and_one_deleted_over_http_are_forgotten_everywhere(daemon):
    """Both queues go, then one wait for every sweep (a sweep every few seconds, the mover's
    purges kept a while): one deleted on the root by another writer leaves no table of any
    process; the front forgets the StatsD totals and the SQS purge time of one deleted over
    HTTP."""
    daemon.request("PUT", "/elsewhere/properties", b'{"timeout": 60}')
    daemon.add("elsewhere", b"one")
    daemon.add("elsewhere", b"two")
    assert daemon.fetch("elsewhere").status == 200
    held = poll_for(lambda: (t := tables(daemon)) and t["mover-0"]["timers"] == 1 and t, 10,
                    what="the fetched message to be timed")
    assert held["fetch-0"]["counters"] + held["fetch-1"]["counters"] == 1
    # Handed out and never acked: its size is kept for an ack that never comes.
    assert held["fetch-0"]["sizes"] + held["fetch-1"]["sizes"] == 1
    assert held["save-0"]["counters"] + held["save-1"]["counters"] >= 1
    Store(str(daemon.root)).queues.delete_queue("elsewhere")

    daemon.add("purged-then-deleted", b"x")
    boto3 = pytest.importorskip("boto3")
    sqs = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{daemon.port}", region_name="us-east-1",
                       aws_access_key_id="AKIDMQTESTS00000000", aws_secret_access_key="unchecked")
    sqs.purge_queue(QueueUrl=sqs.get_queue_url(QueueName="purged-then-deleted")["QueueUrl"])
    poll_for(lambda: (f := tables(daemon)["front-0"])["sqs_purges"] == 1 and f["statsd"] >= 1, 10,
             what="the front to keep the purge time and the totals sent")
    assert daemon.request("DELETE", "/purged-then-deleted").status == 204

    front = no_table_holds_more_than(daemon, 0)["front-0"]
    assert front["sqs_purges"] == 0 and front["statsd"] == 0
    assert "elsewhere" not in daemon.request("GET", "/_mq/stats").json()["queues"]
