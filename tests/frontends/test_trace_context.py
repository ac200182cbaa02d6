"""W3C trace context kept with a message: a traceparent (and tracestate) sent with an add comes
back with every fetch of it (single, batch as multipart and JSON, MessagePack-RPC, the SQS
API's AWSTraceHeader, in both directions), and is in the access log lines of the add and the
fetch; an invalid one is ignored, as W3C Trace Context has receivers do. mq.local, on the
daemon's root, stores it in the same form and reads the fronts' back."""

import itertools
import json
import socket

import msgpack
import pytest

from mq.local import LocalClient
from mq.store.message import decode_header
from support import Daemon, free_port, poll_for

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
#: The same trace as AWS X-Ray writes it (the SQS API's AWSTraceHeader).
XRAY = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
names = (f"trace-{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def traced_mq(tmp_path_factory):
    """A daemon with the RPC port open (and the SQS API on its main port)."""
    workdir = tmp_path_factory.mktemp("trace")
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30,
                    args=(f"--rpc-port={free_port()}",))
    daemon.rpc_port = int(daemon.args[0].split("=")[1])
    try:
        daemon.start().wait_ready()
        yield daemon
    finally:
        daemon.cleanup()


def traced_add(daemon, queue: str, body: bytes, traceparent=TRACEPARENT, tracestate=TRACESTATE) -> str:
    """Add a message with a trace context; its id."""
    headers = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate else {})}
    resp = daemon.request("POST", f"/{queue}/messages", body, headers)
    assert resp.status == 201, resp.body
    return resp.header("X-Message-Id")


def logged(daemon, event: str, **fields) -> list[dict]:
    """The access log lines of an event with these field values."""
    return [e for e in daemon.events(event) if all(e.get(k) == v for k, v in fields.items())]


def test_a_single_add_and_fetch_carry_the_trace_and_log_it(traced_mq):
    queue = next(names)
    message_id = traced_add(traced_mq, queue, b"traced")
    plain = traced_mq.add(queue, b"untraced")
    got = traced_mq.fetch(queue)
    assert got.header("X-Message-Id") == message_id
    assert (got.header("traceparent"), got.header("tracestate")) == (TRACEPARENT, TRACESTATE)
    other = traced_mq.fetch(queue)
    assert other.header("X-Message-Id") == plain and other.header("traceparent") is None
    poll_for(lambda: logged(traced_mq, "http.request", method="POST", id=message_id,
                            traceparent=TRACEPARENT), 30, what="the add's access log line")
    poll_for(lambda: logged(traced_mq, "http.request", method="GET", id=message_id,
                            traceparent=TRACEPARENT), 30, what="the fetch's access log line")


def test_a_fan_out_gives_every_copy_the_trace(traced_mq):
    queues = [f"fan-trace-{i}" for i in range(2)]
    for queue in queues:
        assert traced_mq.request("PUT", f"/{queue}").status in (200, 201)
    resp = traced_mq.request("POST", "/_mq/messages?qre=fan-trace-.*", b"to all",
                             {"traceparent": TRACEPARENT})
    assert resp.status == 201, resp.body
    for queue in queues:
        assert traced_mq.fetch(queue).header("traceparent") == TRACEPARENT


def test_an_invalid_traceparent_is_ignored(traced_mq):
    queue = next(names)
    for bad in ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # a zero parent
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
                "00-4BF92F35-00f067aa0ba902b7-01", "garbage"):
        traced_add(traced_mq, queue, b"x", traceparent=bad)
        got = traced_mq.fetch(queue)
        assert got.status == 200 and got.header("traceparent") is None and got.header("tracestate") is None


def test_batch_adds_and_fetches_carry_each_message_s_trace(traced_mq):
    queue = next(names)
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    lines = b"\n".join(json.dumps(r).encode() for r in [
        {"body": "own", "traceparent": other}, {"body": "the request's"}])
    resp = traced_mq.request("POST", f"/{queue}/messages", lines,
                             {"Content-Type": "application/x-ndjson", "traceparent": TRACEPARENT})
    assert resp.status == 201, resp.body
    traced_mq.add(queue, b"none")
    got = traced_mq.request("GET", f"/{queue}/messages?max=10", headers={"Accept": "application/json"})
    records = {r["body"]: r for r in got.json()["messages"]}
    assert records["own"]["traceparent"] == other
    assert records["the request's"]["traceparent"] == TRACEPARENT
    assert "traceparent" not in records["none"]
    # Multipart: a part's own header, back as a header of its part.
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Type: text/plain\r\ntraceparent: {TRACEPARENT}\r\n"
            f"tracestate: {TRACESTATE}\r\n\r\nin a part\r\n--{boundary}--\r\n").encode()
    resp = traced_mq.request("POST", f"/{queue}/messages", body,
                             {"Content-Type": f"multipart/mixed; boundary={boundary}"})
    assert resp.status == 201, resp.body
    got = traced_mq.request("GET", f"/{queue}/messages?max=10")
    assert got.status == 200
    part = got.body.split(b"in a part")[0].rsplit(b"--", 1)[1]
    assert f"traceparent: {TRACEPARENT}\r\ntracestate: {TRACESTATE}\r\n".encode() in part


def stored_trace(daemon, queue: str, message_id: str) -> dict | None:
    """The `a` map of a ready message's file: where every front keeps its trace context."""
    path = daemon.root / "queues" / queue / message_id
    return decode_header(queue, message_id, path.read_bytes())[0].get("a")


def fetched_when_seen(daemon, queue: str):
    """Fetch over HTTP once the daemon has seen mq.local's adds (notice files, within 0.5 s)."""
    return poll_for(lambda: [r for r in [daemon.fetch(queue)] if r.status == 200], 5,
                    what="mq.local's message to be served")[0]


def test_mq_local_stores_the_trace_as_the_fronts_do_and_reads_theirs(traced_mq):
    queue = next(names)
    from_http = traced_add(traced_mq, queue, b"from http")
    with LocalClient(traced_mq.root) as local:
        from_local = local.put(queue, b"from local", traceparent=TRACEPARENT, tracestate=TRACESTATE)
        untraced = local.put(queue, b"untraced")
        ignored = local.put(queue, b"ignored", traceparent="garbage", tracestate=TRACESTATE)
        # One stored form, whichever way the message came in.
        assert stored_trace(traced_mq, queue, from_local) == {"tp": TRACEPARENT, "ts": TRACESTATE}
        assert stored_trace(traced_mq, queue, from_http) == stored_trace(traced_mq, queue, from_local)
        assert stored_trace(traced_mq, queue, untraced) is None
        assert stored_trace(traced_mq, queue, ignored) is None, "an invalid one is ignored"
        # mq.local gives a front's trace back as the HTTP client's Message does.
        [peeked] = local.peek(queue, max=1)
        assert (peeked.id, peeked.traceparent, peeked.tracestate) == (from_http, TRACEPARENT, TRACESTATE)
        got = local.get(queue)
        assert (got.id, got.traceparent, got.tracestate) == (from_http, TRACEPARENT, TRACESTATE)
        local.ack(got)
    # The daemon serves mq.local's trace, and logs it, as it does one added over HTTP.
    first = fetched_when_seen(traced_mq, queue)
    assert first.header("X-Message-Id") == from_local
    assert (first.header("traceparent"), first.header("tracestate")) == (TRACEPARENT, TRACESTATE)
    for message_id in (untraced, ignored):
        later = traced_mq.fetch(queue)
        assert later.header("X-Message-Id") == message_id and later.header("traceparent") is None
    poll_for(lambda: logged(traced_mq, "http.request", method="GET", id=from_local,
                            traceparent=TRACEPARENT), 5, what="the fetch's access log line")


def rpc_call(sock, unpacker, msgid: int, method: str, *params):
    """One MessagePack-RPC request: (error, result)."""
    sock.sendall(msgpack.packb([0, msgid, method, list(params)], use_bin_type=True))
    while True:
        for value in unpacker:
            return value[2], value[3]
        unpacker.feed(sock.recv(65536))


def test_rpc_push_and_pull_carry_the_trace(traced_mq):
    queue = next(names)
    traced_add(traced_mq, queue, b"from http", tracestate=None)
    with socket.create_connection(("127.0.0.1", traced_mq.rpc_port), timeout=30) as sock:
        unpacker = msgpack.Unpacker(raw=False)
        assert rpc_call(sock, unpacker, 1, "push", queue, "from rpc",
                        {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}) == (None, "ok")
        error, first = rpc_call(sock, unpacker, 2, "pull", queue)
        assert error is None and first["traceparent"] == TRACEPARENT and "tracestate" not in first
        error, second = rpc_call(sock, unpacker, 3, "pull", queue)
        assert (second["content"], second["traceparent"], second["tracestate"]) == \
            ("from rpc", TRACEPARENT, TRACESTATE)
    poll_for(lambda: logged(traced_mq, "rpc.call", method="push", traceparent=TRACEPARENT), 30,
             what="the push's access log line")
    assert logged(traced_mq, "rpc.call", method="pull", traceparent=TRACEPARENT)


def test_the_sqs_api_s_aws_trace_header_crosses_both_ways(traced_mq):
    import boto3
    sqs = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{traced_mq.port}",
                       region_name="us-east-1", aws_access_key_id="any", aws_secret_access_key="any")
    queue = next(names)
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    traced_add(traced_mq, queue, b"from http")
    got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["AWSTraceHeader"],
                              WaitTimeSeconds=2)["Messages"]
    assert got[0]["Attributes"]["AWSTraceHeader"] == XRAY
    sqs.send_message(QueueUrl=url, MessageBody="from sqs", MessageSystemAttributes={
        "AWSTraceHeader": {"DataType": "String", "StringValue": XRAY}})
    fetched = traced_mq.fetch(queue)
    assert (fetched.body, fetched.header("traceparent")) == (b"from sqs", TRACEPARENT)
    poll_for(lambda: logged(traced_mq, "http.request", sqs="SendMessage", traceparent=TRACEPARENT),
             30, what="the SendMessage access log line")
    assert logged(traced_mq, "http.request", sqs="ReceiveMessage", traceparent=TRACEPARENT)
