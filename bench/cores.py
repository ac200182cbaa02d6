#!/usr/bin/env python3
"""CPU per operation, per process: what each add and fetch+delete costs, and which process
saturates first, for several variants of mq in one interleaved run.

    .venv/bin/python bench/cores.py [--ops 20000] [--clients 64] [--rounds 2]
        [--variant 'NAME|PYTHONPATH|MQ ARGS' ...]

Throughput on a shared 2-core machine says little about a 16-core one; the CPU time every
process spends per operation does carry over. For each variant, each round: a fresh root and
daemon, a warm-up, then exactly --ops durable single adds (100-byte POSTs from --clients
keep-alive connections of an asyncio client in this process, whose CPU is not counted), then
--ops fetch+delete pairs of them. Before and after each, psutil's user+system CPU seconds of
every process of the tree; the report gives per operation the sum over the processes, each
kind of process, the busiest single process and its share of the sum (the first to saturate
a core as the machine grows), and the syncfs calls per operation where the daemon keeps a
flush-group file. The echo ceiling (a Tornado front doing one ZeroMQ round trip, nothing else:
bench/throughput_ceilings.py) is measured the same way in every round. Variants take turns in
an order that rotates every round.

A variant's PYTHONPATH puts another build of mq ahead of the installed one (e.g. main's, from
`pip install --no-deps --target DIR`), or a folder whose sitecustomize.py changes the
interpreter; its MQ ARGS are added to `mq --sync fs` (e.g. `--event-loop asyncio` against the
default, uvloop). With no --variant: the installed mq with its defaults.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

from harness import AsyncClient, Daemon, code_under_test, loadavg, machine_line
from throughput_ceilings import BODY, Echo

HERE = os.path.dirname(os.path.abspath(__file__))


async def drive(port: int, mode: str, path: str, ops: int, clients: int,
                taken: list | None = None) -> dict:
    """Exactly ops adds (mode "add"), fetch+delete pairs ("fetch_delete"), fetches that keep
    (id, receipt) in taken ("fetch"), or acks ("ack") or deletes ("delete") of taken ones."""
    left = {"n": ops, "errors": 0}

    async def one() -> None:
        conn = await AsyncClient(port).open()
        try:
            while left["n"] > 0:
                left["n"] -= 1
                if mode in ("ack", "delete"):
                    message_id, receipt = taken.pop()
                    query = f"?receipt={receipt}" if mode == "ack" else ""
                    status, _, _ = await conn.request("DELETE", f"{path}/{message_id}{query}")
                    left["errors"] += status != 204
                    continue
                if mode == "fetch":
                    status, headers, _ = await conn.request("GET", path)
                    left["errors"] += status != 200
                    if status == 200:
                        taken.append((headers["x-message-id"], headers["x-receipt"]))
                    continue
                if mode == "add":
                    status, _, _ = await conn.request("POST", path, BODY,
                                                      {"Content-Type": "text/plain"})
                    left["errors"] += status != 201
                    continue
                status, headers, _ = await conn.request("GET", path)
                if status != 200:
                    left["errors"] += 1
                    continue
                status, _, _ = await conn.request("DELETE", f"{path}/{headers['x-message-id']}")
                left["errors"] += status != 204
        finally:
            conn.close()

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(clients)))
    return {"seconds": time.monotonic() - started, "errors": left["errors"]}


def cpu_of(procs: dict) -> dict:
    """{name: user+system CPU seconds} of each psutil.Process."""
    out = {}
    for name, proc in procs.items():
        try:
            times = proc.cpu_times()
            out[name] = times.user + times.system
        except Exception:
            pass
    return out


def measured(procs: dict, port: int, mode: str, path: str, args, taken=None, ops=None) -> dict:
    """One fixed-count run: CPU microseconds per operation by process, and the run's facts."""
    ops = ops or args.ops
    before = cpu_of(procs)
    run = asyncio.run(drive(port, mode, path, ops, args.clients, taken))
    after = cpu_of(procs)
    used = {name: (after[name] - before[name]) / ops * 1e6
            for name in after if name in before}
    return {"us": used, **run}


def flush_counts(root: str) -> dict | None:
    """The flush group's counters of the one daemon on root, when it keeps them."""
    from mq.store.root import ipc_dir_of

    run = os.path.join(root, "run")
    for name in os.listdir(run) if os.path.isdir(run) else ():
        path = os.path.join(ipc_dir_of(os.path.join(run, name)), "flush")
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read(24)
            return {"started": int.from_bytes(data[:8], sys.byteorder),
                    "covered": int.from_bytes(data[16:24], sys.byteorder)}
    return None


def kind(name: str) -> str:
    """front-1 -> front, save-3 -> save."""
    return name.rsplit("-", 1)[0] if name[-1:].isdigit() else name


def summary(run: dict) -> str:
    """Sum, per kind, busiest process and its share."""
    us = run["us"]
    total = sum(us.values())
    kinds: dict[str, float] = {}
    for name, value in us.items():
        kinds[kind(name)] = kinds.get(kind(name), 0.0) + value
    busiest = max(us, key=us.get)
    parts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])
                      if v >= 0.5)
    return (f"{total:.0f} us ({parts}); busiest {busiest} {us[busiest]:.0f} us "
            f"= {us[busiest] / max(total, 1e-9):.0%}")


def one_variant(variant: tuple, base: str, args, say) -> dict:
    """A fresh root and daemon of the variant: adds, then fetch+delete; return both runs."""
    name, pythonpath, extra = variant
    root = tempfile.mkdtemp(prefix="root-", dir=base)
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:  # Ahead of what is there already (bench/bundle.sh's run.sh sets its own).
        os.environ["PYTHONPATH"] = pythonpath + (f":{saved}" if saved else "")
    try:
        daemon = Daemon(root, args.workers, "fs", extra=extra.split()).start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        path = "/cores/messages"
        asyncio.run(drive(daemon.port, "add", "/cores-warmup/messages", args.ops // 4, args.clients))
        procs = daemon.processes()
        flushes = flush_counts(root)
        adds = measured(procs, daemon.port, "add", path, args)
        after = flush_counts(root)
        if flushes and after:
            adds["syncfs"] = (after["started"] - flushes["started"]) / args.ops
            adds["covered"] = (after["covered"] - flushes["covered"]) / args.ops
        fetches = measured(procs, daemon.port, "fetch_delete", path, args)
        if args.hot_queue:
            hot = hot_queue(procs, daemon.port, args)
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    flush_text = (f"; syncfs {adds['syncfs']:.3f}/add, covered {adds['covered']:.3f}/add"
                  if "syncfs" in adds else "")
    say(f"  {name}: adds {args.ops / adds['seconds']:,.0f}/s, errors {adds['errors']}"
        f"{flush_text}\n    CPU per add: {summary(adds)}\n"
        f"    fetch+delete {args.ops / fetches['seconds']:,.0f}/s, errors {fetches['errors']}\n"
        f"    CPU per fetch+delete: {summary(fetches)}")
    if args.hot_queue:
        say("    one queue, its fetch actor's CPU per operation: " + ", ".join(
            f"{op} {run['us'].get(run['owner'], 0):.0f} us (all processes {sum(run['us'].values()):.0f})"
            for op, run in hot.items()))
    return {"add": adds, "fetch": fetches, **({"hot": hot} if args.hot_queue else {})}


def hot_queue(procs: dict, port: int, args) -> dict:
    """One queue's fetch, ack and delete, each measured alone: the owning fetch actor's CPU
    (the process one hot queue is bound by) and the whole tree's."""
    path = "/hot/messages"
    asyncio.run(drive(port, "add", path, args.ops, args.clients))
    taken: list = []
    runs = {"fetch": measured(procs, port, "fetch", path, args, taken)}
    half = len(taken) // 2
    runs["ack"] = measured(procs, port, "ack", path, args, taken, ops=half)
    runs["delete"] = measured(procs, port, "delete", path, args, taken, ops=len(taken))
    owner = max((n for n in runs["fetch"]["us"] if n.startswith("fetch")),
                key=runs["fetch"]["us"].get)
    for run in runs.values():
        run["owner"] = owner
    return runs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20000, help="operations per run (default 20000)")
    parser.add_argument("--clients", type=int, default=64, help="connections (default 64)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--workers", default="8", help="mq --workers (default 8)")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME|PYTHONPATH|MQ ARGS (repeatable; PYTHONPATH may be empty)")
    parser.add_argument("--no-echo", action="store_true", help="skip the echo ceiling")
    parser.add_argument("--hot-queue", action="store_true",
                        help="also measure one queue's fetch, ack and delete apart")
    parser.add_argument("--tmp", default=None, help="folder for the roots (on the disk to measure)")
    args = parser.parse_args(argv)
    variants = [tuple((v.split("|") + ["", ""])[:3]) for v in args.variant] or [("mq", "", "")]

    def say(text: str) -> None:
        print(text, flush=True)

    base = tempfile.mkdtemp(prefix="mq-bench-cores-", dir=args.tmp)
    say(f"{machine_line(base)}")
    say(f"mq: {code_under_test()}; load {loadavg()}")
    say(f"{args.ops} operations per run, {args.clients} connections, --workers {args.workers}")
    results: dict[str, list] = {v[0]: [] for v in variants}
    echo_runs = []
    try:
        for r in range(args.rounds):
            say(f"round {r + 1}: load {loadavg()}")
            if not args.no_echo:
                echo = Echo(base)
                try:
                    procs = {"echo front": _proc(echo.procs[1].pid),
                             "echo actor": _proc(echo.procs[0].pid)}
                    asyncio.run(drive(echo.port, "add", "/echo/messages", args.ops // 4, args.clients))
                    run = measured(procs, echo.port, "add", "/echo/messages", args)
                    echo_runs.append(run)
                    say(f"  echo ceiling: {args.ops / run['seconds']:,.0f}/s; "
                        f"CPU per request: {summary(run)}")
                finally:
                    echo.stop()
            turn = r % len(variants)
            for variant in variants[turn:] + variants[:turn]:
                results[variant[0]].append(one_variant(variant, base, args, say))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    say("")
    say("| variant | CPU us per add (all processes) | busiest process per add | "
        "syncfs per add | CPU us per fetch+delete | busiest per fetch+delete |")
    say("|---|---:|---:|---:|---:|---:|")
    if echo_runs:
        say(f"| echo ceiling (per request) | {_median(echo_runs, None):.0f} | "
            f"{_median_busiest(echo_runs)} | | | |")
    for name, runs in results.items():
        adds = [r["add"] for r in runs]
        fetches = [r["fetch"] for r in runs]
        syncfs = [a["syncfs"] for a in adds if "syncfs" in a]
        flushes = f"{statistics.median(syncfs):.3f}" if syncfs else ""
        say(f"| {name} | {_median(adds, None):.0f} | {_median_busiest(adds)} | {flushes} | "
            f"{_median(fetches, None):.0f} | {_median_busiest(fetches)} |")
    say(f"(medians over {args.rounds} rounds; load after: {loadavg()})")
    return 0


def _proc(pid: int):
    import psutil
    return psutil.Process(pid)


def _median(runs: list, _) -> float:
    return statistics.median(sum(r["us"].values()) for r in runs)


def _median_busiest(runs: list) -> str:
    shares = []
    for r in runs:
        name = max(r["us"], key=r["us"].get)
        shares.append((r["us"][name], r["us"][name] / max(sum(r["us"].values()), 1e-9), name))
    value, share, name = sorted(shares)[len(shares) // 2]
    return f"{name} {value:.0f} us ({share:.0%})"


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
