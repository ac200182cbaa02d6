"""Flush ordering: a power cut at every point of every state change keeps what was acknowledged.

kill -9 tests cannot see a missing flush: the page cache outlives the process. Here every
change goes through a RecordingDisk (tests/crash_model.py), and for every point of the recorded
operation the test builds the root a power cut would leave (only what a completed flush covered,
plus metadata a journal may have written early), runs the recovery a restart runs, and checks:
- every acknowledged message is there, whole, in exactly one place (queues/ or delay/);
- every acknowledged state change (fetch, ack, delete, extend, queue delete, properties,
  Spark commit) holds;
- at every cut: no message twice, no key naming a missing message, no partial file in a queue
  (with --sync=fs a batch of plain adds has one flush, after its renames: a cut can leave the
  name of an add never acknowledged without its bytes, which every reader refuses), and every
  file a reader takes for a message holds the body its add wrote.
Each operation runs in both sync modes. Actors are served in-process, without sockets.
"""

import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass

import orjson
import pytest

from crash_model import RecordingDisk
from mq.actors.batch import Request
from mq.actors.fetch import FetchActor
from mq.actors.save import SaveActor
from mq.config import Options
from mq.ids import new_id
from mq.pipeline.options import SourceOptions
from mq.pipeline.staging import Stager
from mq.store import (CorruptMessage, Store, decode_message, dedup_digest, parse_entry,
                      split_name)
from mq.store.publishing import publish_job, roll_forward  # The Spark commit: only here.
from mq.store.staging import parse_staged

SYNC_MODES = ("fs", "file")


def request(op: str, **fields) -> Request:
    """A request as the actor loop decodes it."""
    return Request(b"peer", b"\x00" * 7 + b"\x01", dict(fields, op=op))


class Rig:
    """A root served by in-process save and fetch actors over one RecordingDisk."""

    def __init__(self, tmp_path, sync: str):
        self.tmp = tmp_path
        self.root = str(tmp_path / "root")
        self.disk = RecordingDisk(sync)
        self.store = Store(self.root, sync, disk=self.disk)
        self.store.init()
        options = Options(root=self.root, workers=1, timeout=30, sync=sync)
        run_dir = str(tmp_path / "run")
        self.save = SaveActor(options, 0, run_dir, self.store)
        self.fetch = FetchActor(options, 0, run_dir, self.store)
        self.written: dict[str, bytes] = {}  # id -> body of every message added

    def add(self, *adds: dict) -> list[dict]:
        """One batch of adds; every one must succeed."""
        results = self.save.handle([request("add", **a) for a in adds]).results
        assert all(isinstance(r, dict) for r in results), results
        for add, result in zip(adds, results):
            self.written.setdefault(result["id"], add["body"])
        return results

    def call(self, op: str, **fields) -> dict:
        """One request to the fetch actor; it must succeed."""
        result = self.fetch.handle([request(op, **fields)]).results[0]
        assert isinstance(result, dict), result
        return result

    def record(self) -> None:
        """Take the set-up as durable (a syncfs makes it so), snapshot it, log from now on."""
        self.disk.syncfs(self.root)
        self.disk.start_recording(self.root)

    def acked(self, name: str, value=None) -> None:
        """A reply went out now: a power cut from here on must keep what it said."""
        self.disk.mark(name, value)


@dataclass
class Place:
    """A message file found in queues/{q}/ or delay/ after recovery."""

    queue: str
    id: str
    attempts: int
    state: str  # "ready" or "delay"
    mtime_ns: int
    message: object  # a decoded Message, None when the file is not a whole message
    path: str


class View:
    """What a recovered root holds, read into memory (the folder is deleted afterwards)."""

    def __init__(self, root: str):
        self.places: list[Place] = []
        self.queues = set(os.listdir(os.path.join(root, "queues")))
        for queue in self.queues:
            for name in os.listdir(os.path.join(root, "queues", queue)):
                if parsed := parse_entry(name):
                    self._found(root, f"queues/{queue}/{name}", queue, *parsed, "ready")
        for name in os.listdir(os.path.join(root, "delay")):
            if parts := split_name(name):
                self._found(root, f"delay/{name}", *parts, "delay")
        self.keys = {}
        self.dedup_dirs = set(os.listdir(os.path.join(root, "dedup")))
        for queue in self.dedup_dirs:
            for digest in os.listdir(os.path.join(root, "dedup", queue)):
                self.keys[(queue, digest)] = os.readlink(os.path.join(root, "dedup", queue, digest))
        self.props = {}  # name -> bytes, of every properties file
        for name in os.listdir(os.path.join(root, "props")):
            with open(os.path.join(root, "props", name), "rb") as f:
                self.props[name] = f.read()

    def _found(self, root, rel, queue, message_id, attempts, state) -> None:
        path = os.path.join(root, rel)
        with open(path, "rb") as f:
            data = f.read()
        try:
            message = decode_message(queue, message_id, data)
        except CorruptMessage:
            message = None
        self.places.append(Place(queue, message_id, attempts, state, os.stat(path).st_mtime_ns,
                                 message, rel))

    def live(self, message_id: str) -> list[Place]:
        """Where a message is (queues/ or delay/)."""
        return [p for p in self.places if p.id == message_id]


def restart(path: str) -> Store:
    """The recovery a restart runs before any actor serves: folders, FORMAT, new/ cleaned."""
    store = Store(path)
    store.init()
    store.recovery.clean_new()
    return store


def recovered(path: str) -> View:
    """A power-cut root after a restart's recovery."""
    restart(path)
    return View(path)


def check_every_cut(rig: Rig, check, recover=recovered) -> int:
    """Run check(view, acknowledged) on the recovered root of every crash state of the
    recording; return how many distinct states were checked."""
    recording = rig.disk.stop_recording()
    # The log must have seen every change, or the states built from it mean nothing.
    assert recording.divergence() == [], "changes made outside the recording disk"
    assert recording.events, "nothing was recorded"
    views = {}
    for state in recording.crash_states():
        signature = state.signature()
        if signature not in views:
            target = str(rig.tmp / "cut")
            state.materialize(target)
            views[signature] = recover(target)
            shutil.rmtree(target)
        try:
            check(views[signature], recording.acknowledged(state.cut))
        except AssertionError as err:
            raise AssertionError(f"{err}\n{recording.describe(state)}") from None
    assert len(views) > 1, "every cut left the same root: nothing under test was changed"
    return len(views)


def assert_sound(view: View, keys_must_resolve: bool = True, torn: list | None = None) -> None:
    """What must hold at every cut: no message in two places, no partial file in a queue,
    no de-duplication key naming a message that does not exist, no key used twice.

    torn: where a cut may leave the name of an add never acknowledged without its bytes (one
    flush per batch of plain adds): such files are listed there instead of failing; the
    caller's assert_live checks that none of them was acknowledged. (No scenario here removes
    a keyed message, so every key must name a live one.)
    """
    twice = [i for i, n in Counter(p.id for p in view.places).items() if n > 1]
    assert not twice, f"messages in two places: {[(p.path) for p in view.places if p.id in twice]}"
    broken = [p.path for p in view.places if p.message is None]
    if torn is None:
        assert not broken, f"files in a queue that are not whole messages: {broken}"
    else:
        torn.extend(broken)
    keyed = Counter((p.queue, p.message.dedup_digest) for p in view.places
                    if p.message is not None and p.message.dedup_digest)
    assert all(n == 1 for n in keyed.values()), f"one key on two live messages: {keyed}"
    if keys_must_resolve:
        dangling = {k: i for k, i in view.keys.items()
                    if not any(p.id == i and p.queue == k[0] for p in view.places)}
        assert not dangling, f"keys naming a message that does not exist: {dangling}"


def assert_live(view: View, message_id: str, queue: str, body: bytes, state: str = "ready",
                attempts: int = 0, due: float | None = None) -> Place:
    """The message is in exactly one place, that one, whole; due: its due time (mtime)."""
    places = view.live(message_id)
    assert len(places) == 1, f"message {message_id} ({body!r}) is in {len(places)} places"
    place = places[0]
    assert place.message is not None, f"{place.path}, acknowledged, is not a whole message"
    assert (place.queue, place.state, place.attempts) == (queue, state, attempts), \
        f"message {message_id} ({body!r}) is at {place.path}, not {state} in {queue} after " \
        f"{attempts} deliveries"
    assert place.message.body == body, f"{place.path} holds {place.message.body!r}, not {body!r}"
    if due is not None:
        assert place.mtime_ns == int(due * 1e9), \
            f"{place.path} is due at {place.mtime_ns / 1e9}, not at the acknowledged {due}"
    return place


def assert_as_written(view: View, written: dict[str, bytes]) -> None:
    """Every file a reader takes for a message holds the body its add wrote: a torn file, or
    a spare still holding its old message, is refused, never read as this one."""
    wrong = [p.path for p in view.places
             if p.message is not None and p.id in written and p.message.body != written[p.id]]
    assert not wrong, f"files read as messages they do not hold: {wrong}"


def assert_gone(view: View, message_id: str, what: str) -> None:
    """The message is in no queue and not in delay/."""
    assert not view.live(message_id), \
        f"{what}: message {message_id} still at {[p.path for p in view.live(message_id)]}"


def files_of(state) -> dict:
    """path -> content of every file of a crash state."""
    return {p: state.inodes[n[1]][0] for p, n in state.tree.items() if n[0] == "file"}


def test_the_crash_model_keeps_only_what_a_completed_flush_covered(tmp_path):
    root = tmp_path / "root"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
    disk = RecordingDisk("file")
    recording = disk.start_recording(str(root))
    disk.create(f"{root}/a/x", b"data")  # create, write, fsync of the file
    disk.rename(f"{root}/a/x", f"{root}/b/x")
    disk.fsync_dir(f"{root}/b")
    disk.fsync_dir(f"{root}/a")
    disk.stop_recording()
    n = len(recording.events)
    assert [e.kind for e in recording.events] == ["create", "write", "fsync", "rename",
                                                  "fsync_dir", "fsync_dir"]
    # A file's fsync covers its data, never its name; a rename needs both folders flushed.
    assert files_of(recording.state_at(n - 1)) == {}
    assert files_of(recording.state_at(n)) == {"b/x": b"data"}
    # Metadata may reach the disk early, in order: the create alone, or create and rename.
    assert files_of(recording.state_at(n - 1, leaked=1)) == {"a/x": b"data"}
    assert files_of(recording.state_at(n - 1, leaked=4)) == {"b/x": b"data"}
    assert recording.divergence() == []


def test_the_crash_model_leaves_unflushed_data_empty_and_sees_changes_made_around_it(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    disk = RecordingDisk("fs")
    recording = disk.start_recording(str(root))
    disk.create(f"{root}/x", b"data")  # sync=fs: no fsync; the caller's syncfs is due
    disk.rename(f"{root}/x", f"{root}/y")
    assert files_of(recording.state_at(3, leaked=3)) == {"y": b""}
    disk.syncfs(str(root))
    disk.stop_recording()
    assert files_of(recording.state_at(4)) == {"y": b"data"}
    os.rename(root / "y", root / "z")  # Not through the disk: the log cannot know.
    assert recording.divergence() == ["y: log says ('file', b'data', "
                                      f"{os.stat(root / 'z').st_mtime_ns}), root has nothing",
                                      "z: log says nothing, root has ('file', b'data', "
                                      f"{os.stat(root / 'z').st_mtime_ns})"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_add_survives_a_power_cut_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    [old] = rig.add({"queue": "q", "body": b"old"})
    rig.record()
    [one] = rig.add({"queue": "q", "body": b"one"})
    rig.acked("one", (one, b"one"))
    # A second batch: two queues, one of them created by the add, and a delayed message.
    bodies = [b"two", b"three", b"later"]
    results = rig.add({"queue": "q", "body": b"two"}, {"queue": "fresh", "body": b"three"},
                      {"queue": "q", "body": b"later", "due": time.time() + 600})
    for body, result in zip(bodies, results):
        rig.acked(body.decode(), (result, body))

    torn: list = []

    def check(view, acknowledged):
        assert_sound(view, torn=torn if sync == "fs" else None)
        assert_as_written(view, rig.written)
        assert_live(view, old["id"], "q", b"old")
        for result, body in acknowledged.values():
            if result["due"] is None:
                assert_live(view, result["id"], result["queue"], body)
            else:
                assert_live(view, result["id"], result["queue"], body, "delay", 0, result["due"])

    check_every_cut(rig, check)
    # With one flush per batch, some cuts leave a plain add's name without its bytes.
    assert bool(torn) == (sync == "fs"), torn


@pytest.mark.timeout(60)
# With sync=file a key must not become durable before its message has a durable name: the
# folder fsyncs of a batch's last flush come in any order, so the file's name in new/ is made
# durable before the key is recorded, and a cut leaves a key clean_new can see and drop.
@pytest.mark.parametrize("sync", ["fs", "file"])
def test_an_acknowledged_dedup_add_keeps_its_key_on_a_stored_message_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    rig.record()
    [first] = rig.add({"queue": "q", "body": b"first", "dedup_id": "k1"})
    rig.acked("first", first)
    [again] = rig.add({"queue": "q", "body": b"again", "dedup_id": "k1"})
    assert again["id"] == first["id"] and again["duplicate"]
    rig.acked("again", again)
    # Two adds of one key in one batch: the second loses the key and its file is dropped.
    winner, follower = rig.add({"queue": "q", "body": b"x1", "dedup_id": "k2"},
                               {"queue": "q", "body": b"x2", "dedup_id": "k2"})
    assert follower["id"] == winner["id"]
    rig.acked("pair", winner)

    def check(view, acknowledged):
        assert_sound(view)
        if "first" in acknowledged:
            assert view.keys.get(("q", dedup_digest("k1"))) == first["id"], "key k1 lost"
            assert_live(view, first["id"], "q", b"first")
        if "pair" in acknowledged:
            assert view.keys.get(("q", dedup_digest("k2"))) == winner["id"], "key k2 lost"
            assert_live(view, winner["id"], "q", b"x1")
        assert not [p for p in view.places if p.message.body in (b"again", b"x2")], \
            "an add that lost its key was stored"

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_fetch_keeps_the_message_in_flight_until_its_due_time(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    [m1] = rig.add({"queue": "q", "body": b"m1"})
    [m2] = rig.add({"queue": "q", "body": b"m2"})
    rig.record()
    for message in (m1, m2):
        result = rig.call("fetch", queue="q")
        assert result["id"] == message["id"]
        rig.acked(message["id"], result)

    def check(view, acknowledged):
        assert_sound(view)
        for message, body in ((m1, b"m1"), (m2, b"m2")):
            result = acknowledged.get(message["id"])
            if result is None:
                assert len(view.live(message["id"])) == 1, f"{body!r} lost before its fetch"
            else:
                assert_live(view, message["id"], "q", body, "delay", 1, result["due"])

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_ack_or_delete_removes_the_message_for_good(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    [m1] = rig.add({"queue": "q", "body": b"m1"})
    [m2] = rig.add({"queue": "q", "body": b"m2"})
    fetched = rig.call("fetch", queue="q")
    assert fetched["id"] == m1["id"]
    rig.record()
    rig.call("ack", queue="q", id=m1["id"], receipt=fetched["receipt"])
    rig.acked("ack")
    rig.call("delete", queue="q", id=m2["id"])
    rig.acked("delete")

    def check(view, acknowledged):
        assert_sound(view)
        # Before its reply, an ack or delete may have taken effect or not; never anything else.
        if "ack" in acknowledged:
            assert_gone(view, m1["id"], "after an acknowledged ack")
        elif view.live(m1["id"]):
            assert_live(view, m1["id"], "q", b"m1", "delay", 1, fetched["due"])
        if "delete" in acknowledged:
            assert_gone(view, m2["id"], "after an acknowledged delete")
        elif view.live(m2["id"]):
            assert_live(view, m2["id"], "q", b"m2")

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_extend_keeps_its_due_time_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    [m1] = rig.add({"queue": "q", "body": b"m1"})
    fetched = rig.call("fetch", queue="q")
    rig.record()
    dues = [fetched["due"]]
    for seconds in (600, 900):
        result = rig.call("extend", queue="q", id=m1["id"], receipt=fetched["receipt"],
                          seconds=seconds)
        dues.append(result["due"])
        rig.acked(f"extend {seconds}", result["due"])

    def check(view, acknowledged):
        assert_sound(view)
        place = assert_live(view, m1["id"], "q", b"m1", "delay", 1)
        # The due time is the last acknowledged one (the fetch's, before any extend), or one
        # set after it whose reply had not gone out.
        allowed = [int(d * 1e9) for d in dues[len(acknowledged):]]
        assert place.mtime_ns in allowed, \
            f"due at {place.mtime_ns / 1e9} after {len(acknowledged)} acknowledged extends " \
            f"(allowed: {[a / 1e9 for a in allowed]})"

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_queue_delete_leaves_no_message_key_or_properties(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    rig.call("props_put", queue="q", properties={"retry": 3})
    [m1] = rig.add({"queue": "q", "body": b"m1", "dedup_id": "k"})
    rig.add({"queue": "q", "body": b"m2"}, {"queue": "q", "body": b"m3"})
    assert rig.call("fetch", queue="q")["id"] == m1["id"]  # One in flight.
    rig.store.notices.post("q")
    # Another queue, with its own key and properties, must not be touched.
    rig.call("props_put", queue="other", properties={"retry": 5})
    [o1] = rig.add({"queue": "other", "body": b"o1", "dedup_id": "k"})
    rig.record()
    result = rig.call("queue_delete", queue="q")
    assert result["in_flight"] == 1
    rig.acked("delete")

    def check(view, acknowledged):
        assert_sound(view)
        assert_live(view, o1["id"], "other", b"o1")
        assert view.keys.get(("other", dedup_digest("k"))) == o1["id"], "other queue's key lost"
        assert "other.json" in view.props, "other queue's properties lost"
        if "delete" in acknowledged:
            assert "q" not in view.queues, "a deleted queue is back"
            assert "q" not in view.dedup_dirs, "a deleted queue's keys are back"
            assert "q.json" not in view.props, "a deleted queue's properties are back"
            assert not [p.path for p in view.places if p.queue == "q"], "its messages are back"

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_acknowledged_queue_properties_survive_whole_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    owns = [rig.call("props_put", queue="q", properties={"retry": 3})["own"]]
    rig.record()
    for op, properties in (("props_put", {"retry": 5}), ("props_patch", {"timeout": 60}),
                           ("props_delete", None)):
        result = rig.call(op, queue="q", properties=properties)
        owns.append(result["own"] or None)
        rig.acked(op)

    def check(view, acknowledged):
        # A properties file is replaced whole: it holds the last acknowledged properties, or
        # properties set after them whose reply had not gone out; never a torn file.
        raw = view.props.get("q.json")
        try:
            found = None if raw is None else orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise AssertionError(f"props/q.json is torn: {raw!r}") from None
        assert found in owns[len(acknowledged):], \
            f"props/q.json holds {found} after {len(acknowledged)} acknowledged changes"

    check_every_cut(rig, check)


def staged_rows(store: Store, job: str) -> dict:
    """body -> (queue, id, mtime_ns) of every file staged for a job."""
    rows = {}
    for folder, _, names in os.walk(store.staging.stage_folder(job)):
        for name in names:
            if parsed := parse_staged(name):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    body = decode_message(parsed[0], parsed[1], f.read()).body
                rows[body] = (parsed[0], parsed[1], os.stat(path).st_mtime_ns)
    return rows


def dedup_window(queue: str) -> float:
    """Seconds a key is remembered (the default property; no queue here sets its own)."""
    return 300.0


def recovered_then_rolled_forward(path: str) -> tuple[View, View]:
    """A power-cut root after a restart, and again after the roll forward the reaper (or the
    next Spark commit) runs once the COMMIT marker has gone quiet."""
    store = restart(path)
    after_restart = View(path)
    roll_forward(store, dedup_window, grace_seconds=0)
    return after_restart, View(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_a_returned_spark_commit_has_every_row_in_its_queue_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    store = rig.store
    [taken] = rig.add({"queue": "s", "body": b"taken", "dedup_id": "k-taken"})
    job = new_id()
    options = SourceOptions.parse({"root": rig.root, "sync": sync})
    # Two task attempts Spark commits and one it gave up on, whose rows must never appear.
    # Each makes its folder when it starts (before the recording: that is not under test).
    first, second, failed = stagers = [Stager(options, job) for _ in range(3)]
    for stager in stagers:
        stager.store = store  # Its changes go through the recording disk.
    rig.record()
    first.stage_row(b"r1", "q", "text/plain", None, None, None)
    first.stage_row(b"r2", "s", "text/plain", "k-new", None, None)
    second.stage_row(b"r3", "q", "text/plain", None, 600, None)
    second.stage_row(b"dup", "s", "text/plain", "k-taken", None, None)
    failed.stage_row(b"junk", "q", "text/plain", None, None, None)
    tasks = [first.finish().task, second.finish().task]
    failed.finish()
    rows = staged_rows(store, job)
    store.staging.mark_committing(job, tasks)
    rig.acked("decided")
    report = publish_job(store, store.staging.stage_folder(job), tasks, dedup_window)
    assert (report["messages"], report["duplicates"]) == (3, 1), report
    rig.acked("committed")

    def all_rows_live(view, when):
        for body in (b"r1", b"r2"):
            queue, message_id, _ = rows[body]
            assert_live(view, message_id, queue, body)
        queue, message_id, due_ns = rows[b"r3"]
        place = assert_live(view, message_id, queue, b"r3", "delay", 0)
        assert place.mtime_ns == due_ns, f"{place.path} lost its due time {when}"
        assert view.keys.get(("s", dedup_digest("k-new"))) == rows[b"r2"][1], f"key lost {when}"

    def check(views, acknowledged):
        after_restart, after_roll_forward = views
        # A key is recorded before its row's rename and may reach the disk first: until the
        # roll forward, it names a row that is still staged (then published, never lost).
        assert_sound(after_restart, keys_must_resolve=False)
        assert_sound(after_roll_forward)
        for view in views:
            assert_live(view, taken["id"], "s", b"taken")
            assert view.keys.get(("s", dedup_digest("k-taken"))) == taken["id"]
            stray = [p.path for p in view.places if p.message.body in (b"junk", b"dup")]
            assert not stray, f"published a row of a failed attempt or a duplicate: {stray}"
        if "committed" in acknowledged:
            all_rows_live(after_restart, "after the commit returned")
        if "decided" in acknowledged:
            all_rows_live(after_roll_forward, "after its COMMIT marker was written")

    check_every_cut(rig, check, recover=recovered_then_rolled_forward)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_batch_add_has_every_message_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    rig.record()
    due = time.time() + 600
    messages = [{"body": b"b0"}, {"body": b"b1", "dedup_id": "k"}, {"body": b"b2", "due": due},
                {"body": b"b3", "dedup_id": "k"}]  # The last repeats the key: b1's id, not stored.
    [batch] = [r for r in rig.save.handle([request("add_batch", queue="q", messages=messages)]).results]
    assert isinstance(batch, dict), batch
    ids = [m["id"] for m in batch["messages"]]
    assert ids[3] == ids[1]
    rig.acked("batch")

    def check(view, acknowledged):
        assert_sound(view)
        assert not [p for p in view.places if p.message.body == b"b3"], "a repeated key was stored"
        if "batch" in acknowledged:
            assert_live(view, ids[0], "q", b"b0")
            assert_live(view, ids[1], "q", b"b1")
            assert_live(view, ids[2], "q", b"b2", "delay", 0, batch["messages"][2]["due"])
            assert view.keys.get(("q", dedup_digest("k"))) == ids[1], "the batch's key lost"

    check_every_cut(rig, check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_an_acknowledged_batch_fetch_then_batch_ack_hold_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    added = rig.save.handle([request("add_batch", queue="q", messages=[
        {"body": b"m0"}, {"body": b"m1"}, {"body": b"m2"}])]).results[0]
    ids = [m["id"] for m in added["messages"]]
    rig.record()
    fetched = rig.call("fetch_batch", queue="q", max=2, wait=0)["messages"]
    assert [m["id"] for m in fetched] == ids[:2]
    rig.acked("fetch")
    result = rig.call("ack_batch", queue="q", receipts=[m["receipt"] for m in fetched])
    assert [r["status"] for r in result["results"]] == ["acked", "acked"]
    rig.acked("ack")

    def check(view, acknowledged):
        assert_sound(view)
        assert_live(view, ids[2], "q", b"m2")  # Never fetched: untouched at every cut.
        for message, body in zip(fetched, (b"m0", b"m1")):
            if "ack" in acknowledged:
                assert_gone(view, message["id"], "after an acknowledged batch ack")
            elif "fetch" in acknowledged:
                # Before the ack's reply it may be removed or not, never ready again early.
                if view.live(message["id"]):
                    assert_live(view, message["id"], "q", body, "delay", 1, message["due"])
            else:
                assert len(view.live(message["id"])) == 1, f"{body!r} lost before its fetch"

    check_every_cut(rig, check)
