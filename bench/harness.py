"""What the benchmarks share: a real mq daemon on a free port, a keep-alive HTTP client,
percentiles, and the facts about the machine that RESULTS.md records.

Not a test helper and not part of the installed package: the scripts beside it import it
(`python bench/depth.py` puts bench/ on sys.path).
"""

import asyncio
import http.client
import math
import os
import platform
import resource
import signal
import subprocess
import sys
import time

from ports import free_port


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` shows them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def load1() -> float:
    """The 1 minute load average."""
    return float(loadavg().split()[0])


def add_calm_options(parser, what: str) -> None:
    """--tmp, --max-load and --calm-wait: where the root lives and how quiet the machine must be."""
    import tempfile

    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help=f"folder for the temporary {what} (its file system is the one measured)")
    parser.add_argument("--max-load", type=float, default=1.5,
                        help="wait before measuring while the 1-minute load is at least this")
    parser.add_argument("--calm-wait", type=float, default=120,
                        help="longest wait for the load to fall, in seconds (default 120)")


def wait_for_calm(max_load: float, max_wait: float, say=print) -> float:
    """Wait (up to max_wait seconds) until the 1-minute load is under max_load; return it."""
    deadline = time.monotonic() + max_wait
    load = load1()
    while load >= max_load and time.monotonic() < deadline:
        say(f"  load {load:.2f} >= {max_load}: waiting for the machine to calm down")
        time.sleep(10)
        load = load1()
    return load


def machine() -> dict:
    """nproc, memory, kernel, Python: what a figure means depends on them."""
    with open("/proc/meminfo") as f:
        total_kb = int(f.readline().split()[1])
    return {
        "nproc": os.cpu_count(),
        "memory": f"{total_kb / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def filesystem(path: str) -> str:
    """The file system type and device that holds path, from `df -T`."""
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True, check=True).stdout
        device, fstype = out.splitlines()[1].split()[:2]
        return f"{fstype} on {device}"
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        return "unknown"


def code_under_test() -> str:
    """Which mq the daemon will run: a bench/snapshot.sh folder (with its commit) or the tree."""
    import mq

    package = os.path.dirname(os.path.realpath(mq.__file__))
    marker = os.path.join(os.path.dirname(package), "COMMIT")
    if os.path.exists(marker):
        with open(marker) as f:
            return f"snapshot of commit {f.read().strip()[:12]} in {os.path.dirname(package)}"
    try:
        head = subprocess.run(["git", "-C", package, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        top = subprocess.run(["git", "-C", package, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", top, "status", "--porcelain", "--",
                                "core", "actors", "http", "supervisor"],
                               capture_output=True, text=True).stdout.strip()
        return f"work tree at {head}{' with uncommitted changes' if dirty else ''} ({package})"
    except (OSError, subprocess.CalledProcessError):
        return package


def machine_line(path: str | None = None) -> str:
    """machine() (and the file system holding path) as one line for a report."""
    facts = machine()
    line = (f"{facts['nproc']} cores, {facts['memory']}, Linux {facts['kernel']}, "
            f"Python {facts['python']}")
    return f"{line}, {filesystem(path)}" if path else line


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) of values, nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def summary(name: str, values: list[float]) -> str:
    """One line of latencies in ms: count, median, p90, p99, p99.9, max and min."""
    if not values:
        return f"{name:<34} no samples"
    ps = [percentile(values, p) * 1000 for p in (50, 90, 99, 99.9)]
    return (f"{name:<34} n={len(values):>6}  median {ps[0]:8.2f}  p90 {ps[1]:8.2f}  "
            f"p99 {ps[2]:8.2f}  p99.9 {ps[3]:8.2f}  max {max(values) * 1000:8.2f}  "
            f"min {min(values) * 1000:8.2f}  (ms)")


def thread_cpu() -> complex:
    """This thread's CPU seconds, user as the real part and system as the imaginary part
    (getrusage RUSAGE_THREAD: the kernel's work in its own system calls counts)."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return complex(usage.ru_utime, usage.ru_stime)


def cpu_snapshot(procs: dict) -> dict:
    """{name: user+system CPU seconds} of each psutil.Process (a vanished one gives nan)."""
    import psutil

    snap = {}
    for name, proc in procs.items():
        try:
            times = proc.cpu_times()
            snap[name] = times.user + times.system
        except psutil.Error:
            snap[name] = float("nan")
    return snap


class AsyncClient:
    """One keep-alive HTTP/1.1 connection over asyncio streams, for thousands side by side."""

    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None

    async def open(self) -> "AsyncClient":
        """Connect; return self."""
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: dict | None = None) -> tuple[int, dict, bytes]:
        """(status, headers with lower-case names, body)."""
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
        head = await self.reader.readuntil(b"\r\n\r\n")
        first, *rest = head.decode("latin-1").split("\r\n")
        found = {}
        for line in rest:
            if line:
                key, _, value = line.partition(":")
                found[key.strip().lower()] = value.strip()
        length = int(found.get("content-length", "0"))
        data = await self.reader.readexactly(length) if length else b""
        return int(first.split(" ", 2)[1]), found, data

    def close(self) -> None:
        """Close the connection."""
        if self.writer is not None:
            self.writer.close()


class Client:
    """One keep-alive HTTP/1.1 connection; each call returns (status, headers, body)."""

    def __init__(self, port: int, timeout: float = 120.0):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
        self.conn.request(method, path, body=body, headers=headers or {})
        response = self.conn.getresponse()
        return response.status, response.headers, response.read()

    def close(self) -> None:
        self.conn.close()


class Daemon:
    """`mq` (the whole supervised tree) on a free port of 127.0.0.1, stopped with SIGTERM."""

    def __init__(self, root: str, workers: int | str, sync: str = "fs", port: int | None = None,
                 extra: list[str] | None = None, log_path: str | None = None):
        self.root = root
        self.port = port or free_port()
        self.log_path = log_path or os.path.join(os.path.dirname(root), f"mq-{self.port}.log")
        self.argv = [sys.executable, "-m", "mq.supervisor.main", "--root", root,
                     "--port", str(self.port), "--workers", str(workers), "--sync", sync,
                     *(extra or [])]
        self.proc: subprocess.Popen | None = None

    @property
    def command(self) -> str:
        """The command line, as `mq` would be typed."""
        return "mq " + " ".join(self.argv[3:])

    def start(self, ready_queue: str = "bench-ready", timeout: float = 60.0) -> "Daemon":
        """Start and wait until the front answers and every save actor has stored a message.

        The probe messages go to ready_queue, which the benchmarks never measure.
        """
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        in_a_row = 0
        while in_a_row < 16:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mq exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mq did not become ready; see {self.log_path}")
            try:
                client = Client(self.port, timeout=5)
                status, _, _ = client.request("POST", f"/{ready_queue}/messages", b"ready")
                client.close()
                in_a_row = in_a_row + 1 if status == 201 else 0
            except OSError:
                in_a_row = 0
            if in_a_row == 0:
                time.sleep(0.1)
        return self

    def processes(self) -> dict:
        """{name: psutil.Process} of the tree: supervisor, front, mover, reaper, fetch-0, save-0..."""
        import psutil

        out = {"supervisor": psutil.Process(self.proc.pid)}
        for child in out["supervisor"].children(recursive=True):
            try:
                # Titles (setproctitle): "mq: front [root]", "mq: fetch actor 1 [root]".
                words = " ".join(child.cmdline()).split(" [")[0].split()
            except psutil.Error:
                continue
            if len(words) >= 2 and words[0] == "mq:":
                kind = words[1]
                if kind == "front" and len(words) == 3:  # "mq: front 1 [root]" (--fronts 2 or more)
                    out[f"front-{words[2]}"] = child
                    continue
                out[kind if len(words) < 4 or kind in ("mover", "reaper") else f"{kind}-{words[3]}"] = child
        return out

    def pss(self) -> dict:
        """{name: proportional set size in bytes} of every process of the tree (see processes):
        a page shared by n processes counts 1/n in each, so the values add up to the tree's."""
        import psutil

        out = {}
        for name, proc in self.processes().items():
            try:
                out[name] = proc.memory_full_info().pss
            except psutil.Error:
                pass
        return out

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM the supervisor this object started, and wait for the tree to drain."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
