#!/usr/bin/env python3
"""Memory and throughput of mq by --workers: what a default process count costs and gives.

    .venv/bin/python bench/workers.py [--workers 1,2,4,8] [--rounds 3] [--seconds 3]
                                      [--connections 1,64]

For each --workers value it starts mq (`--sync fs`, its other options at their defaults) on a
temporary root under --tmp, and measures, idle once every save actor has stored a message:
the processes of the tree, the sum of their RSS (resident set size: pages shared between
forked processes count in each) and of their PSS (a shared page counts 1/n in each of its n
processes, so the sum is what the tree really holds). Then, every round and for each number of
connections, the asyncio client of bench/peers.py with 100-byte messages: single puts for
--seconds, then taking them back (GET + DELETE) until the queue is empty; batch puts (100 a
call, JSON lines) for --seconds, then batch takes (`GET ?max=100` + one ack). The daemons take
turns in an order that rotates every round, so load from elsewhere falls on all alike; the
table gives the median over the rounds.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

from harness import Daemon, code_under_test, loadavg, machine_line
from peers_clients import Mq, drive

#: (name, put, take) of each workload.
WORKLOADS = (("single", "put", "take"), ("batch", "put_batch", "take_batch"))


def memory(daemon: Daemon) -> dict:
    """Processes, summed RSS and summed PSS (MB) of the tree."""
    import psutil

    rss = pss = 0
    procs = daemon.processes()
    for proc in procs.values():
        try:
            info = proc.memory_full_info()
        except psutil.Error:
            continue
        rss, pss = rss + info.rss, pss + info.pss
    return {"processes": len(procs), "rss": rss / 2**20, "pss": pss / 2**20}


def measure(daemon: Daemon, conns: int, seconds: float, tag: str) -> dict:
    """{(workload, op): messages per second} of one daemon at one number of connections."""
    out = {}
    for name, put, take in WORKLOADS:
        queue = f"{name}-{tag}"
        for op, how_long in ((put, seconds), (take, None)):
            done = asyncio.run(drive(lambda q=queue: Mq(daemon.port, q), op, conns, how_long))
            out[(name, "put" if op == put else "take")] = done["messages"] / max(done["seconds"], 1e-9)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4,8", help="--workers values (default 1,2,4,8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of each put (default 3)")
    parser.add_argument("--connections", default="1,64", help="numbers of connections (default 1,64)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help="folder for the roots (its file system is the one measured)")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    conns = [int(c) for c in args.connections.split(",")]
    base = tempfile.mkdtemp(prefix="mq-bench-workers-", dir=args.tmp)
    print(f"machine: {machine_line(base)}", flush=True)
    print(f"mq: {code_under_test()}", flush=True)
    started, load_before = time.monotonic(), loadavg()
    daemons: dict[int, Daemon] = {}
    rates: dict[tuple, list[float]] = {}
    mem: dict[int, dict] = {}
    try:
        for w in counts:
            os.makedirs(f"{base}/w{w}")
            daemons[w] = Daemon(f"{base}/w{w}/root", w, "fs").start()
            time.sleep(1)  # Let the start-up's first listings settle before reading memory.
            mem[w] = memory(daemons[w])
            print(f"--workers {w}: {daemons[w].command}; {mem[w]['processes']} processes, "
                  f"RSS {mem[w]['rss']:.0f} MB, PSS {mem[w]['pss']:.0f} MB", flush=True)
        units = [(w, c) for c in conns for w in counts]
        for r in range(args.rounds):
            print(f"round {r + 1} of {args.rounds}, load {loadavg()}", flush=True)
            shift = r * len(units) // args.rounds
            for w, c in units[shift:] + units[:shift]:
                for key, rate in measure(daemons[w], c, args.seconds, f"c{c}-r{r}").items():
                    rates.setdefault((w, c, *key), []).append(rate)
                    print(f"    workers {w} c{c} {key[0]:6} {key[1]:4} {rate:9,.0f}/s", flush=True)
    finally:
        for daemon in daemons.values():
            daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{args.rounds} rounds in {time.monotonic() - started:.0f} s; load before "
          f"{load_before}, after {loadavg()}\n")
    head = [f"{name} {op} c{c}" for c in conns for name, _, _ in WORKLOADS for op in ("put", "take")]
    print("| --workers | processes | RSS MB | PSS MB | " + " | ".join(head) + " |")
    print("|---:|---:|---:|---:|" + "---:|" * len(head))
    for w in counts:
        cells = [f"{statistics.median(rates[(w, c, name, op)]):,.0f}"
                 for c in conns for name, _, _ in WORKLOADS for op in ("put", "take")]
        print(f"| {w} | {mem[w]['processes']} | {mem[w]['rss']:.0f} | {mem[w]['pss']:.0f} | "
              + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
