"""mq.local and the daemon answer each op alike: walked op by op, the same request through a
real daemon's REST API and through LocalClient on its root, each on a fresh queue of its own,
gives the same outcome (done, or an error of the same kind) and, for an extend, the same due
time. Both build the op (mq.operations) and call the same store side of it (mq.replies)."""

import itertools
import json
import re
import time
from urllib.parse import quote, urlencode

import pytest
from repo_support import REPO
from support import ready_daemon

from mq.client.errors import ClientError
from mq.client.message import Message
from mq.local import LocalClient
from mq.operations import MAX_PEEK, OPS, Extend

OTHER_ID = "01a225d3-1381-7000-99f2-0cc32c9c51a4"
#: The queue timeout of a queue without one, on both sides (the daemon's --timeout).
TIMEOUT = 30.0
MAX_SECONDS = Extend.limits["seconds"].high
names = (f"agree-{n}" for n in itertools.count())


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """(the daemon's REST API, mq.local on the daemon's root)."""
    workdir = tmp_path_factory.mktemp("agree")
    for daemon in ready_daemon(workdir, workers=1, timeout=TIMEOUT):
        with LocalClient(daemon.root, timeout=TIMEOUT) as local:
            yield Rest(daemon), Local(local)


class Rest:
    """Each op through the daemon's REST API; an answer is "ok" (with its value) or its kind."""

    def __init__(self, daemon):
        self.daemon = daemon

    def call(self, method: str, path: str, params: dict | None = None, body: bytes | None = None,
             headers: dict | None = None):
        """(outcome, the answer) of one request: "ok" or the error's kind."""
        query = "?" + urlencode({k: v for k, v in (params or {}).items() if v is not None}) \
            if params else ""
        resp = self.daemon.request(method, path + query, body, headers)
        if resp.status >= 400:
            return resp.json()["error"], None
        return "ok", resp

    def put(self, queue, body=b"x", delay=None, dedup_id=None):
        headers = {"X-Dedup-Id": dedup_id} if dedup_id is not None else None
        return self.call("POST", f"/{quote(queue)}/messages", {"delay": delay}, body, headers)[0]

    def get(self, queue) -> Message:
        outcome, resp = self.call("GET", f"/{quote(queue)}/messages")
        assert outcome == "ok" and resp.status == 200, outcome
        return Message(queue, resp.header("X-Message-Id"), resp.body, "", resp.header("X-Receipt"),
                       1, 0)

    def fetch(self, queue):
        return self.call("GET", f"/{quote(queue)}/messages")[0]

    def properties(self, queue):
        return self.call("GET", f"/{quote(queue)}/properties")[0]

    def reply(self, how, message, seconds=None):
        outcome, resp = self.call("POST", f"/{quote(message.queue)}/messages/{quote(message.id)}",
                                  {"reply": how, "receipt": message.receipt, "seconds": seconds})
        return outcome, resp.json()["due"] if outcome == "ok" and how == "ext" else None

    def ready_id(self, queue) -> str:
        return self.daemon.request("GET", f"/{quote(queue)}/peek").json()["messages"][0]["id"]

    def revoke(self, queue, message_id):
        return self.call("DELETE", f"/{quote(queue)}/messages/{quote(message_id)}")[0]

    def peek(self, queue, max=10, after=None):
        return self.call("GET", f"/{quote(queue)}/peek", {"max": max, "after": after})[0]

    def move(self, queue, message_id, target):
        return self.call("POST", f"/{quote(queue)}/messages/{quote(message_id)}/move",
                         {"to": target})[0]

    def admin(self, what, queue):
        method, path = {"stat": ("GET", ""), "create": ("PUT", ""), "delete": ("DELETE", ""),
                        "purge": ("POST", "/purge"), "redrive": ("POST", "/redrive")}[what]
        return self.call(method, f"/{quote(queue)}{path}")[0]

    def set_properties(self, queue, **props):
        return self.call("PATCH", f"/{quote(queue)}/properties", None, json.dumps(props).encode(),
                         {"Content-Type": "application/json"})[0]


class Local:
    """Each op through LocalClient; an outcome is "ok" or the kind of the error it raised."""

    def __init__(self, client: LocalClient):
        self.client = client

    @staticmethod
    def run(call):
        try:
            return "ok", call()
        except ClientError as err:
            return err.kind, None

    def put(self, queue, body=b"x", delay=None, dedup_id=None):
        return self.run(lambda: self.client.put(queue, body, delay=delay, dedup_id=dedup_id))[0]

    def get(self, queue) -> Message:
        message = self.client.get(queue)
        assert message is not None
        return message

    def fetch(self, queue):
        return self.run(lambda: self.client.get(queue))[0]

    def properties(self, queue):
        return self.run(lambda: self.client.properties(queue))[0]

    def reply(self, how, message, seconds=None):
        call = {"ack": self.client.ack, "nack": self.client.nack,
                "ext": lambda m: self.client.extend(m, seconds)}[how]
        outcome, due = self.run(lambda: call(message))
        return outcome, due if how == "ext" else None

    def ready_id(self, queue) -> str:
        return self.client.peek(queue)[0].id

    def revoke(self, queue, message_id):
        return self.run(lambda: self.client.revoke(queue, message_id))[0]

    def peek(self, queue, max=10, after=None):
        return self.run(lambda: self.client.peek(queue, max, after))[0]

    def move(self, queue, message_id, target):
        return self.run(lambda: self.client.move(queue, message_id, target))[0]

    def admin(self, what, queue):
        call = {"stat": self.client.stat, "create": self.client.create_queue,
                "delete": self.client.delete_queue, "purge": self.client.purge,
                "redrive": self.client.redrive}[what]
        return self.run(lambda: call(queue))[0]

    def set_properties(self, queue, **props):
        return self.run(lambda: self.client.set_properties(queue, **props))[0]


def as_given(side, queue: str, receipt):
    """A delivery of the queue's message, answered with `receipt` in place of its own."""
    got = side.get(queue)
    return Message(queue, got.id, b"", "", receipt(got), 1, 0)


def stale(side, queue: str) -> Message:
    """A delivery that is over: nacked, its message ready again."""
    got = side.get(queue)
    assert side.reply("nack", got)[0] == "ok"
    return got


def acked(side, queue: str) -> Message:
    """A delivery acked: its message gone."""
    got = side.get(queue)
    assert side.reply("ack", got)[0] == "ok"
    return got


#: name -> walk(side, queue): its outcome on a fresh queue holding one ready message.
WALKS = {
    # extend: 0 and nil are the queue's timeout; the declared limit at and past its edges.
    "extend 0": lambda s, q: s.reply("ext", s.get(q), 0)[0],
    "extend nil": lambda s, q: s.reply("ext", s.get(q))[0],
    "extend at its high limit": lambda s, q: s.reply("ext", s.get(q), MAX_SECONDS)[0],
    "extend past its high limit": lambda s, q: s.reply("ext", s.get(q), MAX_SECONDS + 0.5)[0],
    "extend below 0": lambda s, q: s.reply("ext", s.get(q), -0.5)[0],
    # Receipts: none or empty (the current delivery), malformed, another message's, over.
    "ack with an empty receipt": lambda s, q: s.reply("ack", as_given(s, q, lambda m: ""))[0],
    "nack with an empty receipt": lambda s, q: s.reply("nack", as_given(s, q, lambda m: ""))[0],
    "extend with an empty receipt": lambda s, q: s.reply("ext", as_given(s, q, lambda m: ""), 5)[0],
    "extend without a receipt": lambda s, q: s.reply("ext", as_given(s, q, lambda m: None), 5)[0],
    "ack a malformed receipt": lambda s, q: s.reply("ack", as_given(s, q, lambda m: "x"))[0],
    "ack another message's receipt": lambda s, q: s.reply(
        "ack", as_given(s, q, lambda m: f"{OTHER_ID}.1"))[0],
    "ack a stale receipt": lambda s, q: s.reply("ack", stale(s, q))[0],
    "nack a stale receipt": lambda s, q: s.reply("nack", stale(s, q))[0],
    "extend a stale receipt": lambda s, q: s.reply("ext", stale(s, q), 5)[0],
    "ack twice": lambda s, q: s.reply("ack", acked(s, q))[0],
    "extend an acked delivery": lambda s, q: s.reply("ext", acked(s, q), 5)[0],
    "nack a ready message": lambda s, q: s.reply("nack", Message(q, s.ready_id(q), b"", "", None,
                                                                 0, 0))[0],
    "revoke a malformed id": lambda s, q: s.revoke(q, "nope"),
    "revoke a message that is not there": lambda s, q: s.revoke(q, OTHER_ID),
    "revoke in a queue of a bad name": lambda s, q: s.revoke("bad name", OTHER_ID),
    # peek: the declared limit of max at and past its edges, after an id.
    "peek 1": lambda s, q: s.peek(q, 1),
    f"peek {MAX_PEEK}": lambda s, q: s.peek(q, MAX_PEEK),
    "peek 0": lambda s, q: s.peek(q, 0),
    f"peek {MAX_PEEK + 1}": lambda s, q: s.peek(q, MAX_PEEK + 1),
    "peek after a malformed id": lambda s, q: s.peek(q, 10, "nope"),
    "peek a missing queue": lambda s, q: s.peek(q + "-missing"),
    # Adds: the add op's checks and the queue's size limit.
    "put with a delay below 0": lambda s, q: s.put(q, delay=-1),
    "put with a key too long": lambda s, q: s.put(q, dedup_id="k" * 257),
    "put into a queue of a bad name": lambda s, q: s.put("bad name"),
    "put past the queue's body limit": lambda s, q: (
        s.set_properties(q, max_body_bytes=4), s.put(q, b"12345"))[1],
    # The queue's administration.
    "stat a missing queue": lambda s, q: s.admin("stat", q + "-missing"),
    "purge a missing queue": lambda s, q: s.admin("purge", q + "-missing"),
    "delete a missing queue": lambda s, q: s.admin("delete", q + "-missing"),
    "create a queue of a bad name": lambda s, q: s.admin("create", "bad name"),
    "redrive a queue without dead letters": lambda s, q: s.admin("redrive", q),
    "set a property out of range": lambda s, q: s.set_properties(q, timeout=-1),
    "set an unknown property": lambda s, q: s.set_properties(q, nope=1),
    "properties of a queue of a bad name": lambda s, q: s.properties("bad name"),
    "get from a missing queue": lambda s, q: s.fetch(q + "-missing"),
    # A move: of a ready message, into its own queue, of a message not there, to a bad name.
    "move a ready message": lambda s, q: s.move(q, s.ready_id(q), q + "-to"),
    "move into the same queue": lambda s, q: s.move(q, s.ready_id(q), q),
    "move a message not there": lambda s, q: s.move(q, "01800000-0000-7000-8000-000000000001", q + "-to"),
    "move to a queue of a bad name": lambda s, q: s.move(q, s.ready_id(q), "bad name"),
    "get from a queue of a bad name": lambda s, q: s.fetch("bad name"),
}
#: The op each walk's first word asks for (REST and mq.local alike).
WALKED_OP = {"extend": "extend", "ack": "ack", "nack": "nack", "revoke": "delete", "peek": "peek",
             "put": "add", "stat": "queue_get", "purge": "purge", "delete": "queue_delete",
             "create": "queue_put", "redrive": "redrive", "set": "props_patch",
             "properties": "props_get", "get": "fetch", "move": "move"}


def ops_mq_local_builds() -> set[str]:
    """The ops mq.local's modules build (`Op.from_payload`, `reply(message, Op)`, `add_of`)."""
    source = "".join(path.read_text() for path in (REPO / "core" / "local").glob("*.py"))
    classes = set(re.findall(r"\b([A-Z]\w+)\.from_payload", source))
    classes |= set(re.findall(r"reply\(message, ([A-Z]\w+)\)", source))
    built = {cls.op for cls in OPS.values() if cls.__name__ in classes}
    return built | ({"add"} if "add_of(" in source else set())


def test_every_op_mq_local_builds_is_walked():
    walked = {WALKED_OP[walk.split()[0]] for walk in WALKS}
    assert ops_mq_local_builds() == walked


def fresh(rest: Rest) -> str:
    """A new queue holding one ready message."""
    queue = next(names)
    assert rest.put(queue) == "ok"
    return queue


@pytest.mark.parametrize("walk", list(WALKS))
def test_mq_local_and_the_daemon_answer_each_op_alike(sides, walk):
    rest, local = sides
    daemon_said = WALKS[walk](rest, fresh(rest))
    local_said = WALKS[walk](local, fresh(rest))
    assert local_said == daemon_said, f"{walk}: the daemon said {daemon_said}, mq.local {local_said}"


@pytest.mark.parametrize("seconds", [0, None, 120])
def test_an_extend_moves_the_due_time_alike(sides, seconds):
    # 0 and nil: the queue's timeout, as the daemon does it; else `seconds` from now.
    expected = seconds or TIMEOUT
    for side in sides:
        queue = fresh(sides[0])
        before = time.time()
        outcome, due = side.reply("ext", side.get(queue), seconds)
        assert outcome == "ok", (type(side).__name__, outcome)
        assert before + expected - 1 <= due <= time.time() + expected + 1, (type(side).__name__, due)
