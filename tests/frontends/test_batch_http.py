"""The batch routes on a real daemon: add (JSON lines, multipart), fetch ?max=N, ack many."""

import base64
import json
import threading
import time
from email import policy
from email.parser import BytesParser

import msgpack
import pytest

from support import Daemon, body_is_whole, checked_body, poll_for

MAX_BODY, MAX_BATCH = 50_000, 200_000
NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    """One daemon for the module, with small body limits to test them."""
    tmp = tmp_path_factory.mktemp("batch")
    daemon = Daemon(tmp / "root", tmp, workers=2, timeout=30,
                    args=(f"--max-body-bytes={MAX_BODY}", f"--max-batch-bytes={MAX_BATCH}"))
    daemon.start().wait_ready()
    yield daemon
    daemon.cleanup()


def lines(*records) -> bytes:
    """A JSON lines body."""
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def multipart(parts: list[tuple[dict, bytes]], boundary: str = "b0und") -> bytes:
    """A multipart/mixed body, built by hand."""
    out = b""
    for headers, body in parts:
        out += f"--{boundary}\r\n".encode()
        out += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
        out += b"\r\n" + body + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def split_multipart(content_type: str, body: bytes) -> list[tuple[dict, bytes]]:
    """The parts of a multipart answer, read independently of the daemon's parser."""
    boundary = content_type.split("boundary=")[1].encode()
    parts = []
    for chunk in body.split(b"--" + boundary)[1:-1]:
        head, _, rest = chunk[2:].partition(b"\r\n\r\n")
        headers = dict(line.decode().split(": ", 1) for line in head.split(b"\r\n"))
        assert rest.endswith(b"\r\n")
        content = rest[:-2]
        assert len(content) == int(headers["Content-Length"])
        parts.append((headers, content))
    return parts


def fetch_json(mq, queue: str, n: int, **query) -> list[dict]:
    """A batch fetch as JSON; [] on 204."""
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    resp = mq.request("GET", f"/{queue}/messages?max={n}{extra}", headers={"Accept": "application/json"})
    if resp.status == 204:
        return []
    assert resp.status == 200, (resp.status, resp.body)
    return resp.json()["messages"]


def test_a_json_lines_batch_is_stored_in_order_and_fetched_and_acked_in_batches(mq):
    resp = mq.request("POST", "/lines/messages", lines(
        {"body": "hello"}, {"body": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64",
                            "content_type": "application/x-raw", "dedup_id": "k"},
        {"body": "later", "delay": 600}, {"body": "again", "dedup_id": "k"}), NDJSON)
    assert resp.status == 201, resp.body
    added = resp.json()["messages"]
    assert [m.get("duplicate") for m in added] == [None, None, None, True]
    assert added[3]["id"] == added[1]["id"] and added[2]["due"] > time.time() + 500
    got = fetch_json(mq, "lines", 10)
    assert [m["id"] for m in got] == [added[0]["id"], added[1]["id"]]
    assert [(m["body"], m.get("encoding")) for m in got] == [("hello", None), ("AP8=", "base64")]
    assert got[1]["content_type"] == "application/x-raw" and got[0]["attempts"] == 1
    resp = mq.request("POST", "/lines/messages/ack", json.dumps(
        {"receipts": [m["receipt"] for m in got] + [got[0]["receipt"]]}).encode())
    assert resp.status == 200
    assert resp.json()["acked"] == 2
    assert [r["status"] for r in resp.json()["results"]] == ["acked", "acked", "not_found"]
    # A receipt that is not one is that receipt's "invalid", never the whole batch's 500.
    resp = mq.request("POST", "/lines/messages/ack", json.dumps(
        {"receipts": [f"{got[0]['id']}.\u00b2", f"{got[0]['id']}.{'1' * 10}", "x.1"]}).encode())
    assert resp.status == 200, resp.body
    assert [r["status"] for r in resp.json()["results"]] == ["invalid"] * 3
    assert mq.request("GET", "/lines/messages?max=5").status == 204
    # Every message a duplicate: 200, as for a single add.
    again = mq.request("POST", "/lines/messages", lines({"body": "x", "dedup_id": "k"}), NDJSON)
    assert again.status == 200 and again.json()["messages"][0]["duplicate"]


def test_a_multipart_batch_keeps_binary_bodies_and_part_headers_both_ways(mq):
    bodies = [bytes(range(256)) * 3, b"\r\n--b0und\r\n", b"", b"text"]
    parts = [({"Content-Type": "application/octet-stream"}, bodies[0]),
             ({"Content-Type": "text/plain", "X-Dedup-Id": "p1"}, bodies[1]),
             ({}, bodies[2]), ({"X-Delay": "600"}, bodies[3])]
    resp = mq.request("POST", "/parts/messages", multipart(parts, "zz9"),
                      {"Content-Type": 'multipart/mixed; boundary="zz9"'})
    assert resp.status == 201, resp.body
    ids = [m["id"] for m in resp.json()["messages"]]
    resp = mq.request("GET", "/parts/messages?max=10")
    assert resp.status == 200 and resp.header("X-Count") == "3"
    got = split_multipart(resp.header("Content-Type"), resp.body)
    assert [h["X-Message-Id"] for h, _ in got] == ids[:3]
    assert [b for _, b in got] == bodies[:3]
    assert [h["Content-Type"] for h, _ in got] == ["application/octet-stream", "text/plain",
                                                   "application/octet-stream"]
    assert all(h["X-Receipt"] == f"{h['X-Message-Id']}.1" and h["X-Attempts"] == "1" for h, _ in got)
    assert all(h["X-Message-Kind"] == "normal" for h, _ in got)


def compound_parts(content_type: str, body: bytes) -> list[tuple[str, bytes]]:
    """The (content type, body) parts of a compound served as multipart/mixed (email package)."""
    message = BytesParser(policy=policy.default).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    return [(part.get_content_type(), part.get_payload(decode=True)) for part in message.iter_parts()]


def fetch_compounds(mq, queue: str, parts: int, query: str = "", headers=None) -> list:
    """Batch-fetch a queue's compounds until they hold `parts` parts: the answers' parts (or
    JSON records), each compound as served."""
    got, count = [], 0

    def more():
        nonlocal count
        resp = mq.request("GET", f"/{queue}/messages?max=10&wait=2{query}", headers=headers)
        assert resp.status in (200, 204), (resp.status, resp.body)
        if resp.status == 200 and "application/json" in (headers or {}).get("Accept", ""):
            records = resp.json()["messages"]
            got.extend(records)
            count += sum(len(msgpack.unpackb(base64.b64decode(r["body"]))) for r in records)
        elif resp.status == 200:
            answer = split_multipart(resp.header("Content-Type"), resp.body)
            got.extend(answer)
            count += sum(len(compound_parts(h["Content-Type"], b)) if "cf=msgpack" not in query
                         else len(msgpack.unpackb(b)) for h, b in answer)
        return count >= parts

    poll_for(more, 30, interval=0, what=f"{parts} parts in {queue}'s compounds")
    return got


def test_a_batch_fetch_serves_a_compound_as_a_single_fetch_does(mq):
    for queue in ("folded", "folded-msgpack", "folded-json"):
        assert mq.request("PATCH", f"/{queue}/properties", b'{"accum": 1}').status == 200
        mq.add(queue, b"disk 91% full", "text/plain")
        mq.add(queue, b'{"disk": 93}', "application/json")
    got = fetch_compounds(mq, "folded", 2)
    assert all(h["X-Message-Kind"] == "compound" and h["X-Receipt"] == f"{h['X-Message-Id']}.1"
               for h, _ in got), got
    assert [p for h, b in got for p in compound_parts(h["Content-Type"], b)] == \
        [("text/plain", b"disk 91% full"), ("application/json", b'{"disk": 93}')]
    got = fetch_compounds(mq, "folded-msgpack", 2, "&cf=msgpack")
    assert all(h["X-Message-Kind"] == "compound" and h["Content-Type"] == "application/msgpack"
               for h, _ in got), got
    assert [p for _, b in got for p in msgpack.unpackb(b)] == \
        [["text/plain", b"disk 91% full"], ["application/json", b'{"disk": 93}']]
    got = fetch_compounds(mq, "folded-json", 2, "&cf=msgpack", {"Accept": "application/json"})
    assert all(r["kind"] == "compound" and r["content_type"] == "application/msgpack" for r in got)
    resp = mq.request("GET", "/folded/messages?max=10&cf=zip")
    assert resp.status == 400 and resp.json()["error"] == "invalid"


def test_part_headers_are_utf_8_both_ways_and_agree_with_single_adds_and_fetches(mq):
    from mq.client import Client

    content_type, key = "text/plain; name=\u65e5\u672c", "caf\u00e9-\u65e5\u672c"
    with Client(f"http://127.0.0.1:{mq.port}") as client:
        ids = client.add_many("utf8", [{"body": b"batch", "content_type": content_type,
                                        "dedup_id": key}])
        # The same key through a single add (in the query: UTF-8) is the same key.
        assert client.put("utf8", b"again", dedup_id=key) == ids[0]
        single = client.put("utf8", b"single", content_type=content_type)
        got = client.fetch_many("utf8", max=1)
        assert [(m.id, m.content_type) for m in got] == [(ids[0], content_type)]
        message = client.get("utf8")  # A single fetch: the header's bytes are its UTF-8.
        assert (message.id, message.content_type) == (single, content_type)
    # As a header, the key is read as UTF-8 too.
    resp = mq.request("POST", "/utf8/messages", b"x", {"X-Dedup-Id": key.encode().decode("latin-1")})
    assert resp.status == 200 and resp.json()["id"] == ids[0], resp.body
    # A batch fetch writes its part headers in UTF-8 (read here without the client).
    added = mq.request("POST", "/utf8-raw/messages", lines({"body": "x", "content_type": content_type}),
                       NDJSON)
    assert added.status == 201
    resp = mq.request("GET", "/utf8-raw/messages?max=5")
    assert resp.status == 200
    assert b"Content-Type: " + content_type.encode() + b"\r\n" in resp.body
    # Bytes that are not UTF-8 are refused, as a part header and as a header.
    bad = b"--b\r\nX-Dedup-Id: \xff\xfe\r\n\r\nx\r\n--b--\r\n"
    resp = mq.request("POST", "/utf8/messages", bad, {"Content-Type": "multipart/mixed; boundary=b"})
    assert resp.status == 400 and "not UTF-8" in resp.json()["message"], resp.body
    resp = mq.request("POST", "/utf8/messages", b"x", {"X-Dedup-Id": "\u00ff\u00fe"})
    assert resp.status == 400 and "not UTF-8" in resp.json()["message"], resp.body


def test_a_content_type_beyond_latin_1_is_served_by_a_single_fetch(mq):
    content_type = "text/plain; name=\u65e5\u672c"
    added = mq.request("POST", "/wide-type/messages", lines({"body": "x", "content_type": content_type}),
                       NDJSON)
    assert added.status == 201
    resp = mq.request("GET", "/wide-type/messages")
    assert resp.status == 200, resp.body
    assert resp.header("Content-Type").encode("latin-1") == content_type.encode()


@pytest.mark.parametrize("body, headers, status", [
    (lines(*[{"body": "x"}] * 1001), NDJSON, 400),
    (b"", NDJSON, 400),
    (b'{"body": "x"}\nnot json\n', NDJSON, 400),
    (lines({"body": "x", "extra": 1}), NDJSON, 400),
    (lines({"body": "x", "encoding": "rot13"}), NDJSON, 400),
    (lines({"body": "!!", "encoding": "base64"}), NDJSON, 400),
    (lines({"content_type": "text/plain"}), NDJSON, 400),
    (lines({"body": "x", "delay": -1}), NDJSON, 400),
    (lines({"body": "x", "delay": True}), NDJSON, 400),
    (lines({"body": "x", "content_type": "text/plain\r\nX-Receipt: forged"}), NDJSON, 400),
    (lines({"body": "x" * (MAX_BODY + 1)}), NDJSON, 413),
    (lines(*[{"body": "x" * 40_000}] * 6), NDJSON, 413),
    (b"--a\r\n\r\nx\r\n", {"Content-Type": "multipart/mixed; boundary=a"}, 400),
    (b"--a\r\n\r\nx\r\n--a--", {"Content-Type": "multipart/mixed"}, 400),
])
def test_a_bad_or_oversized_batch_is_refused_whole_with_a_json_error(mq, body, headers, status):
    resp = mq.request("POST", "/refused/messages", body, headers)
    assert resp.status == status, resp.body
    assert resp.json()["error"] in ("invalid", "too_large")
    assert mq.request("GET", "/refused/messages?max=100").status in (204, 404)


def test_a_batch_under_its_limit_may_be_larger_than_one_message_may(mq):
    body = lines(*[{"body": "y" * 40_000}] * 4)  # 160 kB: over --max-body-bytes, under the batch limit
    resp = mq.request("POST", "/big/messages", body, NDJSON)
    assert resp.status == 201, resp.body
    assert len(fetch_json(mq, "big", 100)) == 4


@pytest.mark.parametrize("query", ["max=0", "max=101", "max=two", "max=1&wait=21",
                                   "max=10000000000000000000000000", "max=-18446744073709551617"])
def test_a_bad_batch_fetch_is_400(mq, query):
    resp = mq.request("GET", f"/lines/messages?{query}")
    assert resp.status == 400 and resp.json()["error"] == "invalid"


@pytest.mark.parametrize("body", [b"[]", b'{"receipts": []}', b'{"receipts": [1]}', b"nope",
                                  json.dumps({"receipts": ["a.1"] * 1001}).encode()])
def test_a_bad_batch_ack_is_400(mq, body):
    resp = mq.request("POST", "/lines/messages/ack", body)
    assert resp.status == 400 and resp.json()["error"] == "invalid"


def test_a_batch_long_poll_waits_and_answers_as_soon_as_one_message_is_there(mq):
    assert mq.request("PUT", "/polled").status == 201
    started = time.monotonic()
    assert fetch_json(mq, "polled", 10, wait=1) == []  # Nothing came: 204 after the wait.
    assert time.monotonic() - started >= 0.9
    answer = {}

    def poll():
        started = time.monotonic()
        answer["messages"] = fetch_json(mq, "polled", 10, wait=20)
        answer["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=poll)
    thread.start()
    mq.add("polled", b"first")  # Before or while the poll waits: either way it is answered now.
    thread.join(30)
    assert [m["body"] for m in answer["messages"]] == ["first"]
    assert answer["seconds"] < 15  # Answered by the add, not by the end of its 20 s wait.


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_acknowledged_batches_survive_kill_9_of_the_tree_and_acked_ones_stay_gone(start_mq):
    daemon = start_mq(workers=2, timeout=3, args=("--actor-timeout=5",))
    assert daemon.request("PUT", "/orders").status == 201
    stored, acked, maybe_acked, problems, stop = {}, set(), set(), [], threading.Event()

    def adder(n: int) -> None:
        seq = 0
        while not stop.is_set():
            bodies = [checked_body(n * 1_000_000 + seq + i, 100 * i) for i in range(20)]
            seq += 20
            try:
                resp = daemon.request("POST", "/orders/messages", lines(
                    *[{"body": base64.b64encode(b).decode(), "encoding": "base64"} for b in bodies]), NDJSON, timeout=10)
            except OSError:
                continue
            if resp.status == 201:
                stored.update(zip([m["id"] for m in resp.json()["messages"]], bodies))
            elif resp.status != 503:
                problems.append((resp.status, resp.body[:200]))

    def acker() -> None:
        while not stop.is_set():
            try:
                got = fetch_json(daemon, "orders", 10)
            except (OSError, AssertionError):
                continue
            if not got:
                continue
            # An ack whose answer the kill cut off may have been made durable: such a
            # message may be gone after the restart, or come back. Either is right.
            maybe_acked.update(m["id"] for m in got)
            try:
                resp = daemon.request("POST", "/orders/messages/ack", json.dumps(
                    {"receipts": [m["receipt"] for m in got]}).encode(), timeout=10)
            except OSError:
                continue
            if resp.status == 200:
                acked.update(r["id"] for r in resp.json()["results"] if r["status"] == "acked")

    threads = [threading.Thread(target=adder, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=acker))
    for thread in threads:
        thread.start()
    poll_for(lambda: len(stored) >= 200 and len(acked) >= 20, 60, what="200 stored and 20 acked")
    daemon.kill_tree()
    stop.set()
    for thread in threads:
        thread.join(15)
    assert not problems, problems[:3]

    again = start_mq(workers=2, timeout=3)
    seen = {}

    def drain() -> bool:
        while got := fetch_json(again, "orders", 100):
            seen.update((m["id"], base64.b64decode(m["body"]) if m.get("encoding") else
                         m["body"].encode()) for m in got)
            again.request("POST", "/orders/messages/ack", json.dumps(
                {"receipts": [m["receipt"] for m in got]}).encode())
        return set(stored) - maybe_acked <= set(seen)

    # Messages fetched but not acked before the kill come back when their 3 s timer ends.
    # A 503 (an actor still starting, or late on a loaded machine) is "not yet", as its
    # Retry-After says.
    poll_for(drain, 60, interval=0.1, what="every acknowledged, unacked message",
             ignore=(AssertionError, OSError))
    assert not acked & set(seen), "a message acked by a batch ack came back"
    for message_id, body in seen.items():
        assert message_id not in stored or stored[message_id] == body
        assert body_is_whole(body)


def test_the_python_clients_add_fetch_and_ack_in_batches(mq):
    import asyncio

    from mq.client import AsyncClient, Client

    url = f"http://127.0.0.1:{mq.port}"
    with Client(url) as client:
        ids = client.add_many("client", [b"\x00bin\r\n--", "text", {"body": b"k", "dedup_id": "d"},
                                         {"body": b"k2", "dedup_id": "d"}])
        assert ids[3] == ids[2] and len(set(ids)) == 3
        got = client.fetch_many("client", max=10)
        assert [(m.id, m.body, m.attempts) for m in got] == \
            [(ids[0], b"\x00bin\r\n--", 1), (ids[1], b"text", 1), (ids[2], b"k", 1)]
        assert got[1].content_type == "text/plain; charset=utf-8"
        outcomes = client.ack_many(got[:2])
        assert [o["status"] for o in outcomes] == ["acked", "acked"]
        assert [o["status"] for o in client.ack_many(got)] == ["not_found", "not_found", "acked"]
        assert client.fetch_many("client", max=5) == []

    async def run():
        async with AsyncClient(url) as client:
            added = await client.add_many("aclient", [b"a", b"b"], delay=0)
            got = await client.fetch_many("aclient", max=5, wait=1)
            assert [m.id for m in got] == added
            assert [o["status"] for o in await client.ack_many(got)] == ["acked", "acked"]

    asyncio.run(run())
