"""The front ends the model drives, behind one small interface: mq's REST API one message at a
time and in batches, and MessagePack-RPC (the SQS API and mq.local are in fronts_more.py).

Each front answers in the model's words (queue_model's OK, DEAD, CONFLICT, NOT_FOUND) or in its
own where it differs (`expected` translates the model's outcome into them); any 5xx fails.
"""

import base64
import email.parser
import email.policy
import itertools
import json
import socket
import urllib.parse
from dataclasses import dataclass, field

import msgpack

from queue_model import CONFLICT, DEAD, NOT_FOUND, OK
from support import Response

STATUS = {204: OK, 409: CONFLICT, 404: NOT_FOUND}
TEXT = "text/plain"


@dataclass
class Added:
    """What an add answered: the id (None when the front does not say), duplicate (None when
    it does not say), and an accumulating queue's `accumulated` and window close."""

    id: str | None
    duplicate: bool | None = None
    accumulated: str | None = None
    due: float | None = None


@dataclass
class Got:
    """One delivery: id, body (text), receipt, attempts; a compound's parts as texts."""

    id: str
    body: str
    receipt: str
    attempts: int
    kind: str | None = None  # "normal" or "compound" where the front says
    parts: list = field(default_factory=list)


def compound_parts(body: bytes) -> list[str]:
    """The part bodies of a compound in its stored form (msgpack [[type, body], ...])."""
    return [bytes(part[1]).decode() for part in msgpack.unpackb(body, raw=False)]


def multipart_parts(content_type: str, body: bytes) -> list[str]:
    """The part bodies of a compound served as multipart/mixed (the default `cf`), parsed by
    Python's email package, each part's type text/plain as the machines add them."""
    document = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    assert document.get_content_type() == "multipart/mixed", content_type
    parts = list(document.iter_parts())
    assert all(part.get_content_type() == TEXT for part in parts), content_type
    return [part.get_payload(decode=True).decode() for part in parts]


class Front:
    """What every front can do; a capability a front lacks is False or raises."""

    name = "front"
    batch = 1  # most messages one fetch may ask for
    ids_on_add = True  # an add answers the message's id
    says_duplicate = True  # an add says whether it was a duplicate
    extend_seconds = True  # an extend takes a number of seconds
    delete_by_id = True  # a message can be removed by id, without a receipt
    accumulates = True  # adds to an accumulating queue become parts
    purge_forgets_keys = False
    deletes_expired = False  # an ack whose timer ran out, not handed out since, still deletes
    groups = False  # the front can add messages with a group
    delay_unit = 0.0  # 1 for fronts that take whole seconds only
    slow_delays = False  # a delayed add takes most of a second to be seen due (add_due_soon)

    def __init__(self, daemon):
        self.daemon = daemon

    def http(self, method: str, path: str, body: bytes | None = None,
             headers: dict | None = None) -> Response:
        """One request to the daemon's own API; a 5xx fails the run."""
        resp = self.daemon.request(method, path, body, headers)
        assert resp.status < 500, (method, path, resp.status, resp.body)
        return resp

    def expected(self, op: str, outcome: str, m=None, delivery=None) -> str:
        """The front's answer for the model's outcome of a reply (m: the message before it)."""
        return outcome

    def create_queue(self, queue: str, props: dict) -> None:
        """Create a queue with these own properties."""
        assert self.http("PUT", f"/{queue}").status in (200, 201)
        resp = self.http("PUT", f"/{queue}/properties", json.dumps(props).encode())
        assert resp.status == 200, resp.body

    def patch(self, queue: str, props: dict) -> None:
        """Change some of a queue's own properties (mq's API: properties are shared)."""
        resp = self.http("PATCH", f"/{queue}/properties", json.dumps(props).encode())
        assert resp.status == 200, resp.body

    def purge(self, queue: str) -> int | None:
        """Remove every message of the queue; how many, where the front says."""
        resp = self.http("POST", f"/{queue}/purge")
        assert resp.status == 200, resp.body
        return resp.json()["purged"]

    def extend_soon(self, queue: str, got: Got, seconds: float) -> str:
        """Let a delivery's timer run out in `seconds` (through mq's API where the front cannot)."""
        return RestSingle.reply(self, queue, got.id, got.receipt, "extend", seconds)


class RestSingle(Front):
    """mq's REST API, one message per request (README.md, docs/DELIVERY.md)."""

    name = "rest"

    def add(self, queue: str, body: str, delay: float = 0.0, dedup: str | None = None) -> Added:
        """POST /{queue}/messages."""
        query = {k: v for k, v in (("delay", delay or None), ("dedup_id", dedup)) if v}
        path = f"/{queue}/messages" + ("?" + urllib.parse.urlencode(query) if query else "")
        resp = self.http("POST", path, body.encode(), {"Content-Type": TEXT})
        assert resp.status in (200, 201), (resp.status, resp.body)
        reply = resp.json()
        assert reply["id"] == resp.header("X-Message-Id")
        assert (resp.status == 200) == bool(resp.header("X-Duplicate")) == bool(reply.get("duplicate"))
        accumulated = resp.header("X-Accumulated")
        assert reply.get("accumulated", "no") == accumulated, (reply, accumulated)
        return Added(reply["id"], resp.status == 200, accumulated, reply.get("due"))

    def fetch(self, queue: str, n: int = 1) -> list[Got]:
        """GET /{queue}/messages (a compound in its msgpack form)."""
        resp = self.http("GET", f"/{queue}/messages?cf=msgpack")
        if resp.status == 204:
            return []
        assert resp.status == 200, (resp.status, resp.body)
        kind = resp.header("X-Message-Kind")
        got = Got(resp.header("X-Message-Id"), "", resp.header("X-Receipt"),
                  int(resp.header("X-Attempts")), kind)
        if kind == "compound":
            got.parts = compound_parts(resp.body)
        else:
            got.body = resp.body.decode()
            assert resp.header("Content-Type").startswith(TEXT), resp.header("Content-Type")
        return [got]

    def reply(self, queue: str, message_id: str, receipt: str | None, op: str,
              seconds: float | None = None) -> str:
        """reply=ack|nack|ext, or DELETE for a delete by id."""
        if op == "delete":
            return STATUS[self.http("DELETE", f"/{queue}/messages/{message_id}").status]
        query = {"reply": {"extend": "ext"}.get(op, op)}
        if receipt:
            query["receipt"] = receipt
        if seconds is not None:
            query["seconds"] = seconds
        resp = self.http("POST", f"/{queue}/messages/{message_id}?" + urllib.parse.urlencode(query))
        if resp.status == 200 and op == "nack":
            return DEAD
        if resp.status == 200 and op == "extend":
            assert resp.header("X-Receipt") == receipt or receipt is None
            return OK
        return STATUS[resp.status]

    def pull_any(self, pattern: str) -> list[Got]:
        """GET /_mq/messages?qre=: the oldest ready message of the matching queues."""
        resp = self.http("GET", "/_mq/messages?" + urllib.parse.urlencode({"qre": pattern}))
        if resp.status == 204:
            return []
        assert resp.status == 200, (resp.status, resp.body)
        return [Got(resp.header("X-Message-Id"), resp.body.decode(), resp.header("X-Receipt"),
                    int(resp.header("X-Attempts")), resp.header("X-Message-Kind"))]


class RestBatch(RestSingle):
    """mq's REST batches: JSON-lines adds, ?max=N fetches, ack batches (README.md, "Batches")."""

    name = "rest-batch"
    batch = 10

    def add_many(self, queue: str, items: list[tuple[str, float, str | None]]) -> list[Added]:
        """POST /{queue}/messages as JSON lines: each (body, delay, dedup)."""
        lines = []
        for body, delay, dedup in items:
            line = {"body": body, "content_type": TEXT}
            if delay:
                line["delay"] = delay
            if dedup:
                line["dedup_id"] = dedup
            lines.append(json.dumps(line))
        resp = self.http("POST", f"/{queue}/messages", "\n".join(lines).encode(),
                         {"Content-Type": "application/x-ndjson"})
        assert resp.status in (200, 201), (resp.status, resp.body)
        records = resp.json()["messages"]
        assert len(records) == len(items)
        assert (resp.status == 200) == all(r.get("duplicate") for r in records), resp.body
        # A record leaves out `accumulated` when it is "no", as a single add's JSON body does.
        return [Added(r["id"], bool(r.get("duplicate")), r.get("accumulated", "no"), r.get("due"))
                for r in records]

    def add(self, queue: str, body: str, delay: float = 0.0, dedup: str | None = None) -> Added:
        """A batch of one."""
        return self.add_many(queue, [(body, delay, dedup)])[0]

    def fetch(self, queue: str, n: int = 1) -> list[Got]:
        """GET /{queue}/messages?max=n as JSON (a compound as multipart/mixed, the default)."""
        resp = self.http("GET", f"/{queue}/messages?max={n}", headers={"Accept": "application/json"})
        if resp.status == 204:
            return []
        assert resp.status == 200, (resp.status, resp.body)
        records = resp.json()["messages"]
        assert int(resp.header("X-Count")) == len(records)
        out = []
        for r in records:
            got = Got(r["id"], r["body"], r["receipt"], r["attempts"], r["kind"])
            if r["kind"] == "compound":
                body = base64.b64decode(r["body"]) if r.get("encoding") == "base64" else r["body"].encode()
                got.parts, got.body = multipart_parts(r["content_type"], body), ""
            out.append(got)
        return out

    def ack_many(self, queue: str, receipts: list[str]) -> list[str]:
        """POST /{queue}/messages/ack: each receipt's outcome in the model's words."""
        resp = self.http("POST", f"/{queue}/messages/ack", json.dumps({"receipts": receipts}).encode(),
                         {"Content-Type": "application/json"})
        assert resp.status == 200, (resp.status, resp.body)
        results = resp.json()["results"]
        assert [r["receipt"] for r in results] == receipts
        return [{"acked": OK}.get(r["status"], r["status"]) for r in results]


class Rpc(Front):
    """MessagePack-RPC (README.md, "MessagePack-RPC"): push answers "ok", with no id."""

    name = "rpc"
    ids_on_add = False
    says_duplicate = False
    extend_seconds = False

    def __init__(self, daemon, port: int):
        super().__init__(daemon)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.ids = itertools.count(1)

    def call(self, method: str, *params):
        """(error, result) of one request."""
        msgid = next(self.ids)
        self.sock.sendall(msgpack.packb([0, msgid, method, list(params)], use_bin_type=True))
        while True:
            for kind, got, error, result in self.unpacker:
                assert (kind, got) == (1, msgid)
                assert error is None or error.get("error") not in ("internal", "unavailable"), error
                return error, result
            data = self.sock.recv(65536)
            assert data, "the RPC server closed the connection"
            self.unpacker.feed(data)

    def expected(self, op, outcome, m=None, delivery=None):
        """A release that dead-letters answers "ok" like any other."""
        return OK if outcome == DEAD else outcome

    def add(self, queue: str, body: str, delay: float = 0.0, dedup: str | None = None) -> Added:
        """push(name, content, options)."""
        options = {k: v for k, v in (("delay", delay or None), ("dedup_id", dedup)) if v}
        error, result = self.call("push", queue, body, options)
        assert (error, result) == (None, "ok"), error
        return Added(None)

    def fetch(self, queue: str, n: int = 1) -> list[Got]:
        """pull(name)."""
        error, result = self.call("pull", queue)
        assert error is None, error
        if result == "empty":
            return []
        assert result["queue"] == queue and result["type"] == "normal"
        content = result["content"]
        got = Got(result["id"], "", result["receipt"], result["attempts"], result["type"])
        if isinstance(content, list):  # A compound, unpacked from its msgpack form.
            got.parts = [bytes(p[1]).decode() for p in content]
        else:
            got.body = content
        return [got]

    def reply(self, queue, message_id, receipt, op, seconds=None) -> str:
        """done, release, retain; done without a receipt is a delete by id."""
        method = {"ack": "done", "delete": "done", "nack": "release", "extend": "retain"}[op]
        params = [queue, message_id] + ([receipt] if receipt and op != "delete" else [])
        error, result = self.call(method, *params)
        if error is None:
            assert result == "ok"
            return OK
        return error["error"]

    def purge(self, queue: str) -> int | None:
        """No purge over RPC: mq's API does it (the same store)."""
        return Front.purge(self, queue)

    def pull_any(self, pattern: str) -> list[Got]:
        """pull_any(regexp)."""
        error, result = self.call("pull_any", pattern)
        assert error is None, error
        if result == "empty":
            return []
        return [Got(result["id"], result["content"], result["receipt"], result["attempts"])]
