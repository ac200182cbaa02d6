#!/usr/bin/env python3
"""mq against durable peers: beanstalkd and Redis, each syncing every write, on one machine.

    .venv/bin/python bench/peers.py [--rounds 3] [--seconds 5] [--connections 1,64]
                                    [--mq-args "--no-access-log"]

Needs beanstalkd, redis-server, redis-benchmark and wrk on PATH (Debian: `apt-get install
beanstalkd redis-server redis-tools wrk`); it installs nothing and says what is missing.

It starts, on temporary folders under --tmp: beanstalkd (`-b DIR -f0`: binlog fsynced after
every write), Redis (`appendonly yes`, `appendfsync always`, no snapshots) and mq (`--sync fs`,
its default: a reply only once the message is durable). Then, in every round and for each
number of connections, it drives each of them with 100-byte messages:

- put: one Python asyncio client speaking each raw protocol (beanstalkd `put`, Redis `LPUSH`,
  mq `POST`) for --seconds; then take, the same client taking back and acknowledging what was
  put until the queue is empty (beanstalkd `reserve` + `delete`; Redis `LMOVE` to a work list
  + `LREM`, the reliable-queue pattern; mq `GET` + `DELETE`);
- mq batch: the same client adding 100 messages per request (JSON lines), then fetching 100
  per request and acknowledging them in one (`GET ?max=100`, `POST .../ack`); skipped with a
  note when the daemon has no batch API;
- each server's own load tool: wrk against mq (bench/wrk/post.lua and fetch_delete.lua, for
  --seconds each) and redis-benchmark against Redis (LPUSH, then RPOP without an
  acknowledgement, as many requests as the asyncio client's put made in that round);
- the file ceilings: what the file system allows mq's way of storing (256 new files, a rename
  of each, two syncfs per batch) for --seconds, and the same with files taken from a pool of
  spares and written over, as mq does once it has spare files.

The units (a server with a client and a number of connections) take turns in an order that
rotates every round, so load from elsewhere falls on all alike. The table gives per workload the
median over the rounds of messages per second (and the range), p50 and p99 of each call's
latency (a batch call handles 100 messages), and mq's figures as ratios to each row.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

import peers_servers as servers
from harness import Daemon, code_under_test, loadavg, machine_line, percentile
from peers_clients import Beanstalk, Mq, Redis, Unsupported, drive

HERE = os.path.dirname(os.path.abspath(__file__))


def summarize(result: dict) -> dict:
    """messages/seconds/latencies from drive() or file_ceiling() as per_s, p50, p99."""
    lat = result["latencies"]
    return {"per_s": result["messages"] / max(result["seconds"], 1e-9),
            "p50": percentile(lat, 50), "p99": percentile(lat, 99), "n": result["messages"]}


class Bench:
    """The servers of one run and every figure measured, by workload."""

    def __init__(self, args, base: str, say):
        self.args, self.base, self.say = args, base, say
        self.figures: dict[tuple, list[dict]] = {}
        self.notes: list[str] = []
        self.skip: set[str] = set()
        self.last_put: dict[int, int] = {}

    def record(self, key: tuple, figures: dict) -> None:
        """Keep one round's figures of a workload (op, connections, system, client)."""
        self.figures.setdefault(key, []).append(figures)
        self.say(f"    {' '.join(map(str, key)):48} {figures['per_s']:10,.0f}/s  "
                 f"p50 {figures['p50'] * 1000:7.2f} ms  p99 {figures['p99'] * 1000:7.2f} ms")

    def start(self) -> None:
        """Start beanstalkd, Redis and mq on folders under the base folder."""
        self.beanstalkd = servers.beanstalkd(os.path.join(self.base, "beanstalkd", "data"))
        self.redis = servers.redis(os.path.join(self.base, "redis", "data"))
        root = os.path.join(self.base, "mq", "root")
        os.makedirs(os.path.dirname(root), exist_ok=True)
        # mq's own default (--workers auto: one a core, at least 2), unless
        # --mq-args says otherwise (the last flag wins).
        self.mq = Daemon(root, "auto", "fs", extra=self.args.mq_args.split()).start()
        for server in (self.beanstalkd, self.redis):
            self.say(f"{server.name}: {server.command}")
        self.say(f"mq: {self.mq.command}")

    def stop(self) -> None:
        """Stop every server this run started."""
        for stop in (getattr(self, "mq", None), getattr(self, "redis", None),
                     getattr(self, "beanstalkd", None)):
            if stop is not None:
                stop.stop()

    def pair(self, system: str, make, conns: int, put: str = "put", take: str = "take") -> None:
        """Put for --seconds, then take until empty, with `conns` asyncio clients."""
        client = MQ_BATCH[1] if system == "mq batch" else "asyncio"
        try:
            done = asyncio.run(drive(make, put, conns, self.args.seconds))
            self.record(("put", conns, system, client), summarize(done))
            if system == "redis":
                self.last_put[conns] = done["messages"]
            taken = asyncio.run(drive(make, take, conns, None))
            self.record(("take", conns, system, client), summarize(taken))
            for op, result in (("put", done), ("take", taken)):
                if result.get("refused"):
                    self.notes.append(f"{system} {op} c{conns}: {result['refused']} calls "
                                      "answered 503 and were retried")
        except Unsupported as why:
            self.skip.add(system)
            self.notes.append(f"{system} skipped: {why}")
            self.say(f"    {system}: skipped ({why})")

    def unit(self, name: str, conns: int) -> None:
        """Run one unit of a round: a server, a client and a number of connections."""
        seconds, tag = self.args.seconds, f"c{conns}"
        if name == "beanstalkd":
            self.pair("beanstalkd", lambda: Beanstalk(self.beanstalkd.port, f"bench-{tag}"), conns)
        elif name == "redis":
            self.pair("redis", lambda: Redis(self.redis.port, f"bench-{tag}"), conns)
        elif name == "redis-benchmark":
            count = max(1000, self.last_put.get(conns, 1000))
            for op, test in (("put", "lpush"), ("take", "rpop")):
                self.record((op, conns, "redis", f"redis-benchmark {test.upper()}"),
                            servers.redis_benchmark(self.redis.port, test, conns, count))
        elif name == "mq":
            self.pair("mq", lambda: Mq(self.mq.port, f"single-{tag}"), conns)
        elif name == "mq batch" and "mq batch" not in self.skip:
            self.pair("mq batch", lambda: Mq(self.mq.port, f"batch-{tag}"), conns,
                      "put_batch", "take_batch")
        elif name == "wrk":
            path = f"/wrk-{tag}/messages"
            for op, script in (("put", "post.lua"), ("take", "fetch_delete.lua")):
                result = servers.wrk(self.mq.port, os.path.join(HERE, "wrk", script), path,
                                     conns, seconds)
                self.record((op, conns, "mq", "wrk"), result)
                if result["refused"]:
                    self.notes.append(f"mq wrk {op} c{conns}: {result['refused']} answers were "
                                      "not 2xx (503: overload)")
        elif name == "file ceiling" and conns == self.args.conns[0]:
            for key in CEILINGS:
                folder = tempfile.mkdtemp(prefix="ceiling-", dir=self.base)
                self.record(key, summarize(servers.file_ceiling(folder, seconds,
                                                                spares=key == SPARE_CEILING)))

    def run(self) -> None:
        """Every round: every unit once, in an order that rotates round by round."""
        names = ["beanstalkd", "redis", "redis-benchmark", "mq", "mq batch", "wrk", "file ceiling"]
        units = [(name, conns) for conns in self.args.conns for name in names]
        for r in range(self.args.rounds):
            self.say(f"round {r + 1} of {self.args.rounds}, load {loadavg()}")
            shift = r * len(units) // self.args.rounds
            for name, conns in units[shift:] + units[:shift]:
                self.unit(name, conns)


MQ_SINGLE, MQ_WRK, MQ_BATCH = ("mq", "asyncio"), ("mq", "wrk"), ("mq batch", "asyncio, 100 a call")
CEILING = ("put", "-", "file ceiling", "256 files, 2 syncfs")
SPARE_CEILING = ("put", "-", "file ceiling", "256 spare files, 2 syncfs")
CEILINGS = (CEILING, SPARE_CEILING)


def table(bench: Bench) -> list[str]:
    """The results as a Markdown table, mq's figures as ratios to each row: mq single (to a
    peer's asyncio row mq's asyncio figure, to a load tool's row mq's wrk figure) and mq batch."""
    figures = bench.figures

    def median(key, field="per_s"):
        return statistics.median(f[field] for f in figures[key])

    def ratio(mine: tuple, key: tuple) -> str:
        return f"{median(mine) / median(key):.2f}" if mine in figures else ""

    lines = ["| op | conns | server | client | msg/s (median) | range | p50 ms | p99 ms "
             "| mq ÷ this | mq batch ÷ this |", "|---|---:|---|---|---:|---|---:|---:|---:|---:|"]
    for key in sorted(figures, key=lambda k: (k[0] != "put", str(k[1]), k[2], k[3])):
        op, conns = key[0], key[1]
        rates = [f["per_s"] for f in figures[key]]
        if key in CEILINGS:
            single = ", ".join(f"{name} c{c} {r}" for c in bench.args.conns
                               for name, mine in (("asyncio", MQ_SINGLE), ("wrk", MQ_WRK))
                               if (r := ratio(("put", c, *mine), key)))
            batch = ", ".join(f"c{c} {r}" for c in bench.args.conns
                              if (r := ratio(("put", c, *MQ_BATCH), key)))
        elif key[2].startswith("mq"):
            single = batch = ""
        else:
            single = ratio((op, conns, *(MQ_SINGLE if key[3] == "asyncio" else MQ_WRK)), key)
            batch = ratio((op, conns, *MQ_BATCH), key)
        lines.append(f"| {op} | {conns} | {key[2]} | {key[3]} | {median(key):,.0f} "
                     f"| {min(rates):,.0f}-{max(rates):,.0f} | {median(key, 'p50') * 1000:.2f} "
                     f"| {median(key, 'p99') * 1000:.2f} | {single} | {batch} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="seconds of each put workload, wrk run and ceiling (default 5)")
    parser.add_argument("--connections", default="1,64",
                        help="numbers of connections (default 1,64)")
    parser.add_argument("--mq-args", default="",
                        help="more mq options (default none: mq's defaults, access log on)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help="folder for the servers' data (its file system is the one measured)")
    args = parser.parse_args(argv)
    args.conns = [int(c) for c in args.connections.split(",")]
    missing = servers.missing_programs()
    if missing:
        print("bench/peers.py installs nothing; missing programs:\n  " + "\n  ".join(missing),
              file=sys.stderr)
        return 2

    def say(text: str) -> None:
        print(text, flush=True)

    base = tempfile.mkdtemp(prefix="mq-bench-peers-", dir=args.tmp)
    say(f"machine: {machine_line(base)}")
    say(f"mq: {code_under_test()}")
    bench = Bench(args, base, say)
    started = time.monotonic()
    load_before = loadavg()
    try:
        bench.start()
        bench.run()
    finally:
        bench.stop()
        shutil.rmtree(base, ignore_errors=True)
    say("")
    say(f"{args.rounds} rounds in {time.monotonic() - started:.0f} s; load before {load_before}, "
        f"after {loadavg()}")
    for note in bench.notes:
        say(f"note: {note}")
    say("")
    for line in table(bench):
        say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
