"""Start the real mq daemon on a free loopback port and a temporary root, and talk to it.

Nothing here is mocked: `Daemon` runs the installed `mq` command as its own process group,
reads the JSON log lines it writes, finds its children by their process titles with psutil,
and sends plain HTTP with the standard library's http.client. Waits poll with a deadline.
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import psutil

from repo_support import bench_importable

# The benchmarks' port rule (bench/ports.py) is the tests' too: one rule for every daemon started.
bench_importable()
from ports import free_port  # noqa: E402,F401  (re-exported for the tests)

#: Folder of the interpreter running the tests; the project's commands live beside it.
BIN = Path(sys.executable).parent
#: The queue wait_ready() adds to and deletes, so that every save actor is known to answer.
PROBE_QUEUE = "mq-test-probe"
#: "mq: save actor 0 [/root]" -> ("save", "0"); "mq: front [/root]" -> front.
TITLE = re.compile(r"^mq: (?:(front)(?: (\d+))?|(\w+) actor (\d+)) \[")


def command(name: str) -> str:
    """Path of one of the project's console scripts (mq, mq-mover, mq-reaper)."""
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    assert found, f"{name} is not installed next to {sys.executable} nor on PATH"
    return found


def poll_for(predicate, timeout: float = 30.0, interval: float = 0.02, what: str = "",
             ignore: tuple = ()):
    """Call predicate until it returns something true and return that; fail at the deadline.

    Exceptions of the types in `ignore` count as "not yet". The default deadline is for what
    happens eventually, with room for a loaded machine (each step several times slower); a
    test of a promised bound passes that bound.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except ignore as err:
            last = err
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for "
                                 f"{what or getattr(predicate, '__name__', predicate)}; last: {last!r}")
        time.sleep(interval)


def fetch_actor_for(queue: str, workers: int) -> int:
    """Which fetch actor owns a queue (the daemon's rule: crc32 of the name modulo workers)."""
    return zlib.crc32(queue.encode()) % workers


def queue_owned_by(index: int, workers: int, prefix: str = "q") -> str:
    """A queue name that fetch actor `index` of `workers` owns."""
    for n in range(10_000):
        name = f"{prefix}{n}"
        if fetch_actor_for(name, workers) == index:
            return name
    raise AssertionError("no queue name found")


def checked_body(seq: int, size: int) -> bytes:
    """A body that carries its own length and SHA-256, so a partial or mixed body is caught."""
    payload = os.urandom(size)
    return b"%d:%d:%s:" % (seq, size, hashlib.sha256(payload).hexdigest().encode()) + payload


def body_is_whole(body: bytes) -> bool:
    """True when a body made by checked_body is complete and unchanged."""
    try:
        _, size, digest, payload = body.split(b":", 3)
    except ValueError:
        return False
    return len(payload) == int(size) and hashlib.sha256(payload).hexdigest().encode() == digest


@dataclass
class Response:
    """What came back for one request."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self):
        """The body parsed as JSON."""
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        """One response header, or None."""
        return self.headers.get(name)


def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None, timeout: float = 15.0,
            context: ssl.SSLContext | None = None) -> Response:
    """One HTTP request to 127.0.0.1:port on a new connection (HTTPS, verified by the
    context, when one is given)."""
    conn = (http.client.HTTPConnection("127.0.0.1", port, timeout=timeout) if context is None
            else http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return Response(resp.status, resp.headers, resp.read())
    finally:
        conn.close()


def unreachable(resp: Response) -> bool:
    """True for the 503 the front gives while an actor is not connected (starting, restarting)."""
    return resp.status == 503 and b"being restarted" in resp.body


def read_json_lines(path: Path, offset: int = 0) -> list[dict]:
    """The JSON objects of a log file from a byte offset; other lines are skipped."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return []
    return json_objects(data)


def init_root_at_once(root: Path, makers: int) -> list:
    """What Store(root).init() returned in each of `makers` children forked from this process
    and released together by a barrier (fresh interpreters cost seconds of CPU and start too
    far apart to race as well); fails when a maker failed."""
    import multiprocessing

    from mq.store import Store

    forks = multiprocessing.get_context("fork")
    start, said = forks.Barrier(makers), forks.SimpleQueue()

    def make_root() -> None:
        start.wait(60)
        said.put(Store(str(root)).init())

    procs = [forks.Process(target=make_root) for _ in range(makers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0] * makers, "a maker failed: its traceback is above"
    return [said.get() for _ in procs]


def lines_logging(path: Path, offset: int, events: tuple[str, ...]) -> tuple[list[str], int]:
    """The lines of a log from offset to its last whole line that log one of the events (found
    as text, without parsing every line), and the offset to read on from next time."""
    with open(path, "rb") as log:
        log.seek(offset)
        data = log.read()
    whole = data[:data.rfind(b"\n") + 1]  # A line being written is read next time.
    found = [line for line in whole.decode(errors="replace").splitlines()
             if any(f'"event": "{e}"' in line or f'"event":"{e}"' in line for e in events)]
    return found, offset + len(whole)


def json_objects(data: bytes) -> list[dict]:
    """The lines of data that are JSON objects; other lines are skipped."""
    out = []
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


class LogLines:
    """The JSON lines of a log file from an offset, each parsed once: a wait that looks at the
    log every 20 ms parses what was written since its last look, not the whole log again."""

    def __init__(self):
        self.key: tuple[int, int] | None = None
        self.position = 0
        self.lines: list[dict] = []

    def read(self, path: Path, offset: int) -> list[dict]:
        """Every JSON line from offset to the last whole line (read anew when the file was
        replaced, cut short or the offset moved)."""
        try:
            with open(path, "rb") as f:
                info = os.fstat(f.fileno())
                if self.key != (info.st_ino, offset) or info.st_size < self.position:
                    self.key, self.position, self.lines = (info.st_ino, offset), offset, []
                f.seek(self.position)
                data = f.read()
        except FileNotFoundError:
            return []
        whole = data.rfind(b"\n") + 1  # A line still being written is read once it ends.
        self.lines.extend(json_objects(data[:whole]))
        self.position += whole
        return list(self.lines)


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Adopt the orphans of killed supervisors, so that they can be reaped here.

    Without this they are re-parented to PID 1, which on some hosts never reaps them.
    """
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Collect the exit status of every adopted child that has exited."""
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError):
            pass


def descendants(pid: int) -> list[psutil.Process]:
    """A process's descendants, found through /proc/PID/task/*/children where Linux has it:
    psutil's children(recursive=True) reads every process of the machine, about 8 ms of CPU a
    call on a busy one, and the tests ask for a daemon's children every few milliseconds
    while they wait for a restart."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        if not os.path.exists(f"/proc/{pid}"):
            raise psutil.NoSuchProcess(pid)
        return psutil.Process(pid).children(recursive=True)  # No children files here.
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    todo += [int(child) for child in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            if parent == pid:
                raise psutil.NoSuchProcess(pid) from None
            continue  # Gone meanwhile, with its children (re-parented: not this tree's now).
        if parent != pid:
            found.append(parent)
    return [proc for proc in map(process_or_none, found) if proc is not None]


def process_or_none(pid: int) -> psutil.Process | None:
    """The process, or None once it is gone."""
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def alive(proc: psutil.Process) -> bool:
    """True while a process exists and is not a zombie."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def create_root(root: Path, *args: str) -> subprocess.CompletedProcess:
    """mq --create-root on root; the completed process (its stdout: the root's ID)."""
    return subprocess.run([command("mq"), f"--root={root}", "--create-root", *args],
                          capture_output=True, text=True, timeout=60)


class Daemon:
    """One real `mq` process tree on its own root, port and log files."""

    def __init__(self, root: Path, workdir: Path, port: int | None = None, workers: int = 2,
                 timeout: float = 30, args: tuple = (), env: dict | None = None,
                 log_file: Path | None = None, make_root: bool = True):
        """make_root: with --peers, make the root first when there is none (mq --create-root,
        as an operator does: a daemon sharing a root never makes one)."""
        self.root = Path(root)
        self.make_root = make_root
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.workers = workers
        self.timeout = timeout
        self.args = list(args)
        self.env = {**os.environ, **(env or {})}
        self.log_file = log_file
        self.stdout_path = self.workdir / "mq.stdout.log"
        self.stderr_path = self.workdir / "mq.stderr.log"
        self.proc: subprocess.Popen | None = None
        self.log_offset = 0
        self.log_lines = LogLines()

    # -- life -------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The command line this daemon runs with."""
        argv = [command("mq"), f"--root={self.root}", f"--port={self.port}",
                f"--workers={self.workers}", f"--timeout={self.timeout}"]
        if self.log_file:
            argv.append(f"--log-file={self.log_file}")
        return argv + self.args

    @property
    def log_path(self) -> Path:
        """Where this daemon's JSON log lines go."""
        return self.log_file or self.stdout_path

    def start(self) -> "Daemon":
        """Start the supervisor in its own process group (so the whole tree can be killed)."""
        shared = any(a.startswith("--peers=") and a != "--peers=0" for a in self.args)
        if shared and self.make_root and not (self.root / "FORMAT").exists():
            create_root(self.root)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=err, env=self.env,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        """The supervisor's pid."""
        return self.proc.pid

    def running(self) -> bool:
        """True while the supervisor has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = 30.0, from_logs: bool = True) -> "Daemon":
        """Wait until every process has started and the front reaches every actor.

        from_logs=False skips waiting for the start lines (for --log-level=warning).
        """
        expected = {"front-0", "mover-0", "reaper-0"}
        expected |= {f"{kind}-{i}" for kind in ("save", "fetch") for i in range(self.workers)}

        def started():
            assert self.running(), f"mq exited with {self.proc.returncode}: {self.stderr()}"
            names = {line.get("process") for line in self.events()
                     if line.get("event") in ("actor.start", "front.start")}
            return expected <= names

        if from_logs:
            poll_for(started, timeout, what="every process of the tree to log its start")
        for i in range(self.workers):
            name = queue_owned_by(i, self.workers, prefix="mq-test-probe-")
            poll_for(lambda: self.request("GET", f"/{name}").status == 404, timeout,
                     what=f"fetch actor {i} to answer", ignore=(OSError,))
        answered = []

        def saves_answer():
            resp = self.request("POST", f"/{PROBE_QUEUE}/messages", b"probe")
            answered.append(not unreachable(resp))
            return answered[-self.workers:] == [True] * self.workers

        poll_for(saves_answer, timeout, what="every save actor to answer", ignore=(OSError,))
        # 404 or 503 when saving fails (a full disk).
        assert self.request("DELETE", f"/{PROBE_QUEUE}").status in (204, 404, 503)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send sig to the supervisor and return its exit code.

        The supervisor itself may take DRAIN_SECONDS + 2 for the front and 5 for the actors
        (17 s) before it kills what lingers; the default leaves a loaded machine room above it.
        """
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill_tree(self) -> None:
        """kill -9 of the supervisor and every child at once (its whole process group)."""
        procs = [psutil.Process(self.pid)] + self.tree_processes()
        os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait(10)
        poll_for(lambda: not any(alive(p) for p in procs), 10, what="the killed tree to be gone")
        reap_orphans()

    def cleanup(self) -> None:
        """Kill whatever is left of the tree (kill -9 of its process group) and reap it.

        Tests that care how the daemon stops stop it themselves; at the end only speed counts.
        """
        if self.proc is None:
            return
        procs = self.tree_processes()
        if self.proc.returncode is None:
            # Not collected yet, so its pid (the group's id) is nobody else's.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            # Collected: once its group is empty, its number may be another test's daemon
            # group by now, so only the members still here (adopted orphans) are killed.
            procs = self.group_leftovers()
            for proc in procs:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
        try:
            self.proc.wait(10)
            poll_for(lambda: not any(alive(p) for p in procs), 10, what="the tree to be gone")
        except (subprocess.TimeoutExpired, AssertionError):
            pass
        reap_orphans()
        for line in self.events("supervisor.start"):
            # A run folder outside the root (a root path too long for ipc://) is not in tmp_path.
            if not Path(line["run_dir"]).is_relative_to(self.root):
                shutil.rmtree(line["run_dir"], ignore_errors=True)

    def group_leftovers(self) -> list[psutil.Process]:
        """Live processes of this tree's process group among this process's descendants
        (orphans are adopted here: become_subreaper)."""
        out = []
        for proc in psutil.Process().children(recursive=True):
            try:
                if os.getpgid(proc.pid) == self.proc.pid and alive(proc):
                    out.append(proc)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
        return out

    # -- what it says -----------------------------------------------------------------

    def events(self, name: str | None = None) -> list[dict]:
        """The JSON log lines written since start(), optionally only one event."""
        lines = self.log_lines.read(self.log_path, self.log_offset)
        return [line for line in lines if name is None or line.get("event") == name]

    def wait_for_events(self, name: str, count: int = 1, timeout: float = 30.0,
                        **fields) -> list[dict]:
        """Wait until at least `count` lines of one event with these field values were logged
        since start(); return them all. Debug events need the daemon run with --log-level=debug."""
        def logged():
            lines = [line for line in self.events(name)
                     if all(line.get(k) == v for k, v in fields.items())]
            return lines if len(lines) >= count else None

        shown = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return poll_for(logged, timeout, what=f"{count} {name} line(s) ({shown}) in the log")

    def stderr(self) -> str:
        """What the daemon wrote to standard error."""
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def run_dir(self) -> Path:
        """The folder of this tree's sockets and health.json (from the supervisor.start line)."""
        line = poll_for(lambda: self.events("supervisor.start"), 10)[-1]
        return Path(line["run_dir"])

    def run_dir_name(self) -> str:
        """The name of this daemon's folder in the root's run/ ({host}-{supervisor pid})."""
        return f"{socket.gethostname()}-{self.pid}"

    def health(self) -> dict:
        """The supervisor's health.json."""
        return json.loads((self.run_dir() / "health.json").read_text())

    # -- its processes ----------------------------------------------------------------

    def tree_processes(self) -> list[psutil.Process]:
        """The supervisor's live children."""
        try:
            return [p for p in descendants(self.pid) if alive(p)]
        except psutil.NoSuchProcess:
            return []

    def children(self) -> dict[str, psutil.Process]:
        """Live children by the name their process title gives: front-0, save-0, mover-0..."""
        out = {}
        for proc in self.tree_processes():
            try:
                title = " ".join(proc.cmdline())
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            match = TITLE.match(title)
            if match:
                front, front_index, kind, index = match.groups()
                out[f"front-{front_index or 0}" if front else f"{kind}-{index}"] = proc
        return out

    def titles(self) -> list[str]:
        """The process titles of the tree, supervisor first."""
        out = []
        for proc in [psutil.Process(self.pid)] + self.tree_processes():
            try:
                out.append(" ".join(proc.cmdline()))
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass
        return out

    def pid_of(self, name: str) -> int:
        """The pid of one child, waiting briefly for it to exist."""
        return poll_for(lambda: (p := self.children().get(name)) and p.pid, 10,
                        what=f"a process titled as {name}")

    def kill_child(self, name: str) -> int:
        """kill -9 one child; return its pid."""
        pid = self.pid_of(name)
        os.kill(pid, signal.SIGKILL)
        return pid

    def wait_for_new_pid(self, name: str, old_pid: int, timeout: float = 20.0) -> int:
        """Wait until a child with that title runs under a pid other than old_pid.

        A test of the restart bound passes that bound as timeout; the default only waits.
        """
        return poll_for(lambda: (p := self.children().get(name)) and p.pid != old_pid and p.pid,
                        timeout, what=f"{name} to be restarted with a new pid")

    # -- HTTP ---------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None, timeout: float = 15.0) -> Response:
        """One HTTP request to this daemon."""
        return request(self.port, method, path, body, headers, timeout)

    def add(self, queue: str, body: bytes, content_type: str | None = None) -> str:
        """Add a message; assert 201 and return its id."""
        headers = {"Content-Type": content_type} if content_type else None
        resp = self.request("POST", f"/{queue}/messages", body, headers)
        assert resp.status == 201, (resp.status, resp.body)
        return resp.header("X-Message-Id")

    def fetch(self, queue: str) -> Response:
        """Fetch a message (200 with it, 204 when none)."""
        return self.request("GET", f"/{queue}/messages")

    def delete(self, queue: str, message_id: str) -> Response:
        """Delete one message."""
        return self.request("DELETE", f"/{queue}/messages/{message_id}")

    def drain(self, queue: str, want: set[str], timeout: float = 30.0) -> dict[str, bytes]:
        """Fetch and delete until every id in want was seen (or the deadline); return id -> body."""
        seen: dict[str, bytes] = {}

        def step():
            while (resp := self.fetch(queue)).status == 200:
                message_id = resp.header("X-Message-Id")
                seen[message_id] = resp.body
                self.delete(queue, message_id)
            assert resp.status == 204, (resp.status, resp.body)
            return want <= set(seen)

        poll_for(step, timeout, interval=0.05, what=f"all {len(want)} messages of {queue}")
        return seen


#: Linux sock_diag (netlink) constants, for unix_socket_unread_bytes.
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST, _NLM_F_DUMP, _NLMSG_ERROR, _NLMSG_DONE = 0x1, 0x300, 2, 3
_UDIAG_SHOW_NAME, _UDIAG_SHOW_RQLEN, _UNIX_DIAG_NAME, _UNIX_DIAG_RQLEN = 0x01, 0x10, 0, 4
_TCP_LISTEN = 10


def unix_socket_unread_bytes(path: str | Path) -> int:
    """Bytes sent to the Unix socket bound at path that its owner has not read yet.

    The sum of the receive queues of every connection accepted on that socket, as the kernel
    reports it to `ss -x` (sock_diag over netlink, no privileges needed). A stopped process
    reads nothing, so each request sent to it makes this grow.
    """
    want = os.fsencode(str(path))
    req = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0,
                      _UDIAG_SHOW_NAME | _UDIAG_SHOW_RQLEN, 0xFFFFFFFF, 0xFFFFFFFF)
    header = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY,
                         _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
    total = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as nl:
        nl.sendall(header + req)
        while True:
            data = nl.recv(1 << 16)
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind == _NLMSG_DONE:
                    return total
                if kind == _NLMSG_ERROR:
                    raise OSError(-struct.unpack_from("=i", data, at + 16)[0], "sock_diag failed")
                state = data[at + 18]  # struct unix_diag_msg: family, type, state, pad, ino...
                name, unread = None, 0
                attr, end = at + 32, at + length
                while attr + 4 <= end:
                    attr_len, attr_type = struct.unpack_from("=HH", data, attr)
                    if attr_len < 4:
                        break
                    if attr_type == _UNIX_DIAG_NAME:
                        name = data[attr + 4:attr + attr_len].rstrip(b"\0")
                    elif attr_type == _UNIX_DIAG_RQLEN:
                        unread = struct.unpack_from("=I", data, attr + 4)[0]
                    attr += (attr_len + 3) & ~3
                if name == want and state != _TCP_LISTEN:  # A listener's "queue" is its backlog.
                    total += unread
                at += (length + 3) & ~3


def files_in(folder: Path) -> list[str]:
    """Names in a folder, or [] when it does not exist."""
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []


def ready_daemon(workdir: Path, **options):
    """A module-scoped fixture's daemon on workdir/root (Daemon's options), started and ready;
    yield from it, and its tree is killed when the module is done."""
    daemon = Daemon(Path(workdir) / "root", workdir, **options)
    try:
        daemon.start()
        daemon.wait_ready()
        yield daemon
    finally:
        daemon.cleanup()
