"""The durable peers of bench/peers.py on temporary folders, the native load tools (wrk,
redis-benchmark), and the file ceiling.

beanstalkd runs with `-b DIR -f0` (its binlog in DIR, fsync after every write); Redis with
`appendonly yes`, `appendfsync always` (the AOF fsynced before each write is answered) and no
RDB snapshots. Nothing is installed here: a missing program stops the bench with what to install.
"""

import ctypes
import os
import re
import shutil
import socket
import subprocess
import time

from ports import free_port

#: The programs and the Debian packages that have them.
PACKAGES = {"beanstalkd": "beanstalkd", "redis-server": "redis-server",
            "redis-benchmark": "redis-tools", "wrk": "wrk"}


def missing_programs() -> list[str]:
    """Lines saying which Debian package to install for each program not on PATH."""
    return [f"{program}: apt-get install {package}" for program, package in PACKAGES.items()
            if shutil.which(program) is None]


def wait_for_port(port: int, proc: subprocess.Popen, name: str, timeout: float = 30) -> None:
    """Wait until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {port}")


class Server:
    """A peer server process on a free port of 127.0.0.1 and its data folder."""

    def __init__(self, name: str, folder: str, argv_for_port):
        self.name, self.folder = name, folder
        os.makedirs(folder, exist_ok=True)
        self.port = free_port()
        self.argv = argv_for_port(self.port)
        self.log = open(os.path.join(os.path.dirname(folder), f"{name}.log"), "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=folder)
        wait_for_port(self.port, self.proc, name)

    @property
    def command(self) -> str:
        """The command line it runs with."""
        return " ".join(self.argv)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def beanstalkd(folder: str) -> Server:
    """beanstalkd with its binlog in folder, fsync after every write."""
    return Server("beanstalkd", folder,
                  lambda port: ["beanstalkd", "-l", "127.0.0.1", "-p", str(port),
                                "-b", folder, "-f0"])


def redis(folder: str) -> Server:
    """redis-server with an append-only file fsynced before each reply, no snapshots."""
    return Server("redis", folder, lambda port: [
        "redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", folder,
        "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"])


def file_ceiling(folder: str, seconds: float, batch: int = 256, spares: bool = False) -> dict:
    """What the file system allows mq's way: per batch, `batch` new 100-byte files, a rename of
    each into another folder, and two syncfs(2) (one after the writes, one after the
    renames, as a save actor's flush does). Messages per second, and each batch's seconds.

    spares: each file is not created but taken from a pool by a rename and written over (then
    cut to length), and renamed back into the pool after the batch, as mq's spare files are
    (docs/FORMAT.md, "Spare files"); the rename back is timed too.

    The files are left in folder for the caller to remove once every measurement is done: on
    ext4 without a journal, deleting files makes creates near them slower for hours (the
    allocator skips recently freed inodes one by one), which would tilt what runs next."""
    libc = ctypes.CDLL(None, use_errno=True)
    new, ready, spare = (os.path.join(folder, name) for name in ("new", "ready", "spare"))
    for path in (new, ready, spare):
        os.makedirs(path, exist_ok=True)
    for i in range(batch if spares else 0):
        with open(os.path.join(spare, f"s{i}"), "wb") as f:
            f.write(b"s" * 100)
    handle = os.open(folder, os.O_RDONLY)
    body, count, latencies, serial = b"c" * 100, 0, [], 0
    libc.syncfs(handle)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            t0 = time.perf_counter()
            names = [f"{serial + i:012d}" for i in range(batch)]
            serial += batch
            pool = sorted(os.listdir(spare)) if spares else []
            for name in names:
                path = os.path.join(new, name)
                if pool:
                    os.rename(os.path.join(spare, pool.pop()), path)
                    fd = os.open(path, os.O_WRONLY)
                else:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, body)
                if spares:
                    os.ftruncate(fd, len(body))
                os.close(fd)
            libc.syncfs(handle)
            for name in names:
                os.rename(os.path.join(new, name), os.path.join(ready, name))
            libc.syncfs(handle)
            latencies.append(time.perf_counter() - t0)
            count += batch
            for name in names if spares else ():
                os.rename(os.path.join(ready, name), os.path.join(spare, name))
        elapsed = time.perf_counter() - started
    finally:
        os.close(handle)
    return {"messages": count, "seconds": elapsed, "latencies": latencies}


def wrk_threads() -> int:
    """wrk's threads: 2 on a small machine, one per 4 cores on a big one (a wrk thread is a
    core's worth of load, and 2 of them saturate before a 16-core mq does)."""
    return max(2, (os.cpu_count() or 2) // 4)


def wrk(port: int, script: str, path: str, connections: int, seconds: float) -> dict:
    """wrk with one of bench/wrk's scripts: messages per second (from its RESULT line, answers
    other than 2xx left out and counted as refused), p50, p99."""
    threads = min(wrk_threads(), connections)
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                          "-s", script, f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    match = re.search(r"^RESULT (.*)$", out, re.M)
    if not match:
        raise RuntimeError(f"wrk printed no RESULT line:\n{out}")
    fields = dict(item.split("=") for item in match.group(1).split())
    seconds_run = int(fields["duration_us"]) / 1e6
    refused = int(fields["non2xx"])
    done = int(fields["deletes"]) if "deletes" in fields else int(fields["requests"]) - refused
    return {"per_s": done / seconds_run, "p50": int(fields["p50_us"]) / 1e6,
            "p99": int(fields["p99_us"]) / 1e6, "refused": refused}


def redis_benchmark(port: int, test: str, connections: int, requests: int) -> dict:
    """redis-benchmark -t test (lpush or rpop) with 100-byte values: per second, p50, p99."""
    out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c",
                          str(connections), "-n", str(requests), "-d", "100", "-t", test, "--csv"],
                         capture_output=True, text=True, timeout=600).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0].lower().startswith(test):
            # "test", "rps", then latencies in ms: avg, min, p50, p95, p99, max.
            return {"per_s": float(cells[1]), "p50": float(cells[4]) / 1000,
                    "p99": float(cells[6]) / 1000}
    raise RuntimeError(f"redis-benchmark printed no {test} line:\n{out}")
