"""Fan-out, POST /_mq/messages?qre=REGEX: one copy in every existing queue whose whole name
matches, all durable before the one reply; a crash of the save actor in the middle of
fan-outs leaves every acknowledged copy and no partial body; README.md's session."""

import base64
import errno
import re
import subprocess
import threading
from urllib.parse import quote

import pytest

from actor_support import Actors
from actor_support import request as actor_request
from disks import FailingDisk
from mq.errors import Invalid, TooLarge, Unavailable
from support import body_is_whole, checked_body, files_in, poll_for, ready_daemon, request
from repo_support import REPO

README = REPO / "docs" / "HTTP.md"
IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def fan_mq(tmp_path_factory):
    """One daemon for the module's short tests (each uses its own queue names)."""
    yield from ready_daemon(tmp_path_factory.mktemp("fanout"), workers=2, timeout=30)


def fan_out(mq, pattern: str, body: bytes = b"x", query: str = "", headers=None):
    """POST /_mq/messages?qre=pattern (and more query)."""
    return mq.request("POST", f"/_mq/messages?qre={quote(pattern)}{query}", body, headers)


def create(mq, *queues: str) -> None:
    """Create new queues (201 each)."""
    for queue in queues:
        assert mq.request("PUT", f"/{queue}").status == 201


def ready_messages(port: int, queue: str) -> list[dict]:
    """Every ready message of a queue (peek pages), bodies decoded; nothing is claimed."""
    messages, after = [], ""
    while True:
        resp = request(port, "GET", f"/{queue}/peek?max=1000{after}")
        assert resp.status == 200, resp.body
        page = resp.json()["messages"]
        if not page:
            return messages
        for message in page:
            message["body"] = base64.b64decode(message["body"])
        messages += page
        after = f"&after={page[-1]['id']}"


def test_one_add_puts_a_copy_in_every_matching_queue(fan_mq):
    create(fan_mq, "fo-a1", "fo-a2", "fo-a10", "fo-b1")
    resp = fan_out(fan_mq, "fo-a[0-9]+", b"to every a", headers={"Content-Type": "text/plain"})
    assert resp.status == 201, resp.body
    copies = resp.json()["messages"]
    assert [c["queue"] for c in copies] == ["fo-a1", "fo-a10", "fo-a2"]
    assert len({c["id"] for c in copies}) == 3
    for copy in copies:
        got = fan_mq.fetch(copy["queue"])
        assert (got.status, got.body, got.header("X-Message-Id"), got.header("Content-Type")) == \
            (200, b"to every a", copy["id"], "text/plain")
        assert fan_mq.delete(copy["queue"], copy["id"]).status == 204
    assert fan_mq.fetch("fo-b1").status == 204


def test_the_pattern_must_match_the_whole_name(fan_mq):
    create(fan_mq, "fo-whole-x")
    resp = fan_out(fan_mq, "fo-whole")
    assert resp.status == 404 and resp.json() == {
        "error": "not_found", "message": "no queue matches 'fo-whole'"}
    assert fan_out(fan_mq, "fo-whole.*").status == 201


@pytest.mark.parametrize("pattern, query, why", [
    ("fo-(", "", "bad regular expression"),
    ("x" * 1001, "", "over 1000 characters"),
    ("", "", "qre"),
    ("fo-.*", "&dedup_id=k", "'dedup_id'"),  # Not a parameter of a fan-out.
    ("fo-.*", "&delay=-1", "delay"),
])
def test_a_bad_fan_out_is_400_and_adds_nothing(fan_mq, pattern, query, why):
    create(fan_mq, f"fo-bad-{len(query)}-{len(pattern)}")
    resp = fan_out(fan_mq, pattern, query=query)
    assert resp.status == 400 and resp.json()["error"] == "invalid"
    assert why in resp.json()["message"]
    assert not ready_messages(fan_mq.port, f"fo-bad-{len(query)}-{len(pattern)}")


def test_a_delay_applies_to_every_copy(fan_mq):
    create(fan_mq, "fo-later-1", "fo-later-2")
    resp = fan_out(fan_mq, "fo-later-.*", query="&delay=60")
    assert resp.status == 201
    assert all(c["due"] > 0 for c in resp.json()["messages"])
    assert fan_mq.fetch("fo-later-1").status == 204 and fan_mq.fetch("fo-later-2").status == 204


def test_a_copy_one_queue_refuses_fails_the_whole_fan_out_and_leaves_no_copy(fan_mq):
    create(fan_mq, "fo-lim-big", "fo-lim-small")
    assert fan_mq.request("PATCH", "/fo-lim-small/properties", b'{"max_body_bytes": 10}').status == 200
    resp = fan_out(fan_mq, "fo-lim-.*", b"y" * 100)
    assert resp.status == 413 and "fo-lim-small" in resp.json()["message"]
    # The copy the other queue had taken is taken back: a retry will not make a duplicate.
    assert not ready_messages(fan_mq.port, "fo-lim-big")
    assert fan_mq.fetch("fo-lim-big").status == 204



def test_a_failed_fan_out_leaves_no_part_in_an_accumulating_queue(fan_mq):
    create(fan_mq, "fo-acc-parts", "fo-acc-tiny")
    assert fan_mq.request("PATCH", "/fo-acc-parts/properties", b'{"accum": 0.5}').status == 200
    assert fan_mq.request("PATCH", "/fo-acc-tiny/properties", b'{"max_body_bytes": 10}').status == 200
    resp = fan_out(fan_mq, "fo-acc-.*", b"y" * 100)
    assert resp.status == 413 and "fo-acc-tiny" in resp.json()["message"]
    # The copy that joined a window is a part, not a message: it must leave its window too,
    # or the compound would deliver a copy of a fan-out its client was told failed.
    windows = fan_mq.root / "accum" / "fo-acc-parts"
    assert [part for window in files_in(windows) for part in files_in(windows / window)] == []
    fan_mq.add("fo-acc-parts", b"control")
    poll_for(lambda: not files_in(windows), what="every window of fo-acc-parts closed")
    bodies = [m["body"] for m in ready_messages(fan_mq.port, "fo-acc-parts")]
    assert len(bodies) == 1 and b"control" in bodies[0] and b"y" * 100 not in bodies[0], bodies

# -- the save actor in-process, on disks that fail -------------------------------------------


def fan_out_in_process(actors: Actors, *requests):
    """One batch of the save actor; its results, one per request."""
    return actors.save.handle(list(requests)).results


@pytest.mark.parametrize("failure", [{"write": errno.ENOSPC}, {"flush_data": errno.EIO},
                                     {"flush": errno.EIO}], ids=["write", "flush_data", "flush"])
def test_a_fan_out_the_disk_fails_answers_503_and_leaves_no_copy(tmp_path, failure):
    disk = FailingDisk("fs", **failure)
    actors = Actors(tmp_path, disk)
    disk.armed = False
    for queue in ("a", "b", "c"):
        actors.store.queues.create_queue(queue)
    # A failing write lets the plain add and the first copy through: the second copy fails.
    disk.after["write"] = disk.calls.get("write", 0) + 2
    disk.armed = True
    plain, fanned = fan_out_in_process(
        actors, actor_request("add", queue="c", body=b"alone"),
        actor_request("add_fanout", queues=["a", "b"], body=b"both", content_type="", due=None))
    assert isinstance(fanned, Unavailable), fanned
    for queue in ("a", "b"):
        assert files_in(actors.store.queue_dir(queue)) == []
    assert files_in(actors.store.folder("new")) == []
    if "write" in failure:  # the plain add of the batch is answered on its own
        assert plain["queue"] == "c"


def test_fan_outs_and_adds_in_one_batch_each_get_their_own_answer(tmp_path):
    actors = Actors(tmp_path)
    for queue in ("a", "b"):
        actors.store.queues.create_queue(queue)
    results = fan_out_in_process(
        actors,
        actor_request("add_fanout", queues=["a", "b"], body=b"1", content_type="", due=None),
        actor_request("add", queue="a", body=b"2"),
        actor_request("add_fanout", queues=["a", "a"], body=b"3", content_type="", due=None),
        actor_request("add_fanout", queues=["b", "gone"], body=b"4", content_type="", due=None))
    first, plain, repeated, partly = results
    assert [m["queue"] for m in first["messages"]] == ["a", "b"]
    assert plain["queue"] == "a" and isinstance(repeated, Invalid)
    # A queue that no longer exists is left out; it is not created.
    assert [m["queue"] for m in partly["messages"]] == ["b"]
    assert not actors.store.queues.queue_exists("gone")
    assert len(files_in(actors.store.queue_dir("a"))) == 2
    assert len(files_in(actors.store.queue_dir("b"))) == 2



@pytest.mark.parametrize("failure", ["refused", "rename"])
def test_a_failed_fan_out_is_taken_back_before_its_flush_and_announced_to_no_one(tmp_path, failure):
    # Copies into a ready queue, an accumulating one (a part, in its window) and a delaying
    # one; the last copy fails: refused by its queue, or its rename into the queue fails.
    disk = FailingDisk("fs", rename=errno.ENOSPC, after={"rename": 3})
    disk.armed = False
    actors = Actors(tmp_path, disk)
    for queue, props in (("a", {}), ("b", {"accum": 3600}), ("c", {"delay": 60}),
                         ("d", {"max_body_bytes": 1} if failure == "refused" else {})):
        actors.store.queues.create_queue(queue)
        if props:
            assert isinstance(actors.call("props_put", queue=queue, properties=props), dict)
    disk.armed = failure == "rename"
    disk.calls.clear()
    batch = actors.save.handle([actor_request("add_fanout", queues=["a", "b", "c", "d"], body=b"xy",
                                              content_type="", due=None)])
    [result] = batch.results
    assert isinstance(result, TooLarge if failure == "refused" else Unavailable), result
    # No fetch actor or mover hears of a copy: none could be claimed before it is taken back.
    assert (batch.ready, batch.hidden) == ({}, [])
    for queue in ("a", "b", "c", "d"):
        assert files_in(actors.store.queue_dir(queue)) == []
    assert [part for _, window in actors.store.accumulation.list_windows()
            for part in files_in(actors.store.window_dir("b", window))] == []
    for folder in ("new", "delay"):
        assert [name for name in files_in(actors.store.folder(folder)) if ":" in name] == []

def readme_session() -> list[tuple[str, bytes]]:
    """(command, output) of each `$ ` line of README.md's fan-out session."""
    section = README.read_text().split("## Fan-out and pull-any", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"^```console\n(.*?)^```$", section, re.S | re.M)[0]
    return [(chunk.partition("\n")[0], chunk.partition("\n")[2].encode())
            for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]]


def normalized(output: bytes) -> bytes:
    """Output without its ids and the headers the README trims (Date, Server)."""
    output = output.replace(b"\r\n", b"\n")
    output = re.sub(rb"^(Date|Server): .*\n", b"", output, flags=re.M)
    return IDS.sub(b"ID", output).rstrip(b"\n")


def test_the_readme_session_runs_as_written(fan_mq):
    session = readme_session()
    assert len(session) >= 8
    for command, expected in session:
        command = command.replace("127.0.0.1:8080", f"127.0.0.1:{fan_mq.port}")
        result = subprocess.run(["bash", "-c", command], capture_output=True, timeout=30)
        assert normalized(result.stdout) == normalized(expected), command


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_save_actors_killed_during_fan_outs_lose_no_acknowledged_copy_and_leave_no_partial_body(
        start_mq):
    mq = start_mq(workers=2, timeout=30)
    queues = [f"crash-{n}" for n in range(4)]
    create(mq, *queues, "other")
    acked, statuses, stop = [], [], threading.Event()

    def produce(first: int) -> None:
        seq = first
        while not stop.is_set():
            body = checked_body(seq, 1000 + seq % 9000)
            try:
                resp = request(mq.port, "POST", "/_mq/messages?qre=crash-.*", body, timeout=15)
            except OSError:
                continue
            statuses.append(resp.status)
            if resp.status == 201:
                acked.append((body, resp.json()["messages"]))
            seq += 4

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for thread in producers:
        thread.start()
    try:
        # save-0 is the one the front sends adds to first. A kill may find it between batches,
        # with nothing in hand: it is killed again (at most six times) until one was not.
        kills = 0
        while kills < 2 or (503 not in statuses and kills < 6):
            before = len(acked)
            poll_for(lambda: len(acked) > before + 5, 30, what="fan-outs to be acknowledged")
            mq.wait_for_new_pid("save-0", mq.kill_child("save-0"), timeout=10)
            kills += 1
        before = len(acked)
        poll_for(lambda: len(acked) > before + 5, 30, what="fan-outs after the restarts")
    finally:
        stop.set()
        for thread in producers:
            thread.join(30)
    assert set(statuses) <= {201, 503}, set(statuses)
    assert 503 in statuses  # some fan-outs were in the killed actors' hands
    stored = {queue: {m["id"]: m["body"] for m in ready_messages(mq.port, queue)}
              for queue in queues}
    for queue, messages in stored.items():
        assert all(body_is_whole(body) for body in messages.values()), queue
    for body, copies in acked:
        assert sorted(c["queue"] for c in copies) == queues
        for copy in copies:
            assert stored[copy["queue"]].get(copy["id"]) == body
    assert not ready_messages(mq.port, "other")
