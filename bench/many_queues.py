#!/usr/bin/env python3
"""Start-up and the queue list of a daemon on a root with many queues, for one or more commits.

    .venv/bin/python bench/many_queues.py [--queues 10000] [--lists 3] [--rev HEAD~3 ...]

Makes a root with --queues empty queues (queues/{name}/, as the store lays a queue out, made
without a flush each), then for each --rev (bench/snapshot.sh lays its package out and the
daemon runs it through PYTHONPATH) and for the work tree's install: starts the daemon on that
root, times its start until every fetch actor answers a queue's GET (404) and a save actor an
add, then --lists times each of `GET /_mq/queues?filter=...` (one queue matches), `GET
/_mq/stats` (every queue) and `mqctl ls FILTER` (a process, over HTTP), then for --pages
seconds pages of `GET /_mq/queues` (50 queues, as the dashboard polls) back to back from
--page-clients clients at once (CPU per page, pages per second), and finally the CPU the idle
daemon spends in 10 s.
Each figure is wall seconds and the CPU seconds the daemon's processes spent meanwhile, per
process kind (the front, the fetch actors, the reaper, the rest); on a shared machine the wall
moves with the load and the CPU much less.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import psutil
from harness import Client, cpu_snapshot, loadavg, machine_line
from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
FILTER = "09999"


def make_root(root: str, count: int) -> None:
    """A root with `count` empty queues."""
    subprocess.run([os.path.join(BIN, "mq"), "--create-root", f"--root={root}"], check=True,
                   capture_output=True)
    for n in range(count):
        os.mkdir(os.path.join(root, "queues", f"many-{n:05d}"))


def kinds(supervisor: psutil.Process) -> dict:
    """The daemon's processes by name (supervisor, front, fetch-0, ...)."""
    procs = {"supervisor": supervisor}
    for child in supervisor.children(recursive=True):
        title = " ".join(child.cmdline())
        for kind in ("front", "fetch actor", "save actor", "mover", "reaper"):
            if f"mq: {kind}" in title:
                procs[f"{kind.split()[0]}-{child.pid}"] = child
    return procs


def cpu_by_kind(before: dict, after: dict) -> dict:
    """CPU seconds spent between two snapshots, summed per kind of process."""
    spent: dict = {}
    for name, seconds in after.items():
        kind = name.split("-")[0]
        if kind not in ("front", "fetch", "reaper"):
            kind = "rest"
        spent[kind] = spent.get(kind, 0.0) + seconds - before.get(name, 0.0)
    return spent


def line(what: str, wall: float, spent: dict) -> str:
    """One figure: wall seconds and CPU seconds per kind."""
    parts = "  ".join(f"{kind} {spent.get(kind, 0.0):5.2f}" for kind in ("front", "fetch",
                                                                         "reaper", "rest"))
    return f"  {what:<34} wall {wall:6.2f} s   cpu {sum(spent.values()):5.2f} s ({parts})"


def owned_by(index: int, workers: int) -> str:
    """A missing queue's name that fetch actor `index` owns."""
    n = 0
    while zlib.crc32(f"probe-{n}".encode()) % workers != index:
        n += 1
    return f"probe-{n}"


def pages(port: int, procs: dict, args) -> None:
    """First pages of the queue list for --pages seconds, each of --page-clients clients
    asking its own back to back: wall, pages per second and the daemon's CPU per page."""
    done = []

    def client_pages() -> None:
        client = Client(port, timeout=120)
        while time.monotonic() < t0 + args.pages:
            status, _, body = client.request("GET", "/_mq/queues?offset=0&limit=50")
            assert status == 200, body[:300]
            done.append(1)
        client.close()

    threads = [threading.Thread(target=client_pages) for _ in range(args.page_clients)]
    before, t0 = cpu_snapshot(procs), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - t0
    spent = cpu_by_kind(before, cpu_snapshot(procs))
    n = len(done)
    print(line(f"{n} pages, {args.page_clients} client(s)", wall, spent))
    print(f"    {n / wall:6.2f} pages/s, cpu per page {sum(spent.values()) / n * 1000:7.1f} ms,"
          f" load {loadavg()}")


def measure(label: str, root: str, env: dict, args) -> None:
    """Start a daemon of one install on the root and print its figures."""
    port = free_port()
    log = open(os.path.join(args.tmp, f"mq-{label}.log"), "wb")
    argv = [os.path.join(BIN, "mq"), f"--root={root}", f"--port={port}",
            f"--workers={args.workers}", "--fronts=1"]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        supervisor = psutil.Process(proc.pid)
        client = None
        waiting = [owned_by(i, args.workers) for i in range(args.workers)]
        while waiting:
            assert proc.poll() is None, f"mq exited with {proc.returncode}"
            try:
                client = client or Client(port, timeout=120)
                if client.request("GET", f"/{waiting[0]}")[0] == 404:
                    waiting.pop(0)
            except OSError:
                client = None
                time.sleep(0.1)
        assert client.request("POST", "/probe-add/messages", b"x")[0] == 201
        ready = time.monotonic() - started
        procs = kinds(supervisor)
        print(line("start until every actor answers", ready,
                   cpu_by_kind({}, cpu_snapshot(procs))))
        for what, path in (("GET /_mq/queues?filter=" + FILTER, f"/_mq/queues?filter={FILTER}"),
                           ("GET /_mq/stats", "/_mq/stats")):
            for _ in range(args.lists):
                before, t0 = cpu_snapshot(procs), time.monotonic()
                status, _, body = client.request("GET", path)
                wall = time.monotonic() - t0
                assert status == 200, body[:300]
                print(line(what, wall, cpu_by_kind(before, cpu_snapshot(procs))))
        for _ in range(args.lists):
            before, t0 = cpu_snapshot(procs), time.monotonic()
            out = subprocess.run([os.path.join(BIN, "mqctl"), f"--url=http://127.0.0.1:{port}",
                                  "ls", FILTER], capture_output=True, text=True, env=env)
            wall = time.monotonic() - t0
            assert out.returncode == 0 and f"many-{FILTER}" in out.stdout, out
            print(line(f"mqctl ls {FILTER}", wall, cpu_by_kind(before, cpu_snapshot(procs))))
        if args.pages:
            pages(port, procs, args)
        before = cpu_snapshot(procs)
        time.sleep(10)
        print(line("idle for 10 s", 10.0, cpu_by_kind(before, cpu_snapshot(procs))))
        client.close()
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


def main() -> None:
    """Parse the options, make the root, measure each install."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--lists", type=int, default=3, help="times each list is asked")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pages", type=float, default=20.0,
                        help="seconds of queue-list pages asked back to back")
    parser.add_argument("--page-clients", type=int, default=1)
    parser.add_argument("--rev", action="append", default=[],
                        help="a commit to measure before the work tree's install (repeatable)")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="mq-many-", dir=args.tmp)
    args.tmp = work
    try:
        root = os.path.join(work, "root")
        make_root(root, args.queues)
        print(f"{args.queues} queues, --workers={args.workers} --fronts=1; {machine_line(root)}")
        installs = []
        for rev in args.rev:
            snap = os.path.join(work, f"snap-{len(installs)}")
            subprocess.run([os.path.join(HERE, "snapshot.sh"), rev, snap], check=True,
                           capture_output=True, cwd=os.path.dirname(HERE))
            commit = open(os.path.join(snap, "COMMIT")).read().strip()[:12]
            installs.append((f"{rev} ({commit})", {**os.environ, "PYTHONPATH": snap}))
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, cwd=HERE).stdout.strip()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        installs.append((f"work tree's install (HEAD {head})", env))
        for n, (label, env) in enumerate(installs):
            print(f"{label}: load {loadavg()}")
            measure(str(n), root, env, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
