#!/usr/bin/env python3
"""Instructions per request of one front process, counted by valgrind's callgrind.

    .venv/bin/python bench/front_cpu.py [--ops 1000] [--clients 8] [--workers 2] [--tmp DIR]
        [--keep DIR]

bench/cores.py gives the CPU time of the whole tree, which moves with the load of a shared
machine; bench/actor_cpu.py counts an actor's instructions in-process. This one counts the
front's: a daemon (`mq --sync fs`, access log on) serves the actors, and a second front of its
own, started here as `python -m mq.supervisor.child front` under `valgrind --tool=callgrind`
on another port, takes the requests of --clients keep-alive connections of an asyncio client
in this process. After a warm-up, callgrind's counters are zeroed (`callgrind_control`), then
--ops durable single adds are made and the counters dumped, then --ops fetch+delete pairs of
them and dumped again: each phase's instructions, divided by --ops, are the front's per add
and per pair (a fetch and a delete: two requests). Every request of a phase is the same
request as cores.py's clients send; under valgrind the front is the slowest process, so every
turn of its loop finds the connections' next requests waiting, as a saturated front would.
"""

import argparse
import asyncio
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cores import drive
from harness import Client, Daemon
from ports import free_port

from mq.config import Options
from mq.store.root import Root, ipc_dir_of


def dumped(prefix: str, pid: int, before: set, timeout: float = 120.0) -> int:
    """The instructions of the dump callgrind wrote since `before`: its "summary:" line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = set(glob.glob(f"{prefix}.{pid}.*")) - before
        for path in new:
            with open(path) as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
        time.sleep(0.2)
    raise SystemExit("callgrind wrote no dump")


def control(pid: int, what: str) -> None:
    """callgrind_control --zero or --dump; the front answers it between two basic blocks."""
    subprocess.run(["callgrind_control", what, str(pid)], check=True, capture_output=True,
                   timeout=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=1000, help="adds, then pairs (default 1000)")
    parser.add_argument("--clients", type=int, default=8, help="connections (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="mq --workers (default 2)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="folder for the root")
    parser.add_argument("--keep", default=None,
                        help="copy callgrind's dumps of the phases here (for callgrind_annotate)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mq-front-cpu-", dir=args.tmp)
    root = os.path.join(base, "root")
    daemon = Daemon(root, args.workers, "fs").start()
    front = None
    try:
        run_dir = ipc_dir_of(Root(root).daemon_dirs()[0])
        port = free_port()
        options = Options(root=root, workers=args.workers, fronts=1, sync="fs", port=port)
        prefix = os.path.join(base, "callgrind.out")
        front = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}.%p",
             sys.executable, "-m", "mq.supervisor.child", "front", "1", run_dir,
             options.to_json()],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "front.log"), "wb"))
        deadline = time.monotonic() + 300
        while True:
            try:
                client = Client(port, timeout=60)
                status, _, _ = client.request("POST", "/warm/messages", b"warm")
                client.close()
                if status == 201:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or front.poll() is not None:
                raise SystemExit(f"the front did not start; see {base}/front.log")
            time.sleep(1)
        asyncio.run(drive(port, "add", "/warm/messages", 200, args.clients))
        asyncio.run(drive(port, "fetch_delete", "/warm/messages", 200, args.clients))
        figures = {}
        control(front.pid, "--zero")
        for phase, mode in (("add", "add"), ("fetch+delete", "fetch_delete")):
            run = asyncio.run(drive(port, mode, "/front-cpu/messages", args.ops, args.clients))
            if run["errors"]:
                raise SystemExit(f"{phase}: {run['errors']} errors")
            before = set(glob.glob(f"{prefix}.{front.pid}.*"))
            control(front.pid, "--dump")
            figures[phase] = dumped(prefix, front.pid, before) / args.ops
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for path in set(glob.glob(f"{prefix}.{front.pid}.*")) - before:
                    shutil.copy(path, os.path.join(args.keep, f"{phase}.callgrind"))
        print(f"front instructions per add {figures['add'] / 1000:.1f}k, per fetch+delete pair "
              f"{figures['fetch+delete'] / 1000:.1f}k ({args.ops} each, {args.clients} "
              f"connections)", flush=True)
    finally:
        if front is not None:
            front.terminate()
            try:
                front.wait(60)
            except subprocess.TimeoutExpired:
                front.kill()
                front.wait()
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
