#!/usr/bin/env python3
"""Throughput: durable adds and fetch+delete at N concurrent HTTP clients,
against two ceilings measured in the same run.

    .venv/bin/python bench/throughput.py [--clients 64] [--duration 10] [--workers 8]

What it runs, in order, on 127.0.0.1 (free ports) with a temporary root:

1. The disk's raw limit: single-threaded exclusive create + write (100 bytes) + fsync + rename +
   fsync of the target directory, in a temporary folder on the same file system as the root.
2. The echo ceiling: a Tornado process whose one handler does one ZeroMQ round trip (an asyncio
   DEALER, like the front's links to actors) to an echo process (a ROUTER that sends every
   message back), and nothing else; driven by the same client, at the same concurrency, with the
   same 100-byte POSTs as the adds.
3. mq (the whole supervised tree, `mq --workers W`): durable adds, POST /{queue}/messages with
   100-byte bodies, each answered 201 only once its message is durably in its queue.
4. mq: fetch+delete of the messages just added (GET /{queue}/messages, then DELETE of its id).

With --rounds N, steps 2 and 3 alternate N times, so that other work on this shared machine
falls on both alike. The client is wrk (Debian's package; installed with apt-get when missing
and this runs as root) with bench/wrk/*.lua, or, with --client asyncio or when wrk cannot be
had, a keep-alive HTTP/1.1 client on raw asyncio streams in this process.

Target: durable adds at 64 clients at least 0.8 times the echo ceiling of the same run, with
p99 under 100 ms. The exit status is 0 when it is met, 1 when not.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

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
from throughput_ceilings import Echo, disk_ceiling, serve_echo_actor, serve_echo_front
from throughput_load import cpu_text, find_wrk, load_run, warm_up

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = "throughput"


def batch_stats(log_path: str) -> str:
    """Sizes of the save actors' batches, from the debug lines "actor.batch" in the daemon log."""
    import json

    sizes = []
    with open(log_path, errors="replace") as f:
        for line in f:
            if '"actor.batch"' not in line or '"save-' not in line:
                continue
            try:
                sizes.append(json.loads(line)["size"])
            except (ValueError, KeyError):
                continue
    if not sizes:
        return "none logged"
    return (f"{len(sizes)} batches, mean {sum(sizes) / len(sizes):.1f} requests, "
            f"p50 {percentile(sizes, 50)}, p90 {percentile(sizes, 90)}, max {max(sizes)}")



# -- the run ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64, help="concurrent connections (default 64)")
    parser.add_argument("--duration", type=float, default=10, help="seconds per measured run (default 10)")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before the first runs")
    parser.add_argument("--rounds", type=int, default=1,
                        help="echo and add runs alternate this many times (default 1)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--client", choices=("auto", "wrk", "asyncio"), default="auto",
                        help="auto: wrk if it is or can be installed, else asyncio")
    parser.add_argument("--workers", type=int, default=8,
                        help="mq --workers (default 8, mq's own)")
    parser.add_argument("--sync", default="fs", choices=("fs", "file"), help="mq --sync (default fs)")
    parser.add_argument("--daemon-args", default="",
                        help="more mq options, one string, e.g. '--no-access-log'")
    parser.add_argument("--batch-stats", action="store_true",
                        help="run mq with --log-level debug and report the save actors' batch sizes")
    parser.add_argument("--disk-seconds", type=float, default=5, help="seconds of the disk ceiling")
    add_calm_options(parser, "root")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root and logs")
    parser.add_argument("--serve-echo-actor", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-echo-front", nargs=2, metavar=("PORT", "ENDPOINT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_echo_actor:
        serve_echo_actor(args.serve_echo_actor)
        return 0
    if args.serve_echo_front:
        serve_echo_front(int(args.serve_echo_front[0]), args.serve_echo_front[1])
        return 0

    def say(text: str) -> None:
        print(text, flush=True)

    client = None
    if args.client != "asyncio":
        client = find_wrk(say)
        if client is None and args.client == "wrk":
            say("wrk is not available")
            return 2
    base = tempfile.mkdtemp(prefix="mq-bench-tp-", dir=args.tmp)
    root = os.path.join(base, "root")
    say(f"machine: {machine()}, file system: {filesystem(base)}")
    say(f"mq: {code_under_test()}")
    say(f"client: {client or 'asyncio'}; {args.clients} clients; {args.duration:g} s per run; "
        f"rounds: {args.rounds}")
    echo = daemon = None
    results: dict[str, list] = {"echo": [], "add": []}
    try:
        load = wait_for_calm(args.max_load, args.calm_wait, say)
        load_before = loadavg()
        say(f"load before: {load_before}")

        os.makedirs(os.path.join(base, "disk"))
        # Its files stay until the run ends: on ext4 without a journal, deleting them now
        # slowed the creates of mq's first round (bench/RESULTS.md, "Why batch adds were slow").
        disk = disk_ceiling(os.path.join(base, "disk"), args.disk_seconds)
        say(f"disk raw limit: {disk:,.0f} create+write+fsync+rename+dir-fsync per second")

        echo = Echo(base)
        extra = args.daemon_args.split() + (["--log-level", "debug"] if args.batch_stats else [])
        daemon = Daemon(root, args.workers, args.sync, extra=extra).start()
        say(f"daemon: {daemon.command}")
        path = f"/{QUEUE}/messages"
        warm_up(client, echo.port, "/echo/messages", args)
        warm_up(client, daemon.port, f"/{QUEUE}-warmup/messages", args)
        for r in range(args.rounds):
            say(f"round {r + 1}: load {loadavg()}")
            results["echo"].append(load_run(client, "add", echo.port, "/echo/messages", args,
                                            [p.pid for p in echo.procs]))
            e = results["echo"][-1]
            say(f"  echo ceiling: {e['requests_per_s']:,.0f} requests/s, p50 {e['p50_ms']:.1f} ms, "
                f"p99 {e['p99_ms']:.1f} ms, errors {e['errors']}")
            say(f"    CPU per request: {cpu_text(e)}")
            results["add"].append(load_run(client, "add", daemon.port, path, args,
                                           [daemon.proc.pid]))
            a = results["add"][-1]
            say(f"  mq adds:      {a['messages_per_s']:,.0f} messages/s, p50 {a['p50_ms']:.1f} ms, "
                f"p99 {a['p99_ms']:.1f} ms, errors {a['errors']}")
            say(f"    CPU per request: {cpu_text(a)}")
        echo.stop()
        echo = None
        say(f"fetch+delete: load {loadavg()}")
        warm = Client(daemon.port)
        status, headers, _ = warm.request("GET", path)  # Builds the fetch actor's index.
        if status == 200:
            warm.request("DELETE", f"{path}/{headers['X-Message-Id']}")
        warm.close()
        fetch = load_run(client, "fetch_delete", daemon.port, path, args, [daemon.proc.pid])
        say(f"  mq fetch+delete: {fetch['messages_per_s']:,.0f} messages/s "
            f"({fetch['requests_per_s']:,.0f} requests/s), p50 {fetch['p50_ms']:.1f} ms, "
            f"p99 {fetch['p99_ms']:.1f} ms per {fetch['latency_of']}, errors {fetch['errors']}")
        say(f"    CPU per request: {cpu_text(fetch)}")
        load_after = loadavg()
        batches = batch_stats(daemon.log_path) if args.batch_stats else ""
    finally:
        if echo:
            echo.stop()
        if daemon:
            daemon.stop()
        if args.keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    echo_rate = statistics.median(r["requests_per_s"] for r in results["echo"])
    add_rate = statistics.median(r["messages_per_s"] for r in results["add"])
    add_p99 = max(r["p99_ms"] for r in results["add"])
    ratios = [a["messages_per_s"] / e["requests_per_s"]
              for a, e in zip(results["add"], results["echo"])]
    ratio = statistics.median(ratios)
    errors = sum(r["errors"] for r in results["add"])
    say("")
    say(f"load before {load_before} (1-minute {load:.2f}), after {load_after}")
    say(f"client: {results['add'][0]['command']}")
    say("")
    say("| what | per second | p50 ms | p99 ms | errors |")
    say("|---|---:|---:|---:|---:|")
    say(f"| disk raw limit (create+write+fsync+rename+dir fsync, 1 thread) | {disk:,.0f} | | | |")
    for i, (e, a) in enumerate(zip(results["echo"], results["add"])):
        n = f" (round {i + 1})" if args.rounds > 1 else ""
        say(f"| echo ceiling: Tornado + 1 ZeroMQ round trip, {args.clients} clients{n} "
            f"| {e['requests_per_s']:,.0f} | {e['p50_ms']:.1f} | {e['p99_ms']:.1f} | {e['errors']} |")
        say(f"| mq durable adds, {args.clients} clients{n} "
            f"| {a['messages_per_s']:,.0f} | {a['p50_ms']:.1f} | {a['p99_ms']:.1f} | {a['errors']} |")
    say(f"| mq fetch+delete, {args.clients} clients (messages; latency per {fetch['latency_of']}) "
        f"| {fetch['messages_per_s']:,.0f} | {fetch['p50_ms']:.1f} | {fetch['p99_ms']:.1f} "
        f"| {fetch['errors']} |")
    say("")
    say("CPU per request, summed over each server's processes (microseconds; the client's not "
        "counted):")
    say(f"  echo ceiling:     {cpu_text(results['echo'][-1])}")
    say(f"  mq adds:          {cpu_text(results['add'][-1])}")
    say(f"  mq fetch+delete:  {cpu_text(fetch)}")
    if args.batch_stats:
        say(f"  save batches:     {batches}")
    say("")
    say(f"adds / echo ceiling: {ratio:.2f} (per round: {', '.join(f'{r:.2f}' for r in ratios)}); "
        f"adds / disk raw limit: {add_rate / disk:.2f}")
    met = ratio >= 0.8 and add_p99 < 100 and errors == 0
    say(f"target (adds >= 0.8 x echo, p99 < 100 ms, no errors): "
        f"{'met' if met else 'MISSED'} (ratio {ratio:.2f}, worst p99 {add_p99:.1f} ms, "
        f"echo {echo_rate:,.0f}/s, adds {add_rate:,.0f}/s)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
