"""Every limit an operation declares (mq.operations: each op's `limits`), walked at and past its
edges: decoded as the actors decode it, named in docs/PROTOCOL.md, and through each front end
that can reach it (REST, MessagePack-RPC, the SQS API, the Python client, mq.local) against a
real daemon. A limit declared later fails test_every_declared_limit_has_its_walks until its
walks are added below; a front end that cannot reach a limit says why (WALKS)."""

import dataclasses
import itertools
import json
import os
import re
import socket
from urllib.parse import quote, unquote

import msgpack
import pytest
from repo_support import REPO
from support import free_port, poll_for, ready_daemon

from mq.client import Client, InvalidError
from mq.client.message import Message
from mq.errors import Invalid
from mq.local import LocalClient
from mq.operations import OPS, Operation
from mq.operations.fields import Limit

PROTOCOL = (REPO / "docs" / "PROTOCOL.md").read_text()
MESSAGE_ID = "01a225d3-1381-7000-99f2-0cc32c9c51a4"
#: Every (op, field, Limit) the operations declare.
DECLARED = [(op, field, limit) for op, cls in sorted(OPS.items())
            for field, limit in cls.limits.items()]
names = (f"lim-q{n}" for n in itertools.count())


def edges(limit: Limit) -> tuple[list, list]:
    """(values at the edges, values just past them): counts of items, or numbers."""
    step = 1 if isinstance(limit.high, int) and isinstance(limit.low, int) else 0.5
    return [limit.low, limit.high], [limit.low - step, limit.high + step]


# -- the declaration itself -----------------------------------------------------------------

#: A valid value of each required field the ops have, for a payload with only those.
REQUIRED = {"queue": "q", "id": MESSAGE_ID, "body": b"x", "max": 1, "messages": [{"body": b"x"}],
            "receipts": [f"{MESSAGE_ID}.1"], "queues": ["q"], "request": b"r", "rules": [],
            "properties": {}, "window": "w", "ids": [], "source": "q", "pattern": "q"}


def items(field: str, n: int) -> list:
    """n distinct valid items of a list field."""
    if field in ("dedup_id", "group"):
        return "k" * n
    return {"messages": [{"body": b"x"}] * n, "receipts": [f"{MESSAGE_ID}.{k + 1}" for k in range(n)],
            "queues": [f"q{k}" for k in range(n)]}[field]


def payload(cls: type[Operation], field: str, value) -> dict:
    """The op's required fields, and `field` set to value (a count: that many items)."""
    out = {f.name: REQUIRED[f.name] for f in dataclasses.fields(cls)
           if f.default is dataclasses.MISSING}
    out[field] = items(field, value) if cls.limits[field].counts else value
    return out


@pytest.mark.parametrize("op,field,limit", DECLARED, ids=[f"{o}.{f}" for o, f, _ in DECLARED])
def test_each_declared_limit_holds_at_and_past_its_edges_when_decoded(op, field, limit):
    cls = OPS[op]
    at, past = edges(limit)
    for value in at:
        cls.from_payload(payload(cls, field, value))
    for value in past:
        with pytest.raises(Invalid) as refused:
            cls.from_payload(payload(cls, field, value))
        assert f"{limit.high:g}" in refused.value.message


@pytest.mark.parametrize("op,field,limit", DECLARED, ids=[f"{o}.{f}" for o, f, _ in DECLARED])
def test_each_declared_limit_is_in_its_ops_row_of_the_protocol_doc(op, field, limit):
    row = re.search(rf"^\| `{op}`[^|]*\|([^\n]*)$", PROTOCOL, re.MULTILINE)
    assert row, f"docs/PROTOCOL.md has no row for {op}"
    said = re.search(rf"`{field}` \(([^)]*)\)", row.group(1))
    assert said, f"docs/PROTOCOL.md's row of {op} does not say what {field} may be"
    text = said.group(1)
    if text.startswith("as for `"):  # "`queues` (as for `fetch_any`)": that op's row says it.
        other = text.split("`")[1]
        assert OPS[other].limits[field] == limit
        return test_each_declared_limit_is_in_its_ops_row_of_the_protocol_doc(other, field, limit)
    assert f"{limit.low:g} to {limit.high:g}" in text, (op, field, text)


# -- through the front ends -----------------------------------------------------------------

#: How many queues the module's daemon has for the fan-out and pull-any walks.
MANY = 1001


@pytest.fixture(scope="module")
def lim(tmp_path_factory):
    """One daemon (one fetch actor: it owns every queue) with the RPC port, MANY queues made
    by mq.local beside it, and a client of each front end."""
    workdir = tmp_path_factory.mktemp("limits")
    rpc_port = free_port()
    for daemon in ready_daemon(workdir, workers=1, timeout=30, args=(f"--rpc-port={rpc_port}",)):
        local = LocalClient(daemon.root)
        for n in range(MANY):
            # A queue is its folder (docs/FORMAT.md); made without a flush each, for speed.
            os.mkdir(daemon.root / "queues" / f"many-{n:05d}")  # Fan-outs add to them.
            os.mkdir(daemon.root / "queues" / f"idle-{n:05d}")  # Pull-anys find them empty.
        poll_for(lambda: socket.create_connection(("127.0.0.1", rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        rpc = socket.create_connection(("127.0.0.1", rpc_port), timeout=60)
        client = Client(f"http://127.0.0.1:{daemon.port}", retries=0)
        yield Fronts(daemon, rpc, client, local)
        rpc.close()
        client.close()


class Fronts:
    """The daemon and a client of each front end."""

    def __init__(self, daemon, rpc, client, local):
        self.daemon, self.rpc, self.client, self.local = daemon, rpc, client, local
        self.unpacker = msgpack.Unpacker(raw=False)
        self.msgids = itertools.count(1)

    def call(self, method: str, *params):
        """One MessagePack-RPC request: (error, result)."""
        msgid = next(self.msgids)
        self.rpc.sendall(msgpack.packb([0, msgid, method, list(params)], use_bin_type=True))
        while True:
            for value in self.unpacker:
                assert value[1] == msgid
                return value[2], value[3]
            self.unpacker.feed(self.rpc.recv(65536))

    def sqs(self, operation: str, **params):
        """One call of the SQS API (JSON protocol): (status, answer)."""
        resp = self.daemon.request("POST", "/", json.dumps(params).encode(), {
            "X-Amz-Target": f"AmazonSQS.{operation}", "Content-Type": "application/x-amz-json-1.0"})
        return resp.status, resp.json()

    def queue_with(self, count: int = 1) -> str:
        """A fresh queue holding `count` ready messages."""
        queue = next(names)
        assert self.daemon.request("PUT", f"/{queue}").status == 201
        for n in range(count):
            self.daemon.add(queue, b"m%d" % n)
        return queue

    def fetched(self, queue: str) -> Message:
        """A message of the queue, claimed through the Python client."""
        message = self.client.get(queue)
        assert message is not None
        return message


def rest(resp) -> bool:
    """True when the daemon took the request; False when it refused it as invalid (400)."""
    if resp.status == 400:
        assert resp.json()["error"] == "invalid", resp.body
        return False
    assert resp.status in (200, 201, 204), (resp.status, resp.body)
    return True


def raised(call) -> bool:
    """True when the call returned; False when it raised InvalidError (the client's 400)."""
    try:
        call()
    except InvalidError:
        return False
    return True


def rpc(answer) -> bool:
    """True when the RPC call succeeded; False when its error is `invalid`."""
    error, _ = answer
    if error is not None:
        assert error["error"] == "invalid", error
        return False
    return True


def sqs(answer) -> bool:
    """True when the SQS call succeeded; False when it was refused as a bad parameter (400)."""
    status, body = answer
    if status == 400:
        assert "Invalid" in body["__type"] or "OutOfRange" in body["__type"], body
        return False
    assert status == 200, body
    return True


def multipart(count: int) -> tuple[bytes, dict]:
    """A batch add of `count` messages."""
    body = b"".join(b"--b\r\n\r\nm%d\r\n" % n for n in range(count)) + b"--b--\r\n"
    return body, {"Content-Type": "multipart/mixed; boundary=b"}


def many_pattern(count: int, prefix: str = "many") -> str:
    """A pattern (URL-quoted) matching `count` of the MANY queues of a prefix: 0, 1, 1000 or
    all."""
    pattern = {0: f"{prefix}-none", 1: f"{prefix}-00000", 1000: f"{prefix}-00[0-9]{{3}}",
               MANY: f"{prefix}-.*"}[count]
    return quote(pattern)


def matched(walk):
    """A walk over the queues a pattern matches: none matching is the documented 404, not a
    refusal of the count (so it counts as refused)."""
    def run(f, n):
        if n == 0:
            return not walk(f, n, expect_404=True)
        return walk(f, n)
    return run


def fan_out_rest(f, n, expect_404=False) -> bool:
    """POST /_mq/messages?qre= over n of the MANY queues."""
    resp = f.daemon.request("POST", f"/_mq/messages?qre={many_pattern(n)}", b"copy")
    if expect_404:
        assert resp.status == 404, (resp.status, resp.body)
        return True
    return rest(resp)


def fan_out_rpc(f, n, expect_404=False) -> bool:
    """RPC push_all over n of the MANY queues."""
    answer = f.call("push_all", unquote(many_pattern(n)), "copy")
    if expect_404:
        assert answer[0]["error"] == "not_found", answer
        return True
    return rpc(answer)


def in_flight(f: Fronts, count: int) -> tuple[str, list[Message]]:
    """A fresh queue and `count` deliveries of it, fetched through the Python client (past
    the batch limit, the first ones again: receipts of deliveries that are over)."""
    queue = f.queue_with(0)
    limit = OPS["add_batch"].limits["messages"].high
    if count:
        f.client.add_many(queue, [b"m%d" % n for n in range(min(count, limit))])
    got: list[Message] = []
    while len(got) < min(count, limit):
        got += f.client.fetch_many(queue, 100)
    return queue, (got * 2)[:count]


def sqs_queue(f: Fronts, receive: bool = True) -> tuple[str, str]:
    """(queue URL, receipt handle) of a fresh SQS queue holding one message, received (else
    ready, and no handle)."""
    status, made = f.sqs("CreateQueue", QueueName=next(names).replace("-", "_"))
    assert status == 200, made
    url = made["QueueUrl"]
    assert f.sqs("SendMessage", QueueUrl=url, MessageBody="x")[0] == 200
    if not receive:
        return url, ""
    status, got = f.sqs("ReceiveMessage", QueueUrl=url, VisibilityTimeout=30)
    return url, got["Messages"][0]["ReceiptHandle"]


#: (op, field) -> front end -> walk(fronts, value) -> accepted?, or a string: why that front
#: end cannot reach the limit (checked against the declaration where it has its own).
WALKS = {
    ("add", "dedup_id"): {
        "rest": lambda f, n: rest(f.daemon.request("POST", f"/{f.queue_with(0)}/messages", b"x",
                                                   {"X-Dedup-Id": "k" * n})),
        "rpc": lambda f, n: rpc(f.call("push", f.queue_with(0), "x", {"dedup_id": "k" * n})),
        "client": lambda f, n: raised(lambda: f.client.put(f.queue_with(0), b"x", dedup_id="k" * n)),
        "local": lambda f, n: raised(lambda: f.local.put(f.queue_with(0), b"x", dedup_id="k" * n)),
        "sqs": "MessageDeduplicationId is 1 to 128 characters (SQS's own limit)",
    },
    ("add", "group"): {
        "local": lambda f, n: raised(lambda: f.local.put(f.queue_with(0), b"x", group="k" * n)),
        "sqs": "MessageGroupId is 1 to 128 characters (SQS's own limit)",
        "rest": "no message groups", "rpc": "no message groups", "client": "no message groups",
    },
    ("add_batch", "messages"): {
        "rest": lambda f, n: rest(f.daemon.request("POST", f"/{f.queue_with(0)}/messages",
                                                   *multipart(n))),
        "client": lambda f, n: raised(lambda: f.client.add_many(f.queue_with(0), [b"x"] * n)),
        "sqs": "SendMessageBatch takes 1 to 10 entries (SQS's own limit)",
        "rpc": "no batch add", "local": "no batch add",
    },
    ("add_fanout", "queues"): {
        "rest": matched(fan_out_rest), "rpc": matched(fan_out_rpc),
        "sqs": "no fan-out", "client": "no fan-out", "local": "no fan-out",
    },
    ("ack_batch", "receipts"): {
        "rest": lambda f, n: rest(f.daemon.request(
            "POST", f"/{(got := in_flight(f, n))[0]}/messages/ack",
            json.dumps({"receipts": [m.receipt for m in got[1]]}).encode(),
            {"Content-Type": "application/json"})),
        "client": lambda f, n: raised(lambda: f.client.ack_many(in_flight(f, n)[1])),
        "sqs": "DeleteMessageBatch takes 1 to 10 entries (SQS's own limit)",
        "rpc": "no batch ack", "local": "no batch ack",
    },
    ("extend", "seconds"): {
        "rest": lambda f, s: rest(f.daemon.request(
            "POST", f"/{(m := f.fetched(f.queue_with())).queue}/messages/{m.id}"
                    f"?reply=ext&seconds={s}&receipt={m.receipt}", b"")),
        "client": lambda f, s: raised(lambda: f.client.extend(f.fetched(f.queue_with()), s)),
        "local": lambda f, s: raised(lambda: f.local.extend(
            f.local.get(f.queue_with()), s)),
        "sqs": lambda f, s: sqs(f.sqs("ChangeMessageVisibility", QueueUrl=(q := sqs_queue(f))[0],
                                      ReceiptHandle=q[1], VisibilityTimeout=s)),
        "rpc": "retain takes no seconds: the queue's timeout",
    },
    ("fetch", "wait"): {
        "rest": lambda f, s: rest(f.daemon.request("GET", f"/{f.queue_with()}/messages?wait={s}")),
        "rpc": lambda f, s: rpc(f.call("pull", f.queue_with(), s)),
        "client": lambda f, s: raised(lambda: f.client.get(f.queue_with(), wait=s)),
        "sqs": lambda f, s: sqs(f.sqs("ReceiveMessage", QueueUrl=sqs_queue(f, receive=False)[0],
                                      WaitTimeSeconds=s)),
        "local": "mq.local holds no connection: its get waits any time (README.md)",
    },
    ("fetch_batch", "wait"): {
        "rest": lambda f, s: rest(f.daemon.request(
            "GET", f"/{f.queue_with()}/messages?max=2&wait={s}")),
        "client": lambda f, s: raised(lambda: f.client.fetch_many(f.queue_with(), 2, wait=s)),
        "rpc": "no batch fetch", "sqs": "as fetch's wait (ReceiveMessage)", "local": "no batch fetch",
    },
    ("fetch_batch", "max"): {
        "rest": lambda f, n: rest(f.daemon.request("GET", f"/{f.queue_with()}/messages?max={n}")),
        "client": lambda f, n: raised(lambda: f.client.fetch_many(f.queue_with(), n)),
        "sqs": "MaxNumberOfMessages is 1 to 10 (SQS's own limit)",
        "rpc": "no batch fetch", "local": "no batch fetch",
    },
    ("peek", "max"): {
        "rest": lambda f, n: rest(f.daemon.request("GET", f"/{f.queue_with()}/peek?max={n}")),
        "client": lambda f, n: raised(lambda: f.client.peek(f.queue_with(), n)),
        "local": lambda f, n: raised(lambda: f.local.peek(f.queue_with(), n)),
        "rpc": "no peek", "sqs": "no peek",
    },
    ("pull_any", "wait"): {
        "rest": lambda f, s: rest(f.daemon.request(
            "GET", f"/_mq/messages?qre={f.queue_with()}&wait={s}")),
        "rpc": lambda f, s: rpc(f.call("pull_any", f.queue_with(), s)),
        "client": "no pull-any", "sqs": "no pull-any", "local": "no pull-any",
    },
    # The wait of the watches a pull-any parks, its own wait (the same `Wait`) or less.
    ("watch", "wait"): {
        "rest": lambda f, s: rest(f.daemon.request(
            "GET", f"/_mq/messages?qre={f.queue_with()}&wait={s}")),
        "rpc": lambda f, s: rpc(f.call("pull_any", f.queue_with(), s)),
        "client": "no pull-any", "sqs": "no pull-any", "local": "no pull-any",
    },
}
#: Limits no request can reach: the front keeps under them (and the walk shows a request of
#: more works, at the edge and past it), over the MANY idle queues, all of one fetch actor.
INTERNAL = {
    ("fetch_any", "queues"): {
        "rest": lambda f, n: rest(f.daemon.request(
            "GET", f"/_mq/messages?qre={many_pattern(n, 'idle')}")),
        "rpc": lambda f, n: rpc(f.call("pull_any", unquote(many_pattern(n, "idle")))),
    },
    ("watch", "queues"): {
        "rest": lambda f, n: rest(f.daemon.request(
            "GET", f"/_mq/messages?qre={many_pattern(n, 'idle')}&wait=0.2")),
        "rpc": lambda f, n: rpc(f.call("pull_any", unquote(many_pattern(n, "idle")), 0.2)),
    },
}
FRONTS = ("rest", "rpc", "sqs", "client", "local")


def test_every_declared_limit_has_its_walks():
    declared = {(op, field) for op, field, _ in DECLARED}
    assert declared == set(WALKS) | set(INTERNAL)
    for (op, field), walks in WALKS.items():
        assert set(walks) == set(FRONTS), (op, field)


FRONT_WALKS = [(op, field, front) for (op, field), walks in sorted(WALKS.items())
               for front, walk in walks.items() if callable(walk)]


@pytest.mark.parametrize("op,field,front", FRONT_WALKS, ids=[f"{o}.{f}-{fr}" for o, f, fr in FRONT_WALKS])
def test_each_user_facing_limit_holds_at_and_past_its_edges_through_each_front_end(
        lim, op, field, front):
    limit, walk = OPS[op].limits[field], WALKS[(op, field)][front]
    own = {("sqs", "extend", "seconds"): (0, 43200), ("sqs", "fetch", "wait"): (0, 20)}
    low, high = own.get((front, op, field), (limit.low, limit.high))
    at, past = edges(Limit(low, high, limit.what, limit.counts))
    if front == "sqs":  # SQS takes whole seconds.
        past = [int(low) - 1, int(high) + 1]
    for value in at:
        assert walk(lim, value), f"{front} refused {field}={value}"
    for value in past:
        assert not walk(lim, value), f"{front} took {field}={value}"


INTERNAL_WALKS = [(op, field, front) for (op, field), walks in sorted(INTERNAL.items())
                  for front in walks]


@pytest.mark.parametrize("op,field,front", INTERNAL_WALKS,
                         ids=[f"{o}.{f}-{fr}" for o, f, fr in INTERNAL_WALKS])
def test_an_internal_limit_is_not_reached_by_a_request_past_it(lim, op, field, front):
    limit = OPS[op].limits[field]
    assert limit.high < MANY
    for count in (int(limit.high), MANY):
        assert INTERNAL[(op, field)][front](lim, count), f"{front} refused {count} queues"
