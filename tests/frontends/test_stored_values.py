"""Every value a producer stores with a message (its content type, its trace context, the SQS
API's message attributes) walked through every way in and every way out: it is refused on the
way in with a 400 JSON error and nothing is stored, or it comes back intact on every way out
(single, batch multipart and JSON, compound, peek, MessagePack-RPC, the SQS API as JSON and
as XML, mq.local, the Python client). Never a 500, never a delivery spent on nothing."""

import base64
import functools
import itertools
import json
import socket
import time
import xml.etree.ElementTree as ElementTree
from urllib.parse import urlencode

import msgpack
import pytest
from support import Daemon, free_port, poll_for

from mq.client import Client, InvalidError, Message
from mq.errors import Invalid
from mq.ids import new_id
from mq.local import LocalClient
from mq.operations import Add
from mq.store import encode_message

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
V00 = f"00-{TRACE}-{PARENT}-01"
#: A later version may carry more fields: kept as sent, when printable.
LATER = f"01-{TRACE}-{PARENT}-01-more.fields"
#: (traceparent, tracestate sent) -> (traceparent, tracestate every way out answers): a
#: traceparent that does not parse is dropped with its tracestate, a bad tracestate alone.
TRACES = [
    ((V00, "congo=t61rcWkgMzE"), (V00, "congo=t61rcWkgMzE")),
    ((LATER, None), (LATER, None)),
    ((LATER + "\r", None), (LATER, None)),  # Surrounding blanks are trimmed.
    ((LATER + "-x\ry", "a=b"), (None, None)),
    ((LATER + "-x\ny", None), (None, None)),
    ((LATER + "-\x00", None), (None, None)),
    ((LATER + "-\x7f", None), (None, None)),
    ((LATER + "-\u00e9t\u00e9", None), (None, None)),
    ((LATER + " x", None), (None, None)),
    ((LATER + "-" + "a" * 600, None), (None, None)),
    ((V00, "a=b\rc"), (V00, None)),
    ((V00, "a=" + "b" * 600), (V00, None)),
]
#: (content type sent, kept): kept ones come back as sent (UTF-8), the others are refused.
CONTENT_TYPES = [
    ("text/plain; note=\u20acuro \u00e9t\u00e9", True),
    ("text/plain; n=\u00c5\u0085\u2028\U0001f600", True),  # UTF-8 byte 0x85, NEL, LS, astral
    ("text/plain; " + "n" * 1000, True),
    ("text/plain; " + "n" * 1100, False),
    ("text/plain\r\nX-Injected: yes", False),
    ("text/plain\rX-Injected: yes", False),
    ("text/plain\x00", False),
    ("text/plain\x7f", False),
]
names = (f"values-{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def values_mq(tmp_path_factory):
    """A daemon with the RPC port open, the SQS API on its main port, a long timer."""
    workdir = tmp_path_factory.mktemp("values")
    rpc_port = free_port()
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30,
                    args=(f"--rpc-port={rpc_port}",))
    daemon.rpc_port = rpc_port
    try:
        daemon.start().wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        yield daemon
    finally:
        daemon.cleanup()


@functools.cache
def client_of(port: int) -> Client:
    """The module's Python client of the daemon on port (making one costs a TLS context)."""
    return Client(f"http://127.0.0.1:{port}", retries=0)


def rpc(daemon, method: str, *params):
    """(error, result) of one MessagePack-RPC call on a connection of its own."""
    with socket.create_connection(("127.0.0.1", daemon.rpc_port), timeout=30) as sock:
        sock.sendall(msgpack.packb([0, 1, method, list(params)], use_bin_type=True))
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            for _, _, error, result in unpacker:
                return error, result
            data = sock.recv(65536)
            assert data, "the RPC server closed the connection"
            unpacker.feed(data)


def header_safe(value: str | None) -> bool:
    """Whether an HTTP client can send value as a header at all (no control character)."""
    return value is None or not any(ord(c) < 0x20 or c == "\x7f" for c in value)


def answered(resp) -> tuple[str, object]:
    """("stored", id) of a 2xx add, ("refused", error kind) of a 400 with a JSON error."""
    assert resp.status in (200, 201, 400), (resp.status, resp.body)
    if resp.status == 400:
        return "refused", resp.json()["error"]
    value = resp.json()
    return "stored", value["messages"][0]["id"] if "messages" in value else value["id"]


def add_rest(daemon, queue, ct, tp, ts):
    """POST /{queue}/messages with the values as headers (UTF-8)."""
    if not all(header_safe(v) for v in (ct, tp, ts)):
        return None  # No HTTP client sends a control character in a header.
    headers = {name: value.encode() for name, value in
               (("Content-Type", ct), ("traceparent", tp), ("tracestate", ts)) if value is not None}
    return answered(daemon.request("POST", f"/{queue}/messages", b"payload", headers))


def add_ndjson(daemon, queue, ct, tp, ts):
    """A batch add of one JSON line holding the values."""
    record = {"body": "payload", "content_type": ct, "traceparent": tp, "tracestate": ts}
    line = json.dumps({k: v for k, v in record.items() if v is not None}).encode()
    return answered(daemon.request("POST", f"/{queue}/messages", line,
                                   {"Content-Type": "application/x-ndjson"}))


def add_multipart(daemon, queue, ct, tp, ts):
    """A batch add of one multipart part whose headers hold the values (as UTF-8 bytes, which
    mq reads itself: a bare CR or a NUL reaches it)."""
    if any(v is not None and "\n" in v for v in (ct, tp, ts)):
        return None  # A line feed ends the part's header line.
    head = "".join(f"{name}: {value}\r\n" for name, value in
                   (("Content-Type", ct), ("traceparent", tp), ("tracestate", ts)) if value is not None)
    body = f"--b0undary\r\n{head}\r\npayload\r\n--b0undary--\r\n".encode()
    return answered(daemon.request("POST", f"/{queue}/messages", body,
                                   {"Content-Type": "multipart/mixed; boundary=b0undary"}))


def add_rpc(daemon, queue, ct, tp, ts):
    """push(queue, content, options) with the values as options."""
    options = {k: v for k, v in (("content_type", ct), ("traceparent", tp), ("tracestate", ts))
               if v is not None}
    error, result = rpc(daemon, "push", queue, b"payload", options)
    if error is not None:
        assert error["error"] == "invalid", error
        return "refused", error["error"]
    assert result == "ok"
    return "stored", None


def add_local(daemon, queue, ct, tp, ts):
    """mq.local's put on the daemon's root."""
    with LocalClient(daemon.root) as local:
        try:
            return "stored", local.put(queue, b"payload", content_type=ct, traceparent=tp,
                                       tracestate=ts)
        except InvalidError as err:
            return "refused", err.kind


def add_client(daemon, queue, ct, tp, ts):
    """The Python client's put (the trace it sends is its caller's OpenTelemetry context's:
    tests/clients/test_client_trace.py)."""
    assert tp is None and ts is None
    try:
        return "stored", client_of(daemon.port).put(
            queue, b"payload", content_type=ct)
    except InvalidError as err:  # By the daemon, or before sending what it would refuse.
        return "refused", err.kind


WAYS_IN = {"rest": add_rest, "ndjson": add_ndjson, "multipart": add_multipart, "rpc": add_rpc,
           "local": add_local, "client": add_client}


def utf8(value: str | None) -> str | None:
    """A header value http.client read as latin-1, as the UTF-8 text it is."""
    return None if value is None else value.encode("latin-1").decode()


# Each way out: what it gave of the queue's oldest message ("receipt" None for a peek, the
# other keys what it tells of the message), or None when it got none yet.

def out_single(daemon, queue):
    """GET /{queue}/messages: the headers of a single fetch."""
    resp = daemon.request("GET", f"/{queue}/messages")
    if resp.status == 204:
        return None
    assert resp.status == 200, (resp.status, resp.body)
    return {"receipt": resp.header("X-Receipt"), "body": resp.body,
            "content_type": utf8(resp.header("Content-Type")),
            "traceparent": resp.header("traceparent"), "tracestate": resp.header("tracestate")}


def out_batch_json(daemon, queue):
    """GET /{queue}/messages?max=1 as JSON: the fields of its record."""
    resp = daemon.request("GET", f"/{queue}/messages?max=1", headers={"Accept": "application/json"})
    if resp.status == 204:
        return None
    assert resp.status == 200, (resp.status, resp.body)
    [m] = resp.json()["messages"]
    return {"receipt": m["receipt"], "body": m["body"].encode(), "content_type": m["content_type"],
            "traceparent": m.get("traceparent"), "tracestate": m.get("tracestate")}


def out_batch_multipart(daemon, queue):
    """GET /{queue}/messages?max=1 as multipart/mixed: the headers of its part (UTF-8)."""
    resp = daemon.request("GET", f"/{queue}/messages?max=1")
    if resp.status == 204:
        return None
    assert resp.status == 200, (resp.status, resp.body)
    boundary = resp.header("Content-Type").split("boundary=")[1].encode()
    head, _, body = resp.body.split(b"--" + boundary)[1].partition(b"\r\n\r\n")
    headers = dict(line.decode().split(": ", 1) for line in head.strip().split(b"\r\n"))
    return {"receipt": headers["X-Receipt"], "body": body[:-2],
            "content_type": headers["Content-Type"], "traceparent": headers.get("traceparent"),
            "tracestate": headers.get("tracestate")}


def out_client(daemon, queue):
    """The Python client's fetch_many (a multipart batch fetch)."""
    got = client_of(daemon.port).fetch_many(queue, 1)
    if not got:
        return None
    [m] = got
    return {"receipt": m.receipt, "body": m.body, "content_type": m.content_type,
            "traceparent": m.traceparent, "tracestate": m.tracestate}


def out_peek(daemon, queue):
    """GET /{queue}/peek: the fields of its record, nothing claimed."""
    resp = daemon.request("GET", f"/{queue}/peek?max=1")
    assert resp.status == 200, (resp.status, resp.body)
    if not resp.json()["messages"]:
        return None
    [m] = resp.json()["messages"]
    return {"receipt": None, "body": base64.b64decode(m["body"]),
            "content_type": m["content_type"], "traceparent": m.get("traceparent"),
            "tracestate": m.get("tracestate")}


def out_rpc(daemon, queue):
    """MessagePack-RPC's pull."""
    error, m = rpc(daemon, "pull", queue)
    assert error is None, error
    if m == "empty":
        return None
    return {"receipt": m["receipt"], "traceparent": m.get("traceparent"),
            "tracestate": m.get("tracestate")}


def sqs_json(daemon, operation: str, params: dict) -> tuple[int, dict]:
    """(status, answer) of one call of the SQS API's JSON protocol."""
    resp = daemon.request("POST", "/", json.dumps(params).encode(),
                          {"X-Amz-Target": f"AmazonSQS.{operation}",
                           "Content-Type": "application/x-amz-json-1.0"})
    assert resp.status in (200, 400), (resp.status, resp.body)
    return resp.status, resp.json()


def out_sqs_json(daemon, queue):
    """The SQS API's ReceiveMessage, JSON protocol, every attribute."""
    status, got = sqs_json(daemon, "ReceiveMessage", {
        "QueueUrl": f"/{queue}", "MessageSystemAttributeNames": ["All"],
        "MessageAttributeNames": ["All"]})
    assert status == 200, got
    if not got.get("Messages"):
        return None
    [m] = got["Messages"]
    return {"receipt": m["ReceiptHandle"], "body": m["Body"].encode(),
            "aws_trace_header": m.get("Attributes", {}).get("AWSTraceHeader"),
            "attributes": m.get("MessageAttributes")}


def out_sqs_xml(daemon, queue):
    """The SQS API's ReceiveMessage, query protocol (XML), every attribute."""
    form = urlencode({"Action": "ReceiveMessage", "QueueUrl": f"/{queue}",
                      "AttributeName.1": "All", "MessageAttributeName.1": "All"})
    resp = daemon.request("POST", "/", form.encode(),
                          {"Content-Type": "application/x-www-form-urlencoded"})
    assert resp.status == 200, (resp.status, resp.body)
    found = [e for e in ElementTree.fromstring(resp.body).iter() if e.tag.endswith("}Message")]
    if not found:
        return None
    [m] = found

    def text(node, name):
        return next(e.text for e in node if e.tag.endswith("}" + name))
    system = {text(a, "Name"): text(a, "Value") for a in m if a.tag.endswith("}Attribute")}
    attributes = {}
    for a in (a for a in m if a.tag.endswith("}MessageAttribute")):
        value = next(e for e in a if e.tag.endswith("}Value"))
        attributes[text(a, "Name")] = {e.tag.split("}")[1]: e.text for e in value}
    return {"receipt": text(m, "ReceiptHandle"), "body": text(m, "Body").encode(),
            "aws_trace_header": system.get("AWSTraceHeader"), "attributes": attributes or None}


def out_local(daemon, queue):
    """mq.local's get on the daemon's root."""
    with LocalClient(daemon.root) as local:
        m = local.get(queue)
    if m is None:
        return None
    return {"receipt": m.receipt, "body": m.body, "content_type": m.content_type,
            "traceparent": m.traceparent, "tracestate": m.tracestate}


#: Every way out, in the order the walk takes them (mq.local last: the daemon hears of its
#: nack by a notice file, read within 0.5 s).
WAYS_OUT = [out_single, out_batch_json, out_batch_multipart, out_client, out_peek, out_rpc,
            out_sqs_json, out_sqs_xml, out_local]


def give_back(daemon, queue: str, message_id: str, receipt: str) -> None:
    """Make a message a way out claimed ready again (nack)."""
    resp = daemon.request("POST", f"/{queue}/messages/{message_id}?reply=nack&receipt={receipt}")
    assert resp.status == 204, (resp.status, resp.body)


def walk_out(daemon, queue: str, expected: dict) -> None:
    """Take the message out every way, check all each tells of it, give it back; the last
    claim (mq.local's, which acks it) must be the delivery its count of claims says: none
    was spent on an answer that did not come."""
    claims = 0
    for way in WAYS_OUT:
        got = poll_for(lambda way=way: way(daemon, queue), 10, what=f"{way.__name__} of {queue}")
        told = {key: value for key, value in got.items() if key != "receipt"}
        assert told == {key: expected.get(key) for key in told}, (way.__name__, told, expected)
        if got["receipt"] is None:
            continue
        claims += 1
        message_id, delivery = got["receipt"].split(".")
        if way is out_local:
            assert int(delivery) == claims, ("a claim without a delivery", got["receipt"])
            with LocalClient(daemon.root) as local:
                local.ack(Message(queue, message_id, b"", "", got["receipt"], 0, None))
        else:
            give_back(daemon, queue, message_id, got["receipt"])


def xray_of(traceparent: str | None) -> str | None:
    """The AWSTraceHeader the SQS API answers for a stored traceparent."""
    if traceparent is None:
        return None
    _, trace, parent, flags = traceparent.split("-")[:4]
    return f"Root=1-{trace[:8]}-{trace[8:]};Parent={parent};Sampled={int(flags, 16) & 1}"


def nothing_stored(daemon, queue: str) -> None:
    """The queue holds no message (or was never made)."""
    resp = daemon.request("GET", f"/{queue}/peek")
    assert resp.status == 404 or resp.json()["messages"] == [], resp.body


def endless_queue(daemon) -> str:
    """A new queue that redelivers forever (retry -1): the walk claims a message many times."""
    queue = next(names)
    assert daemon.request("PUT", f"/{queue}").status == 201
    resp = daemon.request("PATCH", f"/{queue}/properties", b'{"retry": -1}')
    assert resp.status == 200, resp.body
    return queue


def check_walk(daemon, way_in: str, sent: tuple, kept: tuple | None) -> str | None:
    """Add (content type, traceparent, tracestate) through way_in: refused when kept is None,
    else every way out must tell kept (the same three); the outcome, None when way_in cannot
    carry what was sent."""
    queue = endless_queue(daemon)
    outcome = WAYS_IN[way_in](daemon, queue, *sent)
    if outcome is None:
        return None
    if kept is None:
        assert outcome == ("refused", "invalid"), (way_in, sent, outcome)
        nothing_stored(daemon, queue)
        return "refused"
    assert outcome[0] == "stored", (way_in, sent, outcome)
    content_type, traceparent, tracestate = kept
    walk_out(daemon, queue, {"body": b"payload", "content_type": content_type,
                             "traceparent": traceparent, "tracestate": tracestate,
                             "aws_trace_header": xray_of(traceparent)})
    return "stored"


@pytest.mark.parametrize("way_in", [way for way in WAYS_IN if way != "client"])
def test_each_trace_context_is_kept_or_dropped_and_always_received(values_mq, way_in):
    outcomes = [check_walk(values_mq, way_in, ("text/plain", *sent), ("text/plain", *kept))
                for sent, kept in TRACES]
    assert "stored" in outcomes, outcomes


@pytest.mark.parametrize("way_in", list(WAYS_IN))
def test_each_content_type_is_refused_or_always_received_intact(values_mq, way_in):
    outcomes = [check_walk(values_mq, way_in, (ct, None, None), (ct, None, None) if kept else None)
                for ct, kept in CONTENT_TYPES]
    assert {"stored", "refused"} <= set(outcomes), outcomes


def parts_of(content_type: str, body: bytes) -> list[tuple[str, bytes]]:
    """(Content-Type, body) of each part of a compound's multipart/mixed document, its part
    headers read as UTF-8."""
    boundary = content_type.split("boundary=")[1].strip('"').encode()
    parts = []
    for chunk in body.split(b"--" + boundary)[1:-1]:
        head, _, content = chunk[2:].partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Type: "), head
        parts.append((head[len(b"Content-Type: "):].decode(), content[:-2]))
    return parts


def test_a_compound_s_parts_keep_their_content_types_on_every_way_out(values_mq):
    queue = endless_queue(values_mq)
    resp = values_mq.request("PATCH", f"/{queue}/properties", b'{"accum": 0.5}')
    assert resp.status == 200, resp.body
    kept = [ct for ct, ok in CONTENT_TYPES if ok]
    sent = []
    for way_in in ("rest", "ndjson", "multipart", "rpc", "client"):
        for ct in kept:
            assert WAYS_IN[way_in](values_mq, queue, ct, None, None)[0] == "stored"
            sent.append((ct, b"payload"))
    # The window may close before the last add under load: walk each compound in turn.
    walked: list[tuple[str, bytes]] = []
    while len(walked) < len(sent):
        walked += walk_compound(values_mq, queue)
    assert walked == sent


def walk_compound(daemon, queue: str) -> list[tuple[str, bytes]]:
    """Take the oldest compound out every way, check that each gives the same parts, ack it;
    its parts."""
    first = poll_for(lambda: out_single(daemon, queue), 10, what="a compound")
    message_id = first["receipt"].split(".")[0]
    told = [("single", parts_of(first["content_type"], first["body"]))]
    give_back(daemon, queue, message_id, first["receipt"])
    for way in (out_batch_json, out_batch_multipart, out_client):
        got = way(daemon, queue)
        told.append((way.__name__, parts_of(got["content_type"], got["body"])))
        give_back(daemon, queue, message_id, got["receipt"])
    # As stored (msgpack [content type, body] pairs): cf=msgpack, RPC's pull, mq.local.
    resp = daemon.request("GET", f"/{queue}/messages?cf=msgpack")
    told.append(("msgpack", [tuple(p) for p in msgpack.unpackb(resp.body)]))
    give_back(daemon, queue, message_id, resp.header("X-Receipt"))
    error, pulled = rpc(daemon, "pull", queue)
    assert error is None, error
    told.append(("rpc", [tuple(p) for p in pulled["content"]]))
    give_back(daemon, queue, message_id, pulled["receipt"])
    with LocalClient(daemon.root) as local:
        got = poll_for(lambda: local.get(queue), 10, what="mq.local's get of the compound")
        told.append(("local", [tuple(p) for p in msgpack.unpackb(got.body)]))
        local.ack(got)
    for way, parts in told:
        assert parts == told[0][1], way
    return told[0][1]


XRAY = f"Root=1-{TRACE[:8]}-{TRACE[8:]};Parent={PARENT};Sampled=1"
#: Message attributes every way out of the SQS API must give back as sent (binary in base64).
ATTRIBUTES = {
    "text": {"DataType": "String", "StringValue": "line one\r\nline two\r\u20ac \U0001f600\t."},
    "bin": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00\r\n\xff").decode()},
    "num": {"DataType": "Number.float", "StringValue": "1.5e3"},
}
#: (MessageAttributes, AWSTraceHeader sent) -> the traceparent mq's own ways out answer, or
#: None when the SQS API refuses the message.
SQS_CASES = [
    ((ATTRIBUTES, XRAY), V00),
    ((ATTRIBUTES, XRAY + "\r\nX-Injected: yes"), f"00-{TRACE}-{PARENT}-00"),
    (({"text": {"DataType": "String", "StringValue": "a\x00b"}}, None), None),
    (({}, "Root=\x01"), None),
]


def sqs_entry(attributes: dict, trace_header: str | None) -> dict:
    """A SendMessage's parameters (but the queue) in the JSON protocol's shape."""
    entry: dict = {"MessageBody": "payload", "MessageAttributes": attributes}
    if trace_header is not None:
        entry["MessageSystemAttributes"] = {
            "AWSTraceHeader": {"DataType": "String", "StringValue": trace_header}}
    return entry


def send_json(daemon, queue, attributes, trace_header):
    """The SQS API's SendMessage, JSON protocol."""
    status, got = sqs_json(daemon, "SendMessage",
                           {"QueueUrl": f"/{queue}", **sqs_entry(attributes, trace_header)})
    return ("stored", got["MessageId"]) if status == 200 else ("refused", got["__type"])


def send_batch(daemon, queue, attributes, trace_header):
    """The SQS API's SendMessageBatch of one entry, JSON protocol."""
    status, got = sqs_json(daemon, "SendMessageBatch", {
        "QueueUrl": f"/{queue}", "Entries": [{"Id": "one", **sqs_entry(attributes, trace_header)}]})
    assert status == 200, got
    if got.get("Failed"):
        assert got["Failed"][0]["SenderFault"] is True, got
        return "refused", got["Failed"][0]["Code"]
    return "stored", got["Successful"][0]["MessageId"]


def send_query(daemon, queue, attributes, trace_header):
    """The SQS API's SendMessage, query protocol (form parameters)."""
    form = {"Action": "SendMessage", "QueueUrl": f"/{queue}", "MessageBody": "payload"}
    for number, (name, value) in enumerate(attributes.items(), 1):
        form.update({f"MessageAttribute.{number}.Name": name,
                     **{f"MessageAttribute.{number}.Value.{k}": v for k, v in value.items()}})
    if trace_header is not None:
        form.update({"MessageSystemAttribute.1.Name": "AWSTraceHeader",
                     "MessageSystemAttribute.1.Value.DataType": "String",
                     "MessageSystemAttribute.1.Value.StringValue": trace_header})
    resp = daemon.request("POST", "/", urlencode(form).encode(),
                          {"Content-Type": "application/x-www-form-urlencoded"})
    assert resp.status in (200, 400), (resp.status, resp.body)
    return ("stored", None) if resp.status == 200 else ("refused", resp.body)


@pytest.mark.parametrize("send", [send_json, send_batch, send_query])
def test_sqs_message_attributes_are_refused_or_always_received_intact(values_mq, send):
    for (attributes, trace_header), traceparent in SQS_CASES:
        queue = endless_queue(values_mq)
        outcome = send(values_mq, queue, attributes, trace_header)
        if traceparent is None:
            assert outcome[0] == "refused", (attributes, trace_header, outcome)
            nothing_stored(values_mq, queue)
            continue
        assert outcome[0] == "stored", outcome
        walk_out(values_mq, queue, {
            "body": b"payload", "content_type": "text/plain; charset=utf-8",
            "traceparent": traceparent, "tracestate": None, "aws_trace_header": trace_header,
            "attributes": attributes})


def test_a_trace_context_stored_unchecked_is_left_out_not_sent(values_mq):
    """A message file an older mq wrote with a traceparent no header may carry is served
    without it on every way out (and the save actor's check of an add refuses such a map)."""
    queue = endless_queue(values_mq)
    message_id = new_id()
    stored = {"tp": LATER + "-x\ry", "ts": "a=b"}
    path = values_mq.root / "queues" / queue / message_id
    path.write_bytes(encode_message(b"payload", "text/plain", int(time.time() * 1000),
                                    message_id, attributes=stored))
    with LocalClient(values_mq.root) as local:
        local.store.notices.post(queue)
    walk_out(values_mq, queue, {"body": b"payload", "content_type": "text/plain"})
    with pytest.raises(Invalid, match="trace context"):
        Add.from_payload({"queue": queue, "body": b"payload", "attributes": stored})


def test_mq_local_refuses_a_group_or_content_type_no_way_out_carries(values_mq):
    """A group goes back as the SQS API's MessageGroupId (XML), a content type as a header:
    mq.local, whose caller may pass any str, refuses a control character or a lone surrogate
    as the daemon does, and stores nothing."""
    queue = endless_queue(values_mq)
    with LocalClient(values_mq.root) as local:
        for options in ({"group": "g\x00"}, {"group": "g\r\nh"}, {"group": "g\ud800"},
                        {"content_type": "text/plain; n=\ud800"}):
            with pytest.raises(InvalidError):
                local.put(queue, b"payload", **options)
        assert local.peek(queue) == []
        local.put(queue, b"payload", group="gr\u00fcn \u20ac")
    walk_out(values_mq, queue, {"body": b"payload", "content_type": "application/octet-stream"})
