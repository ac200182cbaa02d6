"""Accumulation against the real daemon: a queue with `accum` > 0 turns the adds of each window
into one compound message, fetchable when the window closes.

One daemon serves the module (each test has its own queues), with `--save-batch=0` so that
concurrent adds spread over both save actors; the last test kills it with kill -9 and starts
it again. Windows are 1 s (3 s for the kill); every wait polls a fetch, a
long poll or the root, never a fixed sleep.
"""

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from email import policy
from email.parser import BytesParser

import msgpack
import pytest

from delivery_support import add, assert_json_error, fetch, fetch_when_ready, reply, set_props
from doc_blocks import assert_shows, shown
from mq.store.message import decode_header
from support import files_in, poll_for, ready_daemon
from repo_support import REPO

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("accumulation")

README = REPO / "docs" / "HTTP.md"


@pytest.fixture(scope="module")
def shared_mq(tmp_path_factory):
    """The module's daemon: two worker pairs, adds spread over both save actors."""
    yield from ready_daemon(tmp_path_factory.mktemp("accum"), workers=2, timeout=1,
                            args=("--save-batch=0",))


def at_window_start(accum: float, share: float = 0.5) -> None:
    """Wait until the clock is in the first `share` of a window, so that a few quick adds fall
    into one (windows are aligned to multiples of accum on the Unix clock)."""
    poll_for(lambda: time.time() % accum < accum * share, accum + 1, interval=0.01,
             what="the start of a window")


def accumulating(mq, queue: str, accum: float, **more) -> None:
    """Give a queue an accumulation window (and other properties)."""
    set_props(mq, queue, {"accum": accum, **more})


def add_part(mq, queue: str, body: bytes, content_type: str = "text/plain") -> dict:
    """Add a part; assert 201 and that the header agrees with the body; return the body."""
    resp = add(mq, queue, body, {"Content-Type": content_type})
    assert resp.status == 201, (resp.status, resp.body)
    value = resp.json()
    assert resp.header("X-Accumulated") == value["accumulated"], resp.headers
    return value


def parts_of(resp) -> list[tuple[str, bytes]]:
    """The (content type, body) parts of a multipart/mixed fetch, parsed by the email package."""
    raw = b"Content-Type: " + resp.header("Content-Type").encode() + b"\r\n\r\n" + resp.body
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert message.get_content_type() == "multipart/mixed" and message.is_multipart()
    return [(part.get_content_type(), part.get_payload(decode=True))
            for part in message.iter_parts()]


def test_a_window_opens_is_joined_and_closes_into_one_multipart_compound(shared_mq):
    accumulating(shared_mq, "acc-mixed", 1)
    sent = [("text/plain", b"one\r\nline two"), ("application/json", b'{"n": 2}'),
            ("application/octet-stream", b"\x00\xff--not a boundary\r\n")]
    at_window_start(1)
    replies = [add_part(shared_mq, "acc-mixed", body, ct) for ct, body in sent]
    # The first add of a window opens it, the others join it (a window closing between two
    # adds under load starts another one: then its first add says "new" again).
    for before, after in zip(replies, replies[1:]):
        assert after["accumulated"] == ("yes" if after["due"] == before["due"] else "new")
    assert replies[0]["accumulated"] == "new"
    assert len({r["due"] for r in replies}) == 1, "three quick adds at a window's start split"
    due = replies[0]["due"]
    resp, came = fetch_when_ready(shared_mq, "acc-mixed", timeout=10)
    assert came >= due, f"fetchable {due - came:.3f} s before its window closed"
    assert resp.header("X-Message-Kind") == "compound"
    assert resp.header("X-Attempts") == "1"
    assert parts_of(resp) == sent
    assert resp.header("X-Message-Id") not in [r["id"] for r in replies]
    assert fetch(shared_mq, "acc-mixed").status == 204, "one window, one compound"


def test_a_compound_fetch_is_the_one_the_delivery_doc_shows(shared_mq):
    accumulating(shared_mq, "acc-disk", 1)
    at_window_start(1)
    first = add_part(shared_mq, "acc-disk", b"disk 91% full", "text/plain")
    second = add_part(shared_mq, "acc-disk", b'{"disk": 93}', "application/json")
    assert first["due"] == second["due"], "two quick adds at a window's start split"
    resp, _ = fetch_when_ready(shared_mq, "acc-disk", timeout=10)
    shows = shown("DELIVERY.md", "tests/store/test_accumulation.py", "Content-Type: multipart")
    assert_shows(shows, "Content-Type: %s\n\n%s" % (resp.header("Content-Type"),
                                                     resp.body.decode().replace("\r\n", "\n")))


def test_ordinary_queues_say_no_and_serve_normal_messages(shared_mq):
    resp = add(shared_mq, "acc-plain", b"just one", {"Content-Type": "text/plain"})
    assert resp.status == 201 and resp.header("X-Accumulated") == "no"
    assert "accumulated" not in resp.json()
    got = fetch(shared_mq, "acc-plain")
    assert got.body == b"just one" and got.header("X-Message-Kind") == "normal"
    assert got.header("Content-Type") == "text/plain"


def add_batch(mq, queue: str, lines: list[dict]) -> list[dict]:
    """A JSON lines batch add; assert it stored (201) and return its records."""
    body = "\n".join(json.dumps(line) for line in lines).encode()
    resp = add(mq, queue, body, {"Content-Type": "application/x-ndjson"})
    assert resp.status == 201, (resp.status, resp.body)
    return resp.json()["messages"]


def test_a_batch_add_says_accumulated_per_record_as_a_single_add_does(shared_mq):
    accumulating(shared_mq, "acc-batch", 1)
    at_window_start(1)
    first, second, again = add_batch(shared_mq, "acc-batch", [
        {"body": "a", "dedup_id": "k"}, {"body": "b"}, {"body": "c", "dedup_id": "k"}])
    assert first["accumulated"] == "new", first
    assert second["accumulated"] == ("yes" if second["due"] == first["due"] else "new"), second
    # A duplicate stored nothing: "no", so left out, as a single add's body leaves it out.
    assert again["id"] == first["id"] and again["duplicate"] and "accumulated" not in again, again
    [later, third] = add_batch(shared_mq, "acc-batch", [{"body": "d", "dedup_id": "k"},
                                                        {"body": "e"}])
    assert later["id"] == first["id"] and "accumulated" not in later, later
    assert third["accumulated"] in ("new", "yes") and third["due"] >= first["due"], third
    single = add(shared_mq, "acc-batch", b"f", dedup_id="k")
    assert single.status == 200 and single.header("X-Accumulated") == "no"
    assert "accumulated" not in single.json()
    plain = add_batch(shared_mq, "acc-batch-plain", [{"body": "g"}, {"body": "h", "delay": 60}])
    assert all("accumulated" not in record for record in plain), plain


def test_a_fan_out_says_accumulated_per_copy_as_a_single_add_does(shared_mq):
    for queue in ("acc-fan-parts", "acc-fan-plain"):
        assert shared_mq.request("PUT", f"/{queue}").status in (200, 201)
    accumulating(shared_mq, "acc-fan-parts", 1)
    at_window_start(1)
    resp = shared_mq.request("POST", "/_mq/messages?qre=acc-fan-.*", b"to both")
    assert resp.status == 201, resp.body
    copies = {m["queue"]: m for m in resp.json()["messages"]}
    assert copies["acc-fan-parts"]["accumulated"] == "new", copies
    assert "accumulated" not in copies["acc-fan-plain"], copies
    resp, _ = fetch_when_ready(shared_mq, "acc-fan-parts", timeout=10)
    assert resp.header("X-Message-Kind") == "compound" and parts_of(resp) == [
        ("application/octet-stream", b"to both")]


def test_a_compound_as_msgpack_on_request_and_bad_requests_claim_nothing(shared_mq):
    accumulating(shared_mq, "acc-pack", 1)
    assert_json_error(add(shared_mq, "acc-pack", b"late", delay=5), 400, "invalid", "accumulates")
    at_window_start(1)
    add_part(shared_mq, "acc-pack", b"first", "text/csv")
    add_part(shared_mq, "acc-pack", b"\x01\x02", "application/octet-stream")
    poll_for(lambda: shared_mq.request("GET", "/acc-pack").json()["ready"] == 1, 10,
             what="the compound to be ready")
    assert_json_error(shared_mq.request("GET", "/acc-pack/messages?cf=xml"), 400, "invalid", "cf")
    resp = shared_mq.request("GET", "/acc-pack/messages?cf=msgpack")
    assert resp.status == 200, "a refused fetch claimed the compound"
    assert resp.header("Content-Type") == "application/msgpack"
    assert resp.header("X-Message-Kind") == "compound"
    assert msgpack.unpackb(resp.body) == [["text/csv", b"first"],
                                          ["application/octet-stream", b"\x01\x02"]]


def test_nack_redelivers_and_dead_letters_the_compound_as_one_message(shared_mq):
    accumulating(shared_mq, "acc-retry", 1, retry=1)
    at_window_start(1)
    add_part(shared_mq, "acc-retry", b"a")
    add_part(shared_mq, "acc-retry", b"b")
    first, _ = fetch_when_ready(shared_mq, "acc-retry")
    compound_id = first.header("X-Message-Id")
    assert reply(shared_mq, "acc-retry", compound_id, "nack",
                 first.header("X-Receipt")).status == 204
    second = fetch(shared_mq, "acc-retry")
    assert (second.header("X-Message-Id"), second.header("X-Attempts")) == (compound_id, "2")
    assert parts_of(second) == [("text/plain", b"a"), ("text/plain", b"b")]
    dead = reply(shared_mq, "acc-retry", compound_id, "nack", second.header("X-Receipt"))
    assert dead.status == 200 and dead.json()["dead_letter_queue"] == "acc-retry.dead"
    letter = fetch(shared_mq, "acc-retry.dead")
    assert letter.header("X-Message-Id") == compound_id
    assert letter.header("X-Message-Kind") == "compound"
    assert parts_of(letter) == [("text/plain", b"a"), ("text/plain", b"b")]
    assert reply(shared_mq, "acc-retry.dead", compound_id, "ack",
                 letter.header("X-Receipt")).status == 204
    assert fetch(shared_mq, "acc-retry").status == 204


def test_concurrent_adds_on_both_save_actors_share_one_window_without_a_race(shared_mq):
    accumulating(shared_mq, "acc-race", 3)
    bodies = [b"part %d" % n for n in range(40)]
    at_window_start(3, share=0.3)
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda body: add_part(shared_mq, "acc-race", body), bodies))
    windows = {}
    for value in replies:
        windows.setdefault(value["due"], []).append(value["accumulated"])
    # One window, opened by exactly one add, whichever save actor took it.
    assert len(windows) == 1, f"40 quick adds at a window's start split: {windows}"
    assert all(sorted(v) == ["new"] + ["yes"] * (len(v) - 1) for v in windows.values()), windows
    folder = shared_mq.root / "accum" / "acc-race" / str(round(min(windows) * 1000))
    writers = set()
    for name in files_in(folder):
        header, _ = decode_header("acc-race", name, (folder / name).read_bytes())
        writers.add(header["w"].rpartition("/")[2])
    assert writers == {"save-0", "save-1"}, "the adds did not spread over both save actors"
    seen = []

    def drained():
        while (resp := fetch(shared_mq, "acc-race")).status == 200:
            seen.extend(body for _, body in parts_of(resp))
            reply(shared_mq, "acc-race", resp.header("X-Message-Id"), "ack",
                  resp.header("X-Receipt"))
        return len(seen) >= len(bodies)

    poll_for(drained, 15, interval=0.05, what="every part in a compound")
    assert sorted(seen) == sorted(bodies), "a part lost or delivered twice"


def test_purge_and_queue_delete_take_the_parts_of_open_windows(shared_mq):
    accumulating(shared_mq, "acc-gone", 600)
    first = add_part(shared_mq, "acc-gone", b"one")
    add_part(shared_mq, "acc-gone", b"two")
    windows = shared_mq.root / "accum" / "acc-gone"
    window = files_in(windows / str(round(first["due"] * 1000)))
    assert len(window) == 2 and first["id"] in window
    assert shared_mq.delete("acc-gone", first["id"]).status == 404, "a part is not a message"
    purged = shared_mq.request("POST", "/acc-gone/purge")
    assert purged.json()["purged"] == 2 and files_in(windows) == []
    assert add_part(shared_mq, "acc-gone", b"three")["accumulated"] == "new"
    assert shared_mq.request("DELETE", "/acc-gone").status == 204
    assert not windows.exists()


# -- the README's example ------------------------------------------------------------------------

#: What differs from run to run: ids, receipts, times, the multipart boundary.
VARYING = [(re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"ID"),
           (re.compile(rb'"due":[0-9.]+'), b'"due":DUE'),
           (re.compile(rb"mq-[0-9a-f]{24}"), b"BOUNDARY"),
           (re.compile(rb"^(Date|Server): .*\r?\n", re.M), b"")]


def readme_example() -> list[tuple[str, bytes]]:
    """(command, expected output) of each `$ ` line of the README's accumulation example."""
    text = README.read_text()
    section = text[text.index("**Accumulation.**"):]
    section = section[:section.index("\n| Endpoint")]
    examples = []
    for block in re.findall(r"^```console\n(.*?)^```$", section, re.S | re.M):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            examples.append((command, output.rstrip("\n").encode()))
    return examples


def normalized(output: bytes) -> bytes:
    """Output with its varying parts replaced, line endings as in the README."""
    output = output.replace(b"\r\n", b"\n")
    for pattern, stand_in in VARYING:
        output = pattern.sub(stand_in, output)
    return output.rstrip(b"\n")


def test_the_readme_example_runs_as_written(shared_mq, tmp_path):
    examples = readme_example()
    assert len(examples) >= 4
    # The example decodes msgpack with `python3`: the interpreter running the tests has it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    # The module's daemon hides a fetched message for 1 s; the README's reader has the default
    # 30 s, so the compound it fetched and left is not served again in place of the next one.
    set_props(shared_mq, "events", {"timeout": 30})
    at_window_start(1, share=0.3)
    for command, expected in examples:
        command = command.replace("http://127.0.0.1:8080", f"http://127.0.0.1:{shared_mq.port}")
        result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, timeout=30,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert normalized(result.stdout) == normalized(expected), command


# -- kill -9 (last: it restarts the module's daemon) ------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_parts_acknowledged_before_kill_9_are_combined_once_after_the_restart(shared_mq):
    accumulating(shared_mq, "acc-crash", 3)
    at_window_start(3, share=0.3)
    sent = [b"p1", b"p2", b"p3"]
    replies = [add_part(shared_mq, "acc-crash", body) for body in sent]
    due = replies[0]["due"]
    assert {r["due"] for r in replies} == {due}
    shared_mq.kill_tree()
    window = shared_mq.root / "accum" / "acc-crash" / str(round(due * 1000))
    assert len(files_in(window)) == 3, "the window closed before the kill"
    shared_mq.start().wait_ready()
    resp, came = fetch_when_ready(shared_mq, "acc-crash", timeout=15)
    assert came >= due
    assert parts_of(resp) == [("text/plain", body) for body in sent]
    assert reply(shared_mq, "acc-crash", resp.header("X-Message-Id"), "ack",
                 resp.header("X-Receipt")).status == 204
    # Nothing else: no window left to close, nothing ready, no second compound.
    assert files_in(shared_mq.root / "accum" / "acc-crash") == []
    assert shared_mq.request("GET", "/acc-crash").json()["ready"] == 0
    assert fetch(shared_mq, "acc-crash").status == 204
