"""mqctl against a real daemon (--url) and a real root (--root): every command, the export
format's byte-exact round trip, tail -f, exit statuses, the progress bar, and README.md's
examples as written. mqctl's main() runs in this process (cli_support.run_ctl); tail -f, a
closed pipe, Ctrl-C, the terminal and the README's shell lines start it as a process."""

import base64
import fcntl
import json
import os
import pty
import queue as queues
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import mq.ctl.main
import mq.ctl.tail
from cli_support import MQCTL, run_ctl, run_forked
from support import Daemon, free_port
from repo_support import REPO

from mq.store import Store

README = REPO / "docs" / "COMMANDS.md"
#: Bodies that JSON text alone could not carry: empty, a newline, U+2028, NUL, bytes that are
#: not UTF-8 (and so go in base64), every byte value, random bytes.
BODIES = [
    (b"plain text", "text/plain"),
    (b"", None),
    ("unicode \u00e9 \u2713 \u2028 line\nbreak\r\n".encode(), "text/plain; charset=utf-8"),
    (b"nul \x00 inside", None),
    (b"\xff\xfe not utf-8", "application/x-bin"),
    (bytes(range(256)), "application/x-bin"),
    (os.urandom(5000), None),
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon for the module; each test uses queues of its own."""
    workdir = tmp_path_factory.mktemp("mqctl-daemon")
    mq = Daemon(workdir / "root", workdir, workers=2, timeout=30)
    try:
        yield mq.start().wait_ready()
    finally:
        mq.cleanup()


class Ctl:
    """mqctl with the options that point it at a daemon or a root."""

    def __init__(self, where: list[str], daemon: Daemon | None = None):
        self.where, self.daemon = where, daemon

    def argv(self, *args) -> list[str]:
        """The command line of one run as a process."""
        return MQCTL + self.where + [str(arg) for arg in args]

    def run(self, *args, input: bytes = b"") -> subprocess.CompletedProcess:
        """Run to the end in this process, with stdin, stdout and stderr as bytes."""
        return run_ctl(self.where + list(args), input=input)

    def ok(self, *args, input: bytes = b"") -> bytes:
        """Run; assert exit status 0 and a silent stderr; return stdout."""
        result = self.run(*args, input=input)
        assert result.returncode == 0, (args, result.returncode, result.stderr)
        assert result.stderr == b"", result.stderr
        return result.stdout

    def records(self, *args) -> list[dict]:
        """Run; the JSON lines it printed."""
        return [json.loads(line) for line in self.ok(*args).splitlines()]

    def fails(self, status: int, *args, input: bytes = b"") -> str:
        """Run; assert the exit status and one `mqctl: ` line on stderr, no traceback; return it."""
        result = self.run(*args, input=input)
        assert result.returncode == status, (args, result.returncode, result.stderr)
        err = result.stderr.decode()
        assert err.startswith("mqctl: ") and err.count("\n") == 1 and err.endswith("\n"), err
        return err

    def fill(self, queue: str, bodies: list[bytes]) -> None:
        """Add many messages fast: concurrent adds share the daemon's flushes; a root gets
        them through `load --lines`."""
        if self.daemon is None:
            self.ok("load", queue, "--lines", input=b"\n".join(bodies))
            return
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda body: self.daemon.add(queue, body), bodies))


@pytest.fixture(params=["url", "root"])
def ctl(request, tmp_path) -> Ctl:
    """mqctl on the module's daemon, or on a fresh root of its own with no daemon."""
    if request.param == "url":
        daemon = request.getfixturevalue("daemon")
        return Ctl(["--url", f"http://127.0.0.1:{daemon.port}"], daemon)
    root = tmp_path / "local-root"
    Store(str(root)).init()
    return Ctl(["--root", str(root)])


@pytest.fixture
def q() -> str:
    """A queue name no other test uses (the daemon is shared)."""
    return f"ctl-{uuid.uuid4().hex[:10]}"


def body_of(record: dict) -> bytes:
    """The body bytes a record carries."""
    if record.get("encoding") == "base64":
        return base64.b64decode(record["body"])
    return record["body"].encode()


def put_bodies(ctl: Ctl, queue: str, tmp_path: Path) -> list[str]:
    """Add BODIES through `mqctl put --file`; their ids."""
    ids = []
    for n, (body, content_type) in enumerate(BODIES):
        path = tmp_path / f"body{n}"
        path.write_bytes(body)
        typed = ["--content-type", content_type] if content_type else []
        ids.append(ctl.ok("put", queue, "--file", path, *typed).decode().strip())
    return ids


def test_put_stat_peek_get_ack_purge(ctl, q, tmp_path):
    binary = b"\x00\xffbinary"
    (tmp_path / "bin").write_bytes(binary)
    first = ctl.ok("put", q, "hello").decode().strip()
    second = ctl.ok("put", q, "--file", tmp_path / "bin", "--content-type", "application/x-bin")
    second = second.decode().strip()
    third = ctl.ok("put", q, input=b"from stdin").decode().strip()
    ctl.ok("put", q, "later", "--delay", "300")
    assert json.loads(ctl.ok("stat", q))["ready"] == 3  # The delayed one is not ready.

    peeked = ctl.records("peek", q)
    assert [r["id"] for r in peeked] == [first, second, third]
    assert [body_of(r) for r in peeked] == [b"hello", binary, b"from stdin"]
    assert peeked[1]["encoding"] == "base64" and peeked[1]["content_type"] == "application/x-bin"
    assert {r["queue"] for r in peeked} == {q} and all(r["created_ms"] > 0 for r in peeked)
    assert [r["id"] for r in ctl.records("peek", q, "-n", 1, "--after", first)] == [second]
    assert ctl.ok("peek", q, "-n", 1, "--body") == b"hello\n"

    got = json.loads(ctl.ok("get", q))
    assert (got["id"], got["attempts"], body_of(got)) == (first, 1, b"hello")
    assert json.loads(ctl.ok("stat", q))["ready"] == 2
    ctl.ok("ack", q, got["id"], got["receipt"])
    ctl.fails(3, "ack", q, got["id"], got["receipt"])  # Gone.

    assert ctl.ok("get", q, "--ack", "--body") == binary + b"\n"
    assert json.loads(ctl.ok("purge", q)) == {"queue": q, "purged": 2}  # The third, the delayed.
    assert json.loads(ctl.ok("stat", q))["ready"] == 0
    assert ctl.run("get", q).returncode == 1
    assert ctl.run("peek", q).returncode == 1


def test_export_then_load_is_byte_exact(ctl, q, tmp_path):
    ids = put_bodies(ctl, q, tmp_path)
    want = [(body, content_type or "application/octet-stream") for body, content_type in BODIES]

    def exported(queue: str, *args) -> list[tuple[bytes, str]]:
        return [(body_of(r), r["content_type"]) for r in ctl.records("export", queue, *args)]

    assert exported(q) == want
    dump = tmp_path / "dump.jsonl"
    summary = json.loads(ctl.ok("export", q, "-o", dump))
    assert summary == {"queue": q, "exported": len(BODIES), "consumed": False, "to": str(dump)}
    records = [json.loads(line) for line in dump.read_bytes().split(b"\n")[:-1]]
    assert [r["id"] for r in records] == ids and {r["attempts"] for r in records} == {0}
    assert json.loads(ctl.ok("load", f"{q}-copy", dump)) == {"queue": f"{q}-copy", "loaded": len(BODIES)}
    assert exported(f"{q}-copy") == want

    folder = tmp_path / "files"
    ctl.ok("export", q, "--folder", folder)
    assert sorted(os.listdir(folder)) == ids
    assert [(folder / i).read_bytes() for i in ids] == [body for body, _ in BODIES]
    ctl.ok("load", f"{q}-files", folder)
    assert [body for body, _ in exported(f"{q}-files")] == [body for body, _ in BODIES]

    assert json.loads(ctl.ok("stat", q))["ready"] == len(BODIES)  # Reading consumed nothing.
    consumed = tmp_path / "consumed.jsonl"
    assert json.loads(ctl.ok("export", q, "--consume", "-o", consumed))["exported"] == len(BODIES)
    assert [(body_of(r), r["attempts"]) for r in map(json.loads, consumed.read_bytes().splitlines())] \
        == [(body, 1) for body, _ in BODIES]
    # Acknowledged, not merely in flight: purge (which counts in-flight messages) finds none.
    assert json.loads(ctl.ok("purge", q))["purged"] == 0


def test_load_lines_from_stdin_and_dedup(ctl, q, tmp_path):
    loaded = ctl.ok("load", q, "--lines", input=b"one\ntwo\r\n\n  \nthree")  # Blank lines skipped.
    assert json.loads(loaded) == {"queue": q, "loaded": 3}
    assert [(r["body"], r["content_type"]) for r in ctl.records("peek", q)] \
        == [(body, "text/plain") for body in ("one", "two", "three")]

    dump = tmp_path / "dump.jsonl"
    ctl.ok("export", q, "-o", dump)
    ctl.ok("load", f"{q}-d", dump, "--dedup")
    ctl.ok("load", f"{q}-d", "--dedup", input=dump.read_bytes())  # Again, from stdin: no copies.
    assert [r["body"] for r in ctl.records("peek", f"{q}-d")] == ["one", "two", "three"]


def test_options_may_come_between_the_positionals(ctl, q, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"one\ntwo\n")
    assert json.loads(ctl.ok("load", q, "--lines", lines)) == {"queue": q, "loaded": 2}
    ctl.ok("put", q, "--content-type", "application/json", "{}")
    ctl.ok("put", q, "--delay", "300", "later")
    assert [(body_of(r), r["content_type"]) for r in ctl.records("peek", q)] == \
        [(b"one", "text/plain"), (b"two", "text/plain"), (b"{}", "application/json")]
    got = json.loads(ctl.ok("get", q))
    ctl.ok("ack", q, got["id"], "--timeout", "10", got["receipt"])
    assert ctl.ok("peek", q, "--body", "-n", "1") == b"two\n"
    ctl.fails(2, "put", q, "--content-type", "text/plain", "body", "extra")


def test_reading_pages_past_one_peek(ctl, q):
    count = 1003  # One peek returns 1000 at most.
    bodies = [b"m%d" % n for n in range(count)]
    ctl.fill(q, bodies)
    records = ctl.records("export", q)
    assert sorted(body_of(r) for r in records) == sorted(bodies)
    ids = [r["id"] for r in records]
    assert ids == sorted(ids)  # Oldest first, across pages.
    assert ctl.ok("peek", q, "-n", 1001, "--body").split() == [body_of(r) for r in records[:1001]]
    assert ctl.ok("tail", q, "-n", 2, "--body").split() == [body_of(r) for r in records[-2:]]


#: Runs a command with Ctrl-C at its default, as a terminal starts one: a test run started in
#: the background by a shell ignores SIGINT, every process it starts inherits that, and an
#: mqctl started so rightly goes on ignoring it.
WITH_CTRL_C = [sys.executable, "-c", "import os, signal, sys; "
               "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"]


class Following:
    """`mqctl tail -f -n 1 --body` running, its stdout lines read by a thread, so that each
    read has a deadline."""

    def __init__(self, ctl: Ctl, queue: str):
        argv = ctl.argv("tail", "-f", "-n", 1, "--interval", 0.05, "--body", queue)
        self.proc = subprocess.Popen(WITH_CTRL_C + argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines: queues.Queue = queues.Queue()
        threading.Thread(target=self.pump, daemon=True).start()

    def pump(self) -> None:
        """Move each line of tail's stdout to the queue; None at its end."""
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, count: int = 1) -> list[bytes]:
        """The next `count` lines, each within 20 s."""
        return [self.lines.get(timeout=20) for _ in range(count)]

    def __enter__(self) -> "Following":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def test_tail_follows_new_messages_without_consuming(ctl, q):
    for body in ("old", "older is not shown", "before"):
        ctl.ok("put", q, body)
    assert ctl.ok("tail", q, "-n", 2, "--body") == b"older is not shown\nbefore\n"

    with Following(ctl, q) as tail:
        assert tail.next() == [b"before\n"]  # Printed: tail has made its first look.
        for body in ("after 1", "after 2"):
            ctl.ok("put", q, body)
        assert tail.next(2) == [b"after 1\n", b"after 2\n"]
    assert tail.proc.stderr.read() == b""
    assert json.loads(ctl.ok("stat", q))["ready"] == 5  # Nothing was consumed.


def test_tail_shows_a_message_that_became_ready_after_a_newer_one(daemon, q):
    # A delayed message keeps the id of its add: it becomes ready after newer ids were shown.
    # (Url only: on a root without a daemon, only a get moves due messages back.)
    ctl = Ctl(["--url", f"http://127.0.0.1:{daemon.port}"], daemon)
    ctl.ok("put", q, "first")
    with Following(ctl, q) as tail:
        assert tail.next() == [b"first\n"]
        ctl.ok("put", q, "late", "--delay", 1.5)
        ctl.ok("put", q, "newer")
        assert sorted(tail.next(2)) == [b"late\n", b"newer\n"]


def test_tail_ends_quietly_on_ctrl_c_and_when_its_reader_goes_away(daemon, q):
    ctl = Ctl(["--url", f"http://127.0.0.1:{daemon.port}"], daemon)
    ctl.ok("put", q, "first")
    with Following(ctl, q) as tail:
        assert tail.next() == [b"first\n"]
        tail.proc.send_signal(signal.SIGINT)
        assert (tail.proc.wait(20), tail.proc.stderr.read()) == (0, b"")

    proc = subprocess.Popen(ctl.argv("tail", "-f", "-n", 1, "--interval", 0.05, q),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert select.select([proc.stdout], [], [], 20)[0] and proc.stdout.readline()
        proc.stdout.close()  # As `| head -1` does.
        ctl.ok("put", q, "second")  # Its line meets a closed pipe.
        assert (proc.wait(20), proc.stderr.read()) == (141, b"")
    finally:
        proc.kill()
        proc.wait(10)


class CtrlCAt:
    """A tracer for mqctl's main() in a forked child, on during the first poll of tail -f's
    loop (the second Follower.poll): it counts the points where a Ctrl-C used to hang tail,
    each line run inside a context manager's __enter__ or __exit__ while the lock it wraps is
    held (the HTTP client's pool and connection locks), and sends SIGINT at the one numbered
    `at` (0: none, only count; the loop then ends at its next poll, as when its reader goes
    away)."""

    LOCK = type(threading.Lock())

    def __init__(self, at: int = 0):
        self.at, self.polls, self.points = at, 0, 0

    @classmethod
    def a_lock(cls, frame) -> bool:
        """True in the __enter__ or __exit__ of a lock, or of an object holding one, that is
        held: a KeyboardInterrupt raised there leaves it held."""
        if frame.f_code.co_name not in ("__enter__", "__exit__"):
            return False
        owner = frame.f_locals.get("self")
        locks = [owner] if isinstance(owner, cls.LOCK) else [
            value for value in getattr(owner, "__dict__", {}).values() if isinstance(value, cls.LOCK)]
        return any(lock.locked() for lock in locks)

    def __call__(self, frame, event, arg):
        if event == "line" and self.a_lock(frame):
            self.points += 1
            if self.points == self.at:
                signal.raise_signal(signal.SIGINT)
        return self

    def poll(self, real_poll):
        """Follower.poll, traced the second time (the loop's first poll), stopped the third
        time when only counting."""
        def poll(follower):
            self.polls += 1
            if self.polls == 3 and not self.at:
                raise BrokenPipeError
            sys.settrace(self if self.polls == 2 else None)
            try:
                yield from real_poll(follower)
            finally:
                sys.settrace(None)
        return poll

    def run(self, argv: list[str]) -> int:
        """mqctl's main(argv), with SIGINT as a fresh Python process has it; when counting,
        the count goes to stderr."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        mq.ctl.tail.Follower.poll = self.poll(mq.ctl.tail.Follower.poll)
        status = mq.ctl.main.main(argv)
        if not self.at:
            print(self.points, file=sys.stderr)
        return status


def test_tail_ends_on_ctrl_c_inside_any_lock_of_its_http_calls(daemon, q):
    """Ctrl-C at each point of one poll where the HTTP client holds a lock in the __enter__ or
    __exit__ that takes or gives it back: tail -f ends with 0 and nothing on stderr, never
    hangs (Python's KeyboardInterrupt there left the lock held, and the client's clean-up
    waited on it for ever)."""
    ctl = Ctl(["--url", f"http://127.0.0.1:{daemon.port}"], daemon)
    ctl.ok("put", q, "first")
    argv = ctl.where + ["tail", "-f", "-n", "1", "--interval", "0.01", "--body", q]
    env = dict(os.environ)
    counted = run_forked(CtrlCAt().run, argv, env)
    assert counted.returncode == 141, counted  # Stopped as `| head` stops it, after one poll.
    points = int(counted.stderr)
    assert points >= 2, points  # A lock's __enter__ and __exit__, at least.
    for at in range(1, points + 1):
        result = run_forked(CtrlCAt(at).run, argv, env, timeout=20)
        assert (at, result.returncode, result.stderr) == (at, 0, "")


def test_exit_statuses(ctl, q, tmp_path):
    for command in ("stat", "peek", "get", "tail", "export", "purge"):
        assert "does not exist" in ctl.fails(3, command, "no-such-queue")
    ctl.fails(2, "put", "bad:name", "x")
    for reserved in (".", "..", "_mq"):
        assert "reserved" in ctl.fails(2, "put", reserved, "x")
    ctl.fails(2, "put", q, "x", "--delay", "soon")
    ctl.fails(2, "put", q, "x", "--delay", "1", "--at", "1800000000")
    ctl.fails(2, "peek", q, "-n", "0")
    ctl.fails(2, "frobnicate", q)
    ctl.fails(2, "--url", "http://127.0.0.1:1", "--root", str(tmp_path), "stat", q)

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"body": "fine"}\n{"body": 42}\n{"body": "never read"}\n')
    err = ctl.fails(2, "load", q, bad)
    assert f"{bad} line 2" in err and "1 loaded before it" in err
    ctl.fails(2, "load", q, input=b'{"body": "x", "encoding": "base64"}\n')
    ctl.fails(2, "load", q, tmp_path / "missing.jsonl")

    assert ctl.run("get", q).returncode == 0  # The one good record is there...
    result = ctl.run("get", q)
    assert (result.returncode, result.stdout, result.stderr) == (1, b"", b"")  # ...and no more.
    assert ctl.run("peek", q).returncode == 1
    ctl.fails(3, "ack", q, str(uuid.UUID(int=1)), f"{uuid.UUID(int=1)}.1")


def test_unreachable_daemon_is_unavailable():
    ctl = Ctl(["--url", f"http://127.0.0.1:{free_port()}", "--retries", "1"])
    assert "cannot reach" in ctl.fails(4, "stat", "q")


def test_a_root_must_exist_and_be_a_root(tmp_path):
    assert "no such folder" in Ctl(["--root", str(tmp_path / "missing")]).fails(3, "stat", "q")
    assert not (tmp_path / "missing").exists()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    assert "not an mq root" in Ctl(["--root", str(tmp_path / "home")]).fails(4, "stat", "q")
    assert os.listdir(tmp_path / "home") == ["notes.txt"]


def test_an_empty_folder_is_refused_as_unavailable_and_left_empty(tmp_path):
    # The empty mount point of a shared file system not mounted: a root made there would be a
    # second one, its messages lost to the daemons of the real root.
    mount = tmp_path / "mnt"
    mount.mkdir()
    ctl = Ctl(["--root", str(mount)])
    for args in (("put", "q", "x"), ("stat", "q"), ("load", "q", "--lines")):
        err = ctl.fails(4, *args, input=b"a\n")
        assert f"{mount} is not an mq root" in err and "--create-root" in err, err
    assert os.listdir(mount) == []


def test_create_root_makes_a_root_only_in_a_missing_or_empty_folder(tmp_path):
    empty, missing, home = tmp_path / "empty", tmp_path / "missing" / "root", tmp_path / "home"
    empty.mkdir()
    for root in (empty, missing):
        ctl = Ctl(["--root", str(root), "--create-root"])
        assert ctl.ok("put", "q", "x")
        assert (root / "FORMAT").read_text() == "mq-format 1\n"
        # Made: plain --root opens it, and --create-root on a root opens it as it is.
        assert json.loads(Ctl(["--root", str(root)]).ok("stat", "q"))["ready"] == 1
        assert json.loads(ctl.ok("stat", "q"))["ready"] == 1
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    assert "neither empty nor an mq root" in Ctl(["--root", str(home)]).fails(
        2, "--create-root", "stat", "q")
    assert os.listdir(home) == ["notes.txt"]
    assert "go with --root" in Ctl([]).fails(2, "--create-root", "stat", "q")


def test_root_id_refuses_another_root(tmp_path):
    root = tmp_path / "root"
    root_id = Store(str(root)).init()
    assert Ctl(["--root", str(root), "--root-id", root_id]).ok("put", "q", "x")
    other = "00000000-0000-7000-8000-000000000000"
    err = Ctl(["--root", str(root)]).fails(4, "--root-id", other, "put", "q", "y")
    assert f"is another root (ID {root_id}, not {other}" in err
    assert json.loads(Ctl(["--root", str(root)]).ok("stat", "q"))["ready"] == 1


def run_on_terminal(argv: list[str], timeout: float = 30) -> bytes:
    """Run with stdout and stderr on a 100-column pseudo-terminal; everything it wrote there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            assert ready, f"no output for {timeout} s; so far {out!r}"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end.
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(10)
    assert proc.returncode == 0, out
    return out


def test_progress_bar_on_a_terminal_only(ctl, q, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("".join(f"message {n}\n" for n in range(40)))
    result = ctl.run("load", q, source, "--lines")
    assert (result.returncode, result.stderr) == (0, b"")  # Piped: no bar.
    dump = tmp_path / "dump.jsonl"
    result = ctl.run("export", q, "-o", dump)
    assert (result.returncode, result.stderr) == (0, b"")

    shown = run_on_terminal(ctl.argv("load", f"{q}-2", dump))
    assert b"40/40" in shown and b"msg/s" in shown and b"100%" in shown, shown
    shown = run_on_terminal(ctl.argv("export", q, "-o", tmp_path / "again.jsonl"))
    assert b"40/40" in shown and b"msg/s" in shown, shown
    shown = run_on_terminal(ctl.argv("export", q))  # The records are the data: no bar among them.
    assert b"msg/s" not in shown and shown.count(b"\n") == 40


def test_help_and_readme_list_the_exit_statuses():
    shown = run_ctl(["--help"])
    assert (shown.returncode, shown.stderr) == (0, b"")
    statuses = [line for line in shown.stdout.decode().splitlines()
                if re.fullmatch(r"  \d  \S.*", line)]
    assert [line.split()[0] for line in statuses] == ["0", "1", "2", "3", "4", "5", "6"]
    assert "\n".join(statuses) in README.read_text()


#: What differs from run to run in the README's output: ids (and receipts), creation times.
VARYING = [(re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"ID"),
           (re.compile(rb'"created_ms":\d+'), b'"created_ms":MS')]


def readme_examples() -> list[tuple[str, bytes]]:
    """(command, expected output) of each `$ ` line in the code blocks of README's mqctl section."""
    text = README.read_text()
    section = text[text.index("### mqctl"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    examples = []
    for block in re.findall(r"^```console\n(.*?)^```$", section, re.S | re.M):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            examples.append((command, output.encode()))
    return examples


def normalized(output: bytes) -> bytes:
    """Output with its varying parts replaced."""
    for pattern, stand_in in VARYING:
        output = pattern.sub(stand_in, output)
    return output


#: One mqctl command with nothing for a shell to do but split its words (plain or in '...').
PLAIN_COMMAND = re.compile(r"mqctl(?: (?:[\w.=-]+|'[^'\\]*'))+")


def test_readme_examples_run_as_written(daemon, tmp_path, monkeypatch):
    examples = readme_examples()
    assert len(examples) >= 8
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "mqctl"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mq.ctl.main "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "MQ_URL": f"http://127.0.0.1:{daemon.port}",
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    monkeypatch.chdir(tmp_path)
    for command, expected in examples:
        if PLAIN_COMMAND.fullmatch(command):
            # Its words as the shell splits them, to main() in this process.
            ran = run_ctl(shlex.split(command)[1:], env=env)
            printed = ran.stdout + ran.stderr
        else:  # Pipes, lists, redirections, $?: bash runs the line, mqctl as a process.
            printed = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, timeout=60,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
        assert normalized(printed) == normalized(expected), command
