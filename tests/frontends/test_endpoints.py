"""The six core endpoints, exactly: statuses, headers, bodies, names, and JSON errors."""

import collections
import concurrent.futures
import email.utils
import http.client
import socket
import json
import time
import uuid
from urllib.parse import quote

import pytest

from support import files_in, poll_for, ready_daemon


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory):
    """One daemon for the module (two worker pairs, a one-second redelivery timer)."""
    yield from ready_daemon(tmp_path_factory.mktemp("endpoints"), workers=2, timeout=1)


@pytest.fixture
def mq(shared_daemon):
    """The module's daemon, left as a fresh one is: after each test every queue it made is
    deleted, and the test is over once the root holds no queue and no message again. remove/
    is not waited for: what is there is no message any more, and the reaper keeps a fetched
    one's file there for spares' grace (2 s) before it is recycled, which no test reads."""
    yield shared_daemon
    root = shared_daemon.root
    for name in files_in(root / "queues"):
        assert shared_daemon.request("DELETE", "/" + quote(name, safe="")).status in (204, 404)
    poll_for(lambda: not any(files_in(root / folder) for folder in ("queues", "new", "delay")),
             what="the root to hold no queue and no message")


def assert_json_error(resp, status: int, kind: str) -> dict:
    """An error reply: the status, a JSON content type and {"error": kind, "message": ...}."""
    assert resp.status == status, (resp.status, resp.body)
    assert resp.header("Content-Type").startswith("application/json")
    value = resp.json()
    assert value["error"] == kind
    assert isinstance(value["message"], str) and value["message"]
    return value


# -- /{queue} -------------------------------------------------------------------------------


def test_get_queue_is_404_until_put_creates_it_then_200(mq):
    assert_json_error(mq.request("GET", "/orders"), 404, "not_found")
    assert mq.request("PUT", "/orders").status == 201
    assert mq.request("GET", "/orders").status == 200


def test_put_queue_is_idempotent_201_then_200_and_ignores_the_body(mq):
    assert mq.request("PUT", "/orders", b"ignored body").status == 201
    assert mq.request("PUT", "/orders").status == 200
    assert mq.request("PUT", "/orders").status == 200
    assert files_in(mq.root / "queues" / "orders") == []


def test_delete_queue_is_204_and_then_the_queue_is_gone(mq):
    mq.request("PUT", "/orders")
    assert mq.request("DELETE", "/orders").status == 204
    assert_json_error(mq.request("GET", "/orders"), 404, "not_found")
    assert_json_error(mq.request("DELETE", "/orders"), 404, "not_found")


def test_delete_queue_removes_ready_in_flight_and_new_messages(mq):
    in_flight = mq.add("orders", b"fetched")
    ready = mq.add("orders", b"waiting")
    assert mq.fetch("orders").header("X-Message-Id") == in_flight
    # A message still in new/ (as a save actor leaves it between write and rename).
    leftover = str(uuid.uuid4())
    (mq.root / "new" / f"orders:{leftover}").write_bytes(b"half-way")
    assert any(n.startswith("orders:") for n in files_in(mq.root / "delay"))

    assert mq.request("DELETE", "/orders").status == 204

    for folder in ("new", "delay"):
        assert not [n for n in files_in(mq.root / folder) if n.startswith("orders:")], folder
    assert not (mq.root / "queues" / "orders").exists()
    assert mq.request("PUT", "/orders").status == 201
    # Longer than --timeout: the fetched one must not come back into the new queue.
    poll_for(lambda: not files_in(mq.root / "remove"), 30, what="the reaper to unlink everything")
    for message_id in (in_flight, ready, leftover):
        assert_json_error(mq.delete("orders", message_id), 404, "not_found")
    assert mq.fetch("orders").status == 204


# -- /{queue}/messages ----------------------------------------------------------------------


def test_post_answers_201_with_id_header_and_json_body(mq):
    resp = mq.request("POST", "/orders/messages", b"hello")
    assert resp.status == 201
    message_id = resp.header("X-Message-Id")
    uuid.UUID(message_id)
    assert resp.json() == {"id": message_id, "queue": "orders"}


def test_every_reply_is_dated_now_and_the_date_follows_the_clock(mq):
    from tornado.httputil import format_timestamp

    from mq.http.api import http_date

    for moment in (1_767_225_599.5, 1_767_225_599.9, 1_767_225_600.0, 1_767_225_601.2, 12.0):
        assert http_date(moment) == format_timestamp(moment)
    before = time.time()
    replies = [mq.request("POST", "/dated/messages", b"x"), mq.request("GET", "/dated"),
               mq.request("GET", "/nosuch/messages")]
    after = time.time()
    for resp in replies:
        dated = email.utils.parsedate_to_datetime(resp.header("Date")).timestamp()
        assert int(before) <= dated <= after, (resp.status, resp.header("Date"))


def test_many_clients_at_once_through_one_front_are_all_answered(start_mq):
    # Replies arriving while the front sends requests must still be read: a lost wake-up of
    # the front's link to an actor leaves requests waiting for --actor-timeout, then 503.
    mq = start_mq(workers=1, args=("--actor-timeout=5",))

    def client(n: int) -> list[int]:
        statuses = []
        for i in range(15):
            statuses.append(mq.request("POST", "/crowd/messages", b"%d-%d" % (n, i)).status)
            fetched = mq.fetch("crowd")
            statuses.append(fetched.status)
            if fetched.status == 200:
                message_id = fetched.header("X-Message-Id")
                statuses.append(mq.delete("crowd", message_id).status)
        return statuses

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        statuses = [status for one in pool.map(client, range(32)) for status in one]
    assert set(statuses) <= {200, 201, 204}, collections.Counter(statuses)
    assert statuses.count(201) == 32 * 15


def test_fetch_returns_body_id_and_content_type_it_was_added_with(mq):
    message_id = mq.add("orders", b'{"n": 1}', content_type="application/json; charset=utf-8")
    resp = mq.fetch("orders")
    assert resp.status == 200
    assert resp.body == b'{"n": 1}'
    assert resp.header("X-Message-Id") == message_id
    assert resp.header("Content-Type") == "application/json; charset=utf-8"


def test_message_added_without_content_type_comes_back_as_octet_stream(mq):
    mq.add("orders", b"raw")
    assert mq.fetch("orders").header("Content-Type") == "application/octet-stream"


def test_fetch_is_204_with_empty_body_when_the_queue_is_empty(mq):
    mq.request("PUT", "/orders")
    resp = mq.fetch("orders")
    assert resp.status == 204
    assert resp.body == b""
    assert resp.header("X-Message-Id") is None


def test_fetch_from_unknown_queue_is_json_404(mq):
    assert_json_error(mq.fetch("nosuchqueue"), 404, "not_found")


def test_binary_body_with_every_byte_value_round_trips_exactly(mq):
    body = bytes(range(256)) * 3 + b"\r\n\x00\xff"
    message_id = mq.add("bin", body)
    resp = mq.fetch("bin")
    assert resp.header("X-Message-Id") == message_id
    assert resp.body == body


def test_empty_body_round_trips(mq):
    message_id = mq.add("empty", b"")
    resp = mq.fetch("empty")
    assert resp.status == 200
    assert resp.header("X-Message-Id") == message_id
    assert resp.body == b""


def test_one_queue_is_fifo_with_peers_0(mq):
    # The queue's own timeout: nothing comes back for redelivery meanwhile.
    assert mq.request("PUT", "/fifo/properties", b'{"timeout": 60}').status == 200
    sent = [mq.add("fifo", b"m%d" % i) for i in range(40)]
    got = []
    for _ in sent:
        resp = mq.fetch("fifo")
        assert resp.status == 200
        got.append(resp.header("X-Message-Id"))
        assert resp.body == b"m%d" % sent.index(got[-1])
    assert got == sent
    assert mq.fetch("fifo").status == 204


def test_a_fetched_message_is_invisible_then_comes_back_after_the_timeout(mq):
    # The queue's timeout, 2 s (the daemon's --timeout=1 is test_a_fetched_message_that_is_
    # deleted_never_comes_back's): room for the second fetch on a loaded machine.
    assert mq.request("PUT", "/redo/properties", b'{"timeout": 2}').status == 200
    message_id = mq.add("redo", b"again")
    assert mq.fetch("redo").header("X-Message-Id") == message_id
    assert mq.fetch("redo").status == 204
    again = poll_for(lambda: (r := mq.fetch("redo")).status == 200 and r, 30,
                     what="the message to come back after its queue's timeout of 2 s")
    assert again.header("X-Message-Id") == message_id
    assert again.body == b"again"


def test_a_fetched_message_that_is_deleted_never_comes_back(mq):
    deleted = mq.add("done", b"work")
    assert mq.fetch("done").header("X-Message-Id") == deleted
    assert mq.delete("done", deleted).status == 204
    # A second message fetched later and left alone: when it is back, the deleted one's
    # timer (which ran out first) has long passed too.
    later = mq.add("done", b"left alone")
    assert mq.fetch("done").header("X-Message-Id") == later
    back = poll_for(lambda: (r := mq.fetch("done")).status == 200 and r, 30)
    assert back.header("X-Message-Id") == later
    assert mq.fetch("done").status == 204


# -- /{queue}/messages/{id} -----------------------------------------------------------------


def test_delete_ready_message_is_204_and_it_is_never_fetched(mq):
    first = mq.add("jobs", b"one")
    second = mq.add("jobs", b"two")
    assert mq.delete("jobs", first).status == 204
    assert mq.fetch("jobs").header("X-Message-Id") == second
    assert_json_error(mq.delete("jobs", first), 404, "not_found")


def test_delete_in_flight_message_is_204(mq):
    message_id = mq.add("jobs", b"one")
    assert mq.fetch("jobs").status == 200
    assert mq.delete("jobs", message_id).status == 204
    assert not [n for n in files_in(mq.root / "delay") if message_id in n]


def test_delete_new_message_is_204(mq):
    mq.request("PUT", "/jobs")
    message_id = str(uuid.uuid4())
    (mq.root / "new" / f"jobs:{message_id}").write_bytes(b"not yet delivered")
    assert mq.delete("jobs", message_id).status == 204
    assert files_in(mq.root / "new") == []


def test_delete_unknown_id_is_json_404(mq):
    mq.request("PUT", "/jobs")
    assert_json_error(mq.delete("jobs", str(uuid.uuid4())), 404, "not_found")


def test_delete_malformed_id_is_json_400(mq):
    mq.request("PUT", "/jobs")
    assert_json_error(mq.delete("jobs", "..%2F..%2Fetc"), 400, "invalid")
    assert_json_error(mq.delete("jobs", "not-a-uuid"), 400, "invalid")


# -- names ------------------------------------------------------------------------------------


GOOD_NAMES = ["a", "Q-1_x.y", "...", "x" * 128, "..a", "a..", "0", "-_-"]
BAD_NAMES = [".", "..", "%2E", "%2E%2E", "x" * 129, "a%2Fb", "..%2F..%2Fetc", "a:b", "a%3Ab",
             "a%20b", "a%00b", "%00", "caf%C3%A9", "a*b", "a%5Cb", "a%0Ab", "a%0A", "abc%0D%0A"]
SOME_ID = "01890000-0000-7000-8000-000000000000"
EVERY_QUEUE_ENDPOINT = [("GET", ""), ("PUT", ""), ("DELETE", ""), ("GET", "/messages"),
                        ("POST", "/messages"), ("DELETE", f"/messages/{SOME_ID}")]


def test_queue_names_of_the_allowed_characters_up_to_128_are_accepted(mq):
    for name in GOOD_NAMES:
        assert mq.request("PUT", f"/{name}").status == 201, name
        assert mq.add(name, name.encode())
        assert mq.fetch(name).body == name.encode()
        assert (mq.root / "queues" / name).is_dir()


def test_bad_queue_names_get_json_400_saying_why_on_every_endpoint(mq):
    for path_name in BAD_NAMES:
        for method, suffix in EVERY_QUEUE_ENDPOINT:
            body = b"body" if method == "POST" else None
            resp = mq.request(method, f"/{path_name}{suffix}", body)
            value = assert_json_error(resp, 400, "invalid")
            assert "queue name" in value["message"], (method, path_name, value)


def test_bad_queue_names_touch_nothing_on_disk(mq):
    for path_name in BAD_NAMES:
        mq.request("POST", f"/{path_name}/messages", b"x")
        mq.request("PUT", f"/{path_name}")
    assert files_in(mq.root / "queues") == []
    assert files_in(mq.root / "new") == []
    # Nothing escaped the root either (a traversal would land next to it).
    assert {p.name for p in mq.root.parent.iterdir()} <= {"root", "mq.stdout.log", "mq.stderr.log"}


# -- errors -----------------------------------------------------------------------------------


def test_unknown_paths_get_json_404(mq):
    for method, path in [("POST", "/"), ("GET", "/a/b"), ("GET", "/a/messages/"),
                         ("GET", "/a/messages/x/y"), ("POST", "/a/b/c"), ("DELETE", "/a/b")]:
        assert_json_error(mq.request(method, path), 404, "not_found")


def test_unsupported_methods_on_known_paths_get_json_405(mq):
    for method, path in [("POST", "/a"), ("PATCH", "/a"), ("PUT", "/a/messages"),
                         ("GET", f"/a/messages/{SOME_ID}"), ("FOO", "/a")]:
        resp = mq.request(method, path)
        assert resp.status == 405, (method, path, resp.status)
        assert resp.json()["error"] == "invalid"


def chunked_post(port: int, path: str, chunks: list[bytes]) -> http.client.HTTPResponse:
    """POST a body with Transfer-Encoding: chunked (no Content-Length). A server that refuses
    the body part-way answers and closes before the last chunk: the answer is read anyway."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    try:
        for chunk in [*chunks, b""]:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except (BrokenPipeError, ConnectionResetError):
        pass
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    return resp


def stored_bodies(mq, queue: str) -> list[bytes]:
    """Bodies of a queue's messages, fetched (and left to time out)."""
    bodies = []
    while (resp := mq.fetch(queue)).status == 200:
        bodies.append(resp.body)
    return bodies


def test_body_over_max_body_bytes_is_json_413_and_nothing_is_stored(start_mq):
    mq = start_mq(workers=1, timeout=1, args=("--max-body-bytes=1000",))
    assert mq.add("big", b"x" * 1000)
    assert_json_error(mq.request("POST", "/big/messages", b"x" * 1001), 413, "too_large")
    assert_json_error(mq.request("POST", "/big/messages", b"x" * 50_000), 413, "too_large")
    # A chunked body declares no length: it is counted as it comes, and refused the same way.
    chunked = chunked_post(mq.port, "/big/messages", [b"y" * 600, b"y" * 600, b"y" * 600])
    assert chunked.status == 413 and json.loads(chunked.read())["error"] == "too_large"
    assert chunked_post(mq.port, "/big/messages", [b"z" * 500, b"z" * 500]).status == 201
    assert files_in(mq.root / "new") == []
    assert sorted(len(b) for b in stored_bodies(mq, "big")) == [1000, 1000]


def test_a_body_of_many_socket_reads_is_stored_whole_and_fetched_whole(mq):
    body = bytes(range(256)) * 4096 + b"end"  # 1 MiB and a bit: dozens of reads of the socket
    resp = mq.request("POST", "/whole/messages", body, {"Content-Type": "application/octet-stream"})
    assert resp.status == 201
    resp = mq.request("GET", "/whole/messages")
    assert resp.status == 200 and resp.body == body
