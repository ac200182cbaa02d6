#!/usr/bin/env python3
"""Several fronts: requests per second with `mq --fronts N` for a few N, where the front's CPU
is all the work, and where the actors and the disk share it.

    .venv/bin/python bench/fronts.py [--fronts 1,2,4] [--rounds 3] [--seconds 5] [--connections 64]
        [--workers 2|auto] [--access-log] [--tmp DIR]

One daemon per N (`mq --workers 2 --no-access-log --fronts N` unless asked otherwise, roots in a
temporary folder), all running at
once; wrk (Debian's package) drives each in turn, the order rotating every round, with:

- GET /_mq/openapi.yaml: answered by the front alone (no actor, no disk);
- GET /{queue}: a queue's counts, one ZeroMQ round trip to a fetch actor (no disk write);
- POST /{queue}/messages (bench/wrk/post.lua): a durable add (a save actor, a flush).

It prints the median requests per second per N and workload, each as a ratio to N=1, and
the CPU seconds the fronts and the actors used per thousand requests.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from harness import Client, Daemon, cpu_snapshot, loadavg, machine_line
from peers_servers import wrk_threads

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = {"front only: GET /_mq/openapi.yaml": ("/_mq/openapi.yaml", None),
             "one actor round trip: GET /{queue}": ("/fronts-bench", None),
             "durable add: POST /{queue}/messages": ("/fronts-bench/messages", "post.lua")}


def run_wrk(port: int, path: str, script: str | None, connections: int, seconds: float) -> float:
    """Requests per second that wrk reports (only 2xx answers counted)."""
    argv = ["wrk", f"-t{min(wrk_threads(), connections)}", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
    if script:
        argv += ["-s", os.path.join(HERE, "wrk", script)]
    out = subprocess.run(argv + [f"http://127.0.0.1:{port}{path}"], capture_output=True,
                         text=True, timeout=seconds + 60).stdout
    requests = duration = errors = None
    for line in out.splitlines():
        words = line.split()
        if "requests in" in line:
            requests, duration = int(words[0]), float(words[3].rstrip("s,").rstrip("m"))
            duration *= 60 if words[3].rstrip(",").endswith("m") else 1
        if line.startswith("RESULT"):
            fields = dict(w.split("=") for w in words[1:])
            requests = int(fields["requests"]) - int(fields["non2xx"])
            duration = int(fields["duration_us"]) / 1e6
        if "Non-2xx" in line:
            errors = int(words[-1])
    if requests is None:
        raise RuntimeError(f"wrk printed no totals:\n{out}")
    return (requests - (errors or 0)) / duration


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fronts", default="1,2,4", help="values of --fronts (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=5, help="seconds per wrk run (default 5)")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections (default 64)")
    parser.add_argument("--workers", default="2", help="mq --workers: a number or auto (default 2)")
    parser.add_argument("--access-log", action="store_true",
                        help="keep mq's access log on (its default; off here unless asked)")
    parser.add_argument("--tmp", default=None, help="folder for the roots (on the disk to measure)")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("bench/fronts.py needs wrk: apt-get install wrk", file=sys.stderr)
        return 2
    counts = [int(n) for n in args.fronts.split(",")]
    base = tempfile.mkdtemp(prefix="mq-bench-fronts-", dir=args.tmp)
    print(f"machine: {machine_line(base)}; load before {loadavg()}", flush=True)
    daemons = {}
    rates = {(n, w): [] for n in counts for w in WORKLOADS}
    cpu = {n: {"front": 0.0, "actors": 0.0, "requests": 0} for n in counts}
    try:
        for n in counts:
            root = os.path.join(base, f"fronts-{n}", "root")
            os.makedirs(os.path.dirname(root))
            log = [] if args.access_log else ["--no-access-log"]
            daemons[n] = Daemon(root, args.workers, "fs", extra=log + [f"--fronts={n}"]).start()
            print(f"N={n}: {daemons[n].command}", flush=True)
            client = Client(daemons[n].port)
            client.request("POST", WORKLOADS["durable add: POST /{queue}/messages"][0], b"first")
            client.close()
        runs = [(n, w) for w in WORKLOADS for n in counts]
        for r in range(args.rounds):
            shift = r * len(runs) // args.rounds
            print(f"round {r + 1}, load {loadavg()}", flush=True)
            for n, workload in runs[shift:] + runs[:shift]:
                procs = daemons[n].processes()
                before = cpu_snapshot(procs)
                rate = run_wrk(daemons[n].port, *WORKLOADS[workload], args.connections,
                               args.seconds)
                after = cpu_snapshot(procs)
                used = {name: after[name] - before[name] for name in procs}
                cpu[n]["front"] += sum(v for k, v in used.items() if k.startswith("front"))
                cpu[n]["actors"] += sum(v for k, v in used.items()
                                        if not k.startswith("front") and k != "supervisor")
                cpu[n]["requests"] += rate * args.seconds
                rates[(n, workload)].append(rate)
                print(f"  N={n} {workload}: {rate:,.0f}/s", flush=True)
    finally:
        for daemon in daemons.values():
            daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nload after {loadavg()}\n")
    print("| workload | " + " | ".join(f"--fronts {n} req/s" for n in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    for workload in WORKLOADS:
        base_rate = statistics.median(rates[(counts[0], workload)])
        cells = []
        for n in counts:
            rate = statistics.median(rates[(n, workload)])
            cells.append(f"{rate:,.0f}" + (f" ({rate / base_rate:.2f}x)" if n != counts[0] else ""))
        print(f"| {workload} | " + " | ".join(cells) + " |")
    print("\nCPU seconds per 1,000 requests, all workloads: " + "; ".join(
        f"--fronts {n}: fronts {1000 * c['front'] / c['requests']:.2f}, actors "
        f"{1000 * c['actors'] / c['requests']:.2f}" for n, c in cpu.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
