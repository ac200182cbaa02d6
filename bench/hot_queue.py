#!/usr/bin/env python3
"""One hot queue: the takes it sustains, and what each fetch actor spends per take.

    .venv/bin/python bench/hot_queue.py [--workers 2] [--clients 64] [--fill 10000]
        [--rounds 2] [--variant 'NAME|PYTHONPATH|MQ ARGS' ...]

For each variant, each round: a fresh root and daemon, one queue filled by batch adds (not
measured: --fill messages), then drained by single fetch+ack (the ack with its receipt) from
--clients keep-alive connections, each until its fetch finds the queue empty; filled again,
then drained by batch fetch (`?max=--batch`) and batch ack. Every id must come out once.
Before and after each drain, psutil's user+system CPU seconds of every process of the tree.
The report gives per workload the takes per second, every fetch actor's CPU per take, their
sum, the busiest one's (a queue's ceiling where that actor has a core of its own: one second
over it), and the takes per second of fetch-actor CPU (the takes over the fetch actors' CPU
seconds together). On a machine with fewer cores than processes the takes per second are
bound by the front; the CPU per take is what carries over.

A variant's PYTHONPATH puts another build of mq ahead of the installed one (e.g. main's,
from `pip install --no-deps --target DIR`); its MQ ARGS are added to `mq --sync fs`.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import AsyncClient, Daemon, code_under_test, cpu_snapshot, loadavg, machine_line  # noqa: E402

QUEUE = "hot"
NDJSON = {"Content-Type": "application/x-ndjson"}


async def run_clients(port: int, clients: int, work) -> dict:
    """Drain the queue: `clients` connections doing work(client) -> (ids taken, errors), each
    until its fetch finds the queue empty; the takes, the distinct ids, the errors."""
    totals = {"taken": 0, "errors": 0}
    seen: set = set()

    async def one():
        client = await AsyncClient(port).open()
        try:
            while True:
                ids, errors = await work(client)
                totals["taken"] += len(ids)
                totals["errors"] += errors
                seen.update(ids)
                if not ids and not errors:
                    return
        finally:
            client.close()

    started = time.monotonic()
    await asyncio.gather(*[one() for _ in range(clients)])
    return {**totals, "distinct": len(seen), "seconds": time.monotonic() - started}


async def fill(port: int, count: int, size: int) -> None:
    """Add `count` messages to the queue in batches of 100 from 8 connections."""
    body = b"".join(json.dumps({"body": "x" * size}).encode() + b"\n" for _ in range(100))
    left = {"n": count // 100}

    async def one():
        client = await AsyncClient(port).open()
        try:
            while left["n"] > 0:
                left["n"] -= 1
                status, _, _ = await client.request("POST", f"/{QUEUE}/messages", body, NDJSON)
                if status != 201:
                    raise RuntimeError(f"batch add answered {status}")
        finally:
            client.close()

    await asyncio.gather(*[one() for _ in range(8)])


async def fetch_ack(client):
    """One fetch and the ack of its receipt."""
    path = f"/{QUEUE}/messages"
    status, headers, _ = await client.request("GET", path)
    if status != 200:
        return [], int(status != 204)
    status, _, _ = await client.request(
        "DELETE", f"{path}/{headers['x-message-id']}?receipt={headers['x-receipt']}")
    return [headers["x-message-id"]], int(status != 204)


def batch_fetch_ack(batch: int):
    """One batch fetch of up to `batch` and one batch ack of its receipts."""
    path = f"/{QUEUE}/messages"

    async def work(client):
        status, _, data = await client.request("GET", f"{path}?max={batch}")
        if status != 200:
            return [], int(status != 204)
        receipts = [r.decode() for r in re.findall(rb"X-Receipt: (\S+)", data)]
        status, _, _ = await client.request("POST", f"{path}/ack",
                                            json.dumps({"receipts": receipts}).encode())
        return [r.rsplit(".", 1)[0] for r in receipts], int(status != 200)

    return work


def measured(daemon: Daemon, args, work) -> dict:
    """One workload: its takes, and each process's CPU microseconds per take."""
    procs = daemon.processes()
    before = cpu_snapshot(procs)
    run = asyncio.run(run_clients(daemon.port, args.clients, work))
    after = cpu_snapshot(procs)
    taken = max(run["taken"], 1)
    run["us"] = {name: (after[name] - before[name]) / taken * 1e6 for name in after}
    return run


def one_variant(variant: tuple, base: str, args, say) -> dict:
    """A fresh root and daemon of the variant: single, then batch fetch+ack of one queue."""
    name, pythonpath, extra = variant
    root = tempfile.mkdtemp(prefix="root-", dir=base)
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath + (f":{saved}" if saved else "")
    try:
        daemon = Daemon(root, args.workers, "fs",
                        extra=["--no-access-log", *extra.split()]).start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    runs = {}
    try:
        for workload, work in (("fetch+ack", fetch_ack),
                               ("batch fetch+ack", batch_fetch_ack(args.batch))):
            asyncio.run(fill(daemon.port, args.fill, args.size))
            runs[workload] = run = measured(daemon, args, work)
            say(f"  {name}, {workload}: {line(run)}")
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    return runs


def fetchers(run: dict) -> dict:
    """The fetch actors' CPU microseconds per take, by name."""
    return {n: us for n, us in sorted(run["us"].items()) if n.startswith("fetch")}


def line(run: dict) -> str:
    """A workload's figures on one line."""
    ours = fetchers(run)
    total = sum(ours.values())
    each = ", ".join(f"{n} {us:.0f}" for n, us in ours.items())
    return (f"{run['taken'] / run['seconds']:,.0f} takes/s, {run['taken']} takes of "
            f"{run['distinct']} messages, errors {run['errors']}; fetch actors' "
            f"CPU per take {total:.0f} us ({each}), busiest {max(ours.values()):.0f} us; "
            f"{1e6 / max(total, 1e-9):,.0f} takes per fetch-actor CPU second; "
            f"all processes {sum(run['us'].values()):.0f} us")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="2", help="mq --workers (default 2)")
    parser.add_argument("--clients", type=int, default=64, help="connections (default 64)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--batch", type=int, default=100, help="batch fetch size (default 100)")
    parser.add_argument("--fill", type=int, default=10000,
                        help="messages added, then drained, per workload (default 10000)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME|PYTHONPATH|MQ ARGS (repeatable; PYTHONPATH may be empty)")
    parser.add_argument("--tmp", default=None, help="folder for the roots")
    args = parser.parse_args(argv)
    variants = [tuple((v.split("|") + ["", ""])[:3]) for v in args.variant] or [("mq", "", "")]

    def say(text: str) -> None:
        print(text, flush=True)

    base = tempfile.mkdtemp(prefix="mq-bench-hot-", dir=args.tmp)
    say(machine_line(base))
    say(f"mq: {code_under_test()}; --workers {args.workers}, {args.clients} connections, "
        f"{args.fill} messages per workload, batches of {args.batch}; load {loadavg()}")
    results: dict[str, list] = {v[0]: [] for v in variants}
    try:
        for r in range(args.rounds):
            say(f"round {r + 1}: load {loadavg()}")
            turn = r % len(variants)
            for variant in variants[turn:] + variants[:turn]:
                results[variant[0]].append(one_variant(variant, base, args, say))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    say("")
    say("| variant | workload | takes/s | fetch actors' CPU per take | busiest fetch actor "
        "per take | takes per fetch-actor CPU second |")
    say("|---|---|---:|---:|---:|---:|")
    for name, runs in results.items():
        for workload in ("fetch+ack", "batch fetch+ack"):
            these = [r[workload] for r in runs]
            rate = statistics.median(r["taken"] / r["seconds"] for r in these)
            total = statistics.median(sum(fetchers(r).values()) for r in these)
            busiest = statistics.median(max(fetchers(r).values()) for r in these)
            say(f"| {name} | {workload} | {rate:,.0f} | {total:.0f} us | {busiest:.0f} us | "
                f"{1e6 / max(total, 1e-9):,.0f} |")
    say(f"(medians over {args.rounds} rounds; load after: {loadavg()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
