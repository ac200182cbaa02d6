"""The declared operations (mq.operations): their payloads both ways, the checks a payload
meets before any handler runs, and the actors' loop answering a bad one `invalid`."""

import os
from dataclasses import dataclass

import msgpack
import pytest

from actor_support import Actors, request
from mq import operations as ops
from mq import protocol
from mq.errors import Invalid
from mq.operations.fields import Operation, operation

MESSAGE_ID = "01a2075f-397e-7000-b672-315b943bf3ee"


@pytest.mark.parametrize("sent", [
    ops.Add(queue="orders", body=b"hello", content_type="text/plain", due=12.5,
            dedup_id="k", group="g", attributes={"tp": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
    ops.AddBatch(queue="orders", messages=[{"body": b"a"}, {"body": b"b", "due": 3.0}]),
    ops.AddFanout(queues=["a", "b"], body=b"x"),
    ops.Fetch(queue="q", wait=2.5, holder="h"),
    ops.FetchBatch(queue="q", max=100),
    ops.FetchAny(queues=["a", "b"], claim=False),
    ops.Extend(queue="q", id=MESSAGE_ID, receipt=f"{MESSAGE_ID}.1", seconds=30.0),
    ops.Peek(queue="q", max=1000, after=MESSAGE_ID),
    ops.PropsPut(queue="q", properties={"timeout": 5}),
    ops.Delayed(entries=[["q", MESSAGE_ID, 1, 7.0]]),
    ops.Ready(queue="q", ids=[[MESSAGE_ID, 1]]),
    ops.Cancel(request=b"\x00" * 8),
    ops.Stats(),
])
def test_a_request_comes_out_of_its_frames_as_it_went_in(sent):
    rid, payload = protocol.encode_request(b"\x00" * 7 + b"\x01", sent)
    _, _, decoded = protocol.decode_request([b"peer", rid, payload])
    assert decoded["op"] == sent.op and decoded["v"] == protocol.VERSION
    assert ops.OPS[decoded["op"]].from_payload(decoded) == sent


def test_the_requests_of_one_turn_travel_in_one_message_and_a_bad_one_fails_alone():
    add, fetch = ops.Add(queue="q", body=b"x"), ops.Fetch(queue="q")
    [packed] = protocol.encode_requests([(b"\x00" * 7 + b"\x01", add), (b"", ops.Cancel(request=b"r"))])
    decoded = protocol.decode_requests([b"peer", packed])
    assert [(peer, rid, d["op"]) for peer, rid, d in decoded] == [
        (b"peer", b"\x00" * 7 + b"\x01", "add"), (b"peer", b"", "cancel")]
    assert ops.Add.from_payload(decoded[0][2]) == add
    bad = msgpack.packb([[b"1", {"v": 0, "op": "fetch"}],
                         [b"2", dict(fetch.to_payload(), v=protocol.VERSION, op="fetch")]])
    first, second = protocol.decode_requests([b"peer", bad])
    assert isinstance(first[2], ValueError) and second[2]["op"] == "fetch"
    with pytest.raises(ValueError):
        protocol.decode_requests([b"peer", msgpack.packb({"not": "an array"})])
    with pytest.raises(ValueError):
        protocol.decode_requests([b"peer"])


def test_the_replies_of_a_batch_travel_in_one_message_split_past_reply_bytes():
    big = b"x" * (protocol.REPLY_BYTES // 2 + 1)
    replies = [(bytes([n]), {"id": str(n), "body": big}) for n in range(4)] + \
        [(b"e", Invalid("no"))]
    messages = protocol.encode_replies(b"peer", replies)
    assert {m[0] for m in messages} == {b"peer"}
    # A message takes no more replies once its bodies passed REPLY_BYTES: two bodies each.
    assert [len(protocol.decode_replies(m[1:])) for m in messages] == [2, 2, 1]
    got = [pair for m in messages for pair in protocol.decode_replies(m[1:])]
    assert [rid for rid, _ in got] == [rid for rid, _ in replies]
    assert got[0][1]["body"] == big and isinstance(got[-1][1], Invalid)


def test_nil_or_absent_fields_take_their_defaults():
    assert ops.Peek.from_payload({"queue": "q", "max": None}) == ops.Peek(queue="q", max=10)
    assert ops.Fetch.from_payload({"queue": "q"}).wait == 0
    assert ops.FetchAny.from_payload({"queues": ["q"]}).claim is True
    # A Sequence field (a list on the wire) defaults to an immutable ().
    assert ops.Ready.from_payload({"queue": "q"}).ids == ()


@pytest.mark.parametrize("op, payload, says", [
    ("add", {"queue": "q"}, "body is required"),
    ("add", {"queue": "../q", "body": b"x"}, "invalid queue name"),
    ("add", {"queue": "q", "body": "text"}, "body must be bytes"),
    ("add", {"queue": "q", "body": b"x", "must_exist": 1}, "must_exist must be true or false"),
    # An add's content, checked once, as the save actor decodes it (mq.adds' checks).
    ("add", {"queue": "q", "body": b"x", "content_type": "a\r\nb"}, "control characters"),
    ("add", {"queue": "q", "body": b"x", "due": float("inf")}, "expected finite Unix seconds"),
    ("add", {"queue": "q", "body": b"x", "due": 4e9 * 10}, "scheduled at most"),
    ("add", {"queue": "q", "body": b"x", "dedup_id": "k" * 257}, "dedup_id must be 1 to 256"),
    ("add", {"queue": "q", "body": b"x", "dedup_id": ""}, "dedup_id must be 1 to 256"),
    ("add", {"queue": "q", "body": b"x", "group": "g" * 257}, "group must be 1 to 256"),
    ("add", {"queue": "q", "body": b"x", "attributes": []}, "attributes must be a map"),
    ("add_batch", {"queue": "q", "messages": []}, "messages must be a list of 1 to 1000"),
    ("add_batch", {"queue": "q", "messages": [{"body": b"a"}, "b"]}, "message 1: expected a map"),
    ("add_batch", {"queue": "q", "messages": [{"body": b"a"}, {}]}, "message 1: add: body is"),
    ("add_batch", {"queue": "q", "messages": [{"body": b"a", "dedup_id": "k" * 257}]},
     "message 0: dedup_id must be 1 to 256"),
    ("add_batch", {"queue": "q", "messages": [{"body": b"a"}, {"body": b"b", "due": "soon"}]},
     "message 1: add: due must be a number"),
    ("add_fanout", {"queues": ["a"], "body": b"x", "content_type": "a\x7f"}, "control characters"),
    ("add_fanout", {"queues": ["a"], "body": b"x", "due": float("nan")}, "finite Unix seconds"),
    ("add_fanout", {"queues": ["a", "a"], "body": b"x"}, "must not repeat"),
    ("add_fanout", {"queues": ["q"] * 1001, "body": b"x"}, "1 to 1000"),
    ("fetch", {"queue": "q", "wait": 20.5}, "wait must be between 0 and 20 seconds"),
    ("fetch", {"queue": "q", "wait": True}, "wait must be a number"),
    ("fetch_batch", {"queue": "q"}, "max is required"),
    ("fetch_batch", {"queue": "q", "max": 101}, "max must be from 1 to 100"),
    ("fetch_any", {"queues": "q"}, "queues must be a list"),
    ("watch", {"queues": ["q", "bad/name"]}, "invalid queue name"),
    ("ack", {"queue": "q", "id": "nope"}, "invalid message id"),
    ("ack_batch", {"queue": "q", "receipts": [f"{MESSAGE_ID}.1"] * 1001}, "1 to 1000"),
    ("extend", {"queue": "q", "id": MESSAGE_ID, "seconds": -1}, "seconds must be from 0"),
    ("peek", {"queue": "q", "max": 1001}, "max must be from 1 to 1000"),
    ("peek", {"queue": "q", "after": "x"}, "invalid message id"),
    ("purge", {"queue": "q", "keys": "yes"}, "keys must be true or false"),
    ("props_put", {"queue": "q", "properties": {"bogus": 1}}, "bogus"),
    ("rules_put", {"rules": {}}, "rules must be a list"),
    ("ready", {"queue": "q", "ids": "x"}, "ids must be a list"),
    ("settled", {"entries": {"q": 1}}, "entries must be a list"),
    ("cancel", {}, "request is required"),
])
def test_a_bad_payload_is_invalid_naming_what_is_wrong(op, payload, says):
    with pytest.raises(Invalid) as raised:
        ops.OPS[op].from_payload(payload)
    assert says in raised.value.message


def test_a_request_the_actor_cannot_decode_is_invalid_and_reaches_no_handler(tmp_path):
    actors = Actors(tmp_path)
    assert "id" in actors.add({"queue": "q", "body": b"kept"})[0]
    seen = []
    handler = actors.fetcher.COMMANDS[ops.Fetch]
    actors.fetcher.COMMANDS = {
        **actors.fetcher.COMMANDS,
        ops.Fetch: lambda actor, batch, req, sender: seen.append(req) or handler(
            actor, batch, req, sender)}
    batch = actors.fetcher.handle([request("fetch", queue="q", wait=60),
                                   request("fetch", queue="q", wait="soon"),
                                   request("fetch", queue="q")])
    assert [getattr(r, "kind", "ok") for r in batch.results] == ["invalid", "invalid", "ok"]
    assert seen == [ops.Fetch(queue="q")]  # Only the valid one reached the handler.
    assert not os.listdir(actors.store.queue_dir("q"))  # It claimed the one message.


def test_a_fan_out_with_a_bad_field_is_invalid_and_adds_nothing(tmp_path):
    actors = Actors(tmp_path)
    for queue in ("a", "b"):
        actors.call("queue_put", queue=queue)
    results = actors.save.handle([request("add_fanout", queues=["a", "b"], body="not bytes")]).results
    assert results[0].kind == "invalid" and "body must be bytes" in results[0].message
    assert not os.listdir(actors.store.queue_dir("a")) and not os.listdir(actors.store.queue_dir("b"))


def test_an_op_is_declared_once():
    with pytest.raises(TypeError, match="declared twice"):
        @operation("add")
        @dataclass(slots=True, frozen=True, kw_only=True)
        class Again(Operation):
            """A second add."""
    with pytest.raises(TypeError, match="must be an Operation dataclass"):
        operation("not_a_dataclass")(type("Plain", (Operation,), {}))


def test_the_commands_taking_fields_take_their_ops_fields_in_order():
    from mq.actors.base import taking_fields
    from mq.actors.commands import by_fields
    from mq.actors.fetch import FetchActor
    from mq.actors.save import SaveActor
    taking = [(kind, handler.by_fields) for cls in (SaveActor, FetchActor)
              for kind, handler in cls.COMMANDS.items() if hasattr(handler, "by_fields")]
    assert {kind for kind, _ in taking} >= {ops.Add, ops.Fetch, ops.Ack, ops.Delete}
    for kind, function in taking:
        assert taking_fields(kind, function) is function

    @by_fields
    def swapped(actor, batch, sender, id, queue):
        return {}
    with pytest.raises(TypeError, match="delete"):
        taking_fields(ops.Delete, swapped.by_fields)


def test_an_op_given_decoded_and_its_payload_come_to_the_same(tmp_path):
    actors = Actors(tmp_path)
    payloads = [{"queue": "q", "body": b"one"}, {"queue": "q", "body": b"two", "due": 1.0},
                {"queue": "q", "body": b"x", "content_type": "bad\n"}]
    by_payload = actors.save.handle([request("add", **p) for p in payloads]).results
    decoded = [request("add", **p) for p in payloads[:2]]
    for r in decoded:
        r.decoded = ops.Add.from_payload(r.payload)
    by_op = actors.save.handle(decoded).results
    assert [sorted(r) for r in by_payload[:2]] == [sorted(r) for r in by_op]
    assert by_payload[2].kind == "invalid" and "control characters" in by_payload[2].message
