#!/usr/bin/env python3
"""Cost against depth: add and fetch+delete latency at 1k, 100k and 1M messages; and memory.

    .venv/bin/python bench/depth.py [--depths 1000,100000,1000000] [--samples 2000] [--workers 2]
    .venv/bin/python bench/depth.py --memory [--messages 1000000] [--queues 100]

With --memory it measures instead how much memory the whole tree takes, as the sum of every
process's PSS (proportional set size: a page shared by n processes counts 1/n in each), with
mq's default options (`--workers 8`): idle on an empty root, then on a root filled with
--messages messages spread over --queues queues (fast fill, below), after one fetch from every
queue has made the fetch actors build their indexes of them.

For each depth, one queue in its own fresh temporary root is filled to that depth, and a real
daemon (`mq`, the whole supervised tree) on a free port of 127.0.0.1 is started on it. One
keep-alive client per daemon then measures over HTTP rounds of

    POST /{queue}/messages      (timed: "add")
    GET  /{queue}/messages      (timed together with the DELETE: "fetch+delete")
    DELETE /{queue}/messages/{id}

so the depth stays what it was filled to. The fetch takes the oldest message, one of the filled
ones. The depths take turns round by round (rotating order), so that other work on the machine
(this one is shared, and syncfs flushes the whole file system) weighs on every depth alike.
Target: the 1-million figures within 2x of the 1-thousand figures.

The fast fill path, for benchmark set-up only: while no daemon runs, messages are written with
the store module's own functions, exactly the save actor's write and rename
(`Store.write_new` then `store.states.deliver_new`, ids from `mq.ids.new_id`, bytes from
`mq.store.encode_message`), but with no flush per message: one syncfs(2) at the end of each
fill. The daemon is started after the fill, so the fetch actor rebuilds its index from the
folder on the queue's first fetch; that first fetch is timed apart ("index rebuild") and the
measured rounds come after it and after some unmeasured warm-up rounds.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from harness import (
    Client,
    Daemon,
    add_calm_options,
    code_under_test,
    filesystem,
    loadavg,
    machine,
    percentile,
    wait_for_calm,
)

from mq.ids import new_id
from mq.store import Store, encode_message

QUEUE = "depth"
BODY = b"d" * 100


def fill(store: Store, count: int, say) -> float:
    """Add count ready messages to QUEUE with no daemon running; return messages per second."""
    started = time.monotonic()
    for done in range(count):
        now_ms = int(time.time() * 1000)
        message_id = new_id(now_ms)
        store.write_new(QUEUE, message_id, encode_message(BODY, "text/plain", now_ms), None)
        store.states.deliver_new(QUEUE, message_id, False)
        if done and done % 200_000 == 0:
            say(f"    {done} written")
    store.flush_data()  # One syncfs for the whole fill.
    return count / max(time.monotonic() - started, 1e-9)


def fill_queues(store: Store, count: int, queues: list[str], say) -> float:
    """fill() spread round-robin over queues; return messages per second."""
    started = time.monotonic()
    for queue in queues:
        store.queues.create_queue(queue)
    for done in range(count):
        now_ms = int(time.time() * 1000)
        message_id = new_id(now_ms)
        queue = queues[done % len(queues)]
        store.write_new(queue, message_id, encode_message(BODY, "text/plain", now_ms), None)
        store.states.deliver_new(queue, message_id, False)
        if done and done % 200_000 == 0:
            say(f"    {done} written")
    store.flush_data()
    return count / max(time.monotonic() - started, 1e-9)


def pss_row(title: str, daemon: Daemon) -> tuple[str, float]:
    """A table row of the tree's PSS, in total and by kind of process; and the total in MB."""
    pss = daemon.pss()
    kinds: dict[str, int] = {}
    for name, size in pss.items():
        kinds[name.split("-")[0]] = kinds.get(name.split("-")[0], 0) + size
    total = sum(pss.values()) / 2**20
    by_kind = " | ".join(f"{kinds.get(k, 0) / 2**20:.0f}"
                         for k in ("supervisor", "front", "fetch", "save", "mover", "reaper"))
    return f"| {title} | {len(pss)} | **{total:.0f}** | {by_kind} |", total


def memory(args, base: str, say) -> int:
    """Idle, then with args.messages over args.queues: the tree's PSS with the default options."""
    empty = os.path.join(base, "empty", "root")
    os.makedirs(empty)
    with Daemon(empty, args.workers, args.sync, extra=args.daemon_args.split()) as daemon:
        say(f"idle: {daemon.command}")
        time.sleep(args.settle)
        idle_row, idle = pss_row("idle, empty root", daemon)
    root = os.path.join(base, "full", "root")
    store = Store(root, sync="fs")
    store.init()
    queues = [f"m{i:03d}" for i in range(args.queues)]
    say(f"filling {args.messages:,} messages over {args.queues} queues "
        "(fast fill, no daemon running)")
    say(f"  filled at {fill_queues(store, args.messages, queues, say):,.0f} messages/s")
    with Daemon(root, args.workers, args.sync,
                extra=["--actor-timeout", "300", *args.daemon_args.split()]) as daemon:
        say(f"full: {daemon.command}")
        client = Client(daemon.port, timeout=300)
        started = time.monotonic()
        for queue in queues:  # The first fetch of a queue builds its index.
            status, _, _ = client.request("GET", f"/{queue}/messages")
            if status != 200:
                raise RuntimeError(f"fetch from {queue} answered {status}")
        say(f"  first fetch of every queue (the index builds): {time.monotonic() - started:.1f} s")
        client.close()
        time.sleep(args.settle)
        full_row, full = pss_row(f"{args.messages:,} messages in {args.queues} queues, indexed",
                                 daemon)
    say("")
    say("| state | processes | PSS total MB | supervisor | front | fetch actors | save actors "
        "| mover | reaper |")
    say("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    say(idle_row)
    say(full_row)
    say("")
    say(f"idle {idle:.0f} MB (target < 150): {'met' if idle < 150 else 'MISSED'}; "
        f"{args.messages:,} messages {full:.0f} MB (target < 400): "
        f"{'met' if full < 400 else 'MISSED'}")
    return 0 if idle < 150 and full < 400 else 1


def round_trip(client: Client, path: str) -> tuple[float, float]:
    """One add, then one fetch+delete of the oldest message; their latencies in seconds."""
    t0 = time.perf_counter()
    status, _, body = client.request("POST", path, BODY, {"Content-Type": "text/plain"})
    t1 = time.perf_counter()
    if status != 201:
        raise RuntimeError(f"add answered {status}: {body[:200]!r}")
    status, headers, body = client.request("GET", path)
    if status != 200:
        raise RuntimeError(f"fetch answered {status}: {body[:200]!r}")
    status, _, body = client.request("DELETE", f"{path}/{headers['X-Message-Id']}")
    t2 = time.perf_counter()
    if status != 204:
        raise RuntimeError(f"delete answered {status}: {body[:200]!r}")
    return t1 - t0, t2 - t1


def start(root: str, depth: int, args, say) -> tuple[Daemon, Client, float]:
    """Start a daemon on a filled root; return it, a client, and the first fetch's seconds."""
    daemon = Daemon(root, args.workers, args.sync,
                    extra=["--actor-timeout", "300", *args.daemon_args.split()])
    say(f"  depth {depth}: {daemon.command}")
    daemon.start()
    client = Client(daemon.port, timeout=300)
    path = f"/{QUEUE}/messages"
    t0 = time.perf_counter()
    status, headers, _ = client.request("GET", path)  # Builds the fetch actor's index.
    rebuild = time.perf_counter() - t0
    if status != 200:
        raise RuntimeError(f"first fetch answered {status}")
    client.request("DELETE", f"{path}/{headers['X-Message-Id']}")
    client.request("POST", path, BODY)  # Put the depth back to what was filled.
    return daemon, client, rebuild


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="1000,100000,1000000",
                        help="comma-separated queue depths (default 1000,100000,1000000)")
    parser.add_argument("--samples", type=int, default=2000,
                        help="measured rounds (add + fetch + delete) at each depth (default 2000)")
    parser.add_argument("--warmup", type=int, default=200,
                        help="unmeasured rounds at each depth first (default 200)")
    parser.add_argument("--workers", type=int, default=None,
                        help="mq --workers (default 2; with --memory mq's own default, 8)")
    parser.add_argument("--memory", action="store_true",
                        help="measure the tree's memory (PSS) instead of latencies")
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="with --memory: messages to fill (default 1000000)")
    parser.add_argument("--queues", type=int, default=100,
                        help="with --memory: queues they are spread over (default 100)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="with --memory: seconds to let the tree settle before measuring")
    parser.add_argument("--sync", default="fs", choices=("fs", "file"), help="mq --sync")
    parser.add_argument("--daemon-args", default="",
                        help="more mq options, e.g. '--no-access-log' (one string)")
    add_calm_options(parser, "roots")
    parser.add_argument("--keep", action="store_true", help="keep the temporary roots")
    args = parser.parse_args(argv)
    if args.workers is None:
        args.workers = 8 if args.memory else 2
    depths = sorted(int(d) for d in args.depths.split(","))

    def say(text: str) -> None:
        print(text, flush=True)

    base = tempfile.mkdtemp(prefix="mq-bench-depth-", dir=args.tmp)
    say(f"machine: {machine()}, file system: {filesystem(base)}")
    say(f"mq: {code_under_test()}")
    if args.memory:
        try:
            return memory(args, base, say)
        finally:
            if args.keep:
                say(f"kept {base}")
            else:
                cleaning = time.monotonic()
                shutil.rmtree(base, ignore_errors=True)
                say(f"removed {base} in {time.monotonic() - cleaning:.0f} s")
    say(f"roots under {base}; samples per depth: {args.samples}; workers: {args.workers}; "
        f"sync: {args.sync}")
    daemons: list[Daemon] = []
    rows = {}
    try:
        for depth in depths:
            root = os.path.join(base, f"depth-{depth}", "root")
            store = Store(root, sync="fs")
            store.init()
            store.queues.create_queue(QUEUE)
            say(f"depth {depth}: filling (fast fill, no daemon running)")
            rate = fill(store, depth, say)
            say(f"  filled at {rate:,.0f} messages/s")
            rows[depth] = {"depth": depth, "fill_per_s": rate, "adds": [], "fetches": []}
        say("starting one daemon per depth")
        clients = {}
        for depth in depths:
            root = os.path.join(base, f"depth-{depth}", "root")
            daemon, client, rebuild = start(root, depth, args, say)
            daemons.append(daemon)
            clients[depth] = client
            rows[depth]["rebuild_s"] = rebuild
        path = f"/{QUEUE}/messages"
        for _ in range(args.warmup):
            for depth in depths:
                round_trip(clients[depth], path)
        load = wait_for_calm(args.max_load, args.calm_wait, say)
        load_before = loadavg()
        say(f"measuring {args.samples} rounds per depth, the depths taking turns; "
            f"load before: {load_before}")
        started = time.monotonic()
        for i in range(args.samples):
            # The depths take turns, in a rotating order, so that whatever else the machine
            # does at some moment falls on every depth alike.
            for k in range(len(depths)):
                depth = depths[(i + k) % len(depths)]
                add, fetch = round_trip(clients[depth], path)
                rows[depth]["adds"].append(add)
                rows[depth]["fetches"].append(fetch)
        elapsed = time.monotonic() - started
        load_after = loadavg()
        for depth, daemon in zip(depths, daemons):
            # The fetch actors hold the index; the one that owns the queue holds all of it.
            rows[depth]["fetch_rss_mb"] = max(p.memory_info().rss for name, p in daemon.processes().items()
                                              if name.startswith("fetch")) / 2**20
        for client in clients.values():
            client.close()
    finally:
        for daemon in daemons:
            daemon.stop()
        if args.keep:
            say(f"kept {base}")
        else:
            cleaning = time.monotonic()
            shutil.rmtree(base, ignore_errors=True)
            say(f"removed {base} in {time.monotonic() - cleaning:.0f} s")

    for row in rows.values():
        for key, values in (("add", row.pop("adds")), ("fd", row.pop("fetches"))):
            row[f"{key}_p50"] = percentile(values, 50) * 1000
            row[f"{key}_p99"] = percentile(values, 99) * 1000
    say("")
    say(f"measured in {elapsed:.0f} s; load before {load_before} (1-minute {load:.2f}), "
        f"after {load_after}")
    say("")
    say("| depth | add p50 ms | add p99 ms | fetch+delete p50 ms | fetch+delete p99 ms "
        "| first fetch (index rebuild) s | fetch actor RSS MB | fast fill msg/s |")
    say("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows.values():
        say(f"| {r['depth']:,} | {r['add_p50']:.2f} | {r['add_p99']:.2f} | {r['fd_p50']:.2f} "
            f"| {r['fd_p99']:.2f} | {r['rebuild_s']:.2f} | {r['fetch_rss_mb']:.0f} "
            f"| {r['fill_per_s']:,.0f} |")
    if len(rows) < 2:
        return 0
    low, high = rows[depths[0]], rows[depths[-1]]
    say("")
    say(f"ratio depth {high['depth']:,} / depth {low['depth']:,} (target <= 2.0):")
    met = True
    for key, name in (("add_p50", "add p50"), ("add_p99", "add p99"),
                      ("fd_p50", "fetch+delete p50"), ("fd_p99", "fetch+delete p99")):
        ratio = high[key] / low[key]
        met &= ratio <= 2.0
        say(f"  {name:18} {ratio:5.2f}x {'ok' if ratio <= 2.0 else 'MISSED'}")
    say(f"target {'met' if met else 'missed'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
