#!/usr/bin/env python3
"""Batch adds against beanstalkd, round by round, each on a fresh server and folder, with what
each round's machine and disk did.

    .venv/bin/python bench/batch_rounds.py [--rounds 6] [--seconds 8] [--connections 64]
        [--tmp DIR] [--mq-args ""] [--perf] [--keep]

bench/peers.py gives medians; this one looks at the rounds that fall away from them. Each
round starts beanstalkd (`-b DIR -f0`) on a new folder and puts for --seconds with
--connections asyncio clients, stops it, then starts mq on a new root and adds 100 messages a
call for --seconds with as many clients, the clients of bench/peers.py. For the mq part it
records, beside msg/s: messages completed in each second of the round, the CPU of every
process of the tree (user + system and system alone, psutil), each save actor's flushes
(/metrics' mq_flush_seconds: count and total seconds), with --perf the save actors' hottest
symbols (`perf record -g`, the kernel's included), the most dirty and writeback memory seen
(/proc/meminfo, every 0.2 s), the sectors the root's disk wrote and its time busy
(/proc/diskstats), and the load average. Before the mq part it times 500 creates of empty
files in a new folder beside the root (what an add costs ext4 where no spare file is at
hand: bench/RESULTS.md "Why batch adds were slow"). The round's folders are deleted at its
end, as bench/peers.py's are, unless --keep: then at the end of the run.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import peers_servers as servers
from harness import Client, Daemon, code_under_test, filesystem, loadavg, machine_line
from peers_clients import Beanstalk, Mq, drive


def meminfo() -> dict:
    """Dirty and Writeback from /proc/meminfo, in KiB."""
    found = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Dirty", "Writeback"):
                found[key] = int(rest.split()[0])
    return found


def disk_of(path: str) -> str:
    """The block device name (as in /proc/diskstats) holding path."""
    dev = os.stat(path).st_dev
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if (int(fields[0]), int(fields[1])) == (os.major(dev), os.minor(dev)):
                return fields[2]
    return "?"


def diskstats(name: str) -> tuple[int, int]:
    """(sectors written, ms spent doing I/O) of a block device."""
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if fields[2] == name:
                return int(fields[9]), int(fields[12])
    return 0, 0


class Watch:
    """Samples /proc/meminfo every 0.2 s in a thread: the most Dirty and Writeback seen."""

    def __init__(self):
        self.most = {"Dirty": 0, "Writeback": 0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for key, value in meminfo().items():
                self.most[key] = max(self.most[key], value)

    def done(self) -> dict:
        self.stop.set()
        self.thread.join()
        return self.most


def create_cost(folder: str, files: int = 500) -> float:
    """Microseconds of CPU per create of an empty file in a new sub-folder of folder."""
    work = tempfile.mkdtemp(prefix="create-", dir=folder)
    cpu = time.process_time()
    for i in range(files):
        os.close(os.open(os.path.join(work, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    return (time.process_time() - cpu) / files * 1e6


async def timeline(make, conns: int, seconds: float) -> tuple[dict, list]:
    """drive() the batch adds, count the messages done in each second of the round and
    those sent (result["sent"])."""
    marks: list[float] = []
    sent = [0]
    original = Mq.put_batch

    async def counted(self):
        sent[0] += 1
        done = await original(self)
        if done:
            marks.append(time.perf_counter())
        return done

    Mq.put_batch = counted
    try:
        started = time.perf_counter()
        result = await drive(make, "put_batch", conns, seconds)
    finally:
        Mq.put_batch = original
    per_second = [0] * (int(seconds) + 1)
    for mark in marks:
        per_second[min(int(mark - started), len(per_second) - 1)] += 100
    result["sent"] = sent[0] * 100
    return result, per_second


def save_flushes(port: int) -> dict:
    """{actor: [flushes, seconds]} of every save actor, from /metrics' mq_flush_seconds."""
    client = Client(port, timeout=30)
    try:
        status, _, body = client.request("GET", "/metrics")
    finally:
        client.close()
    out: dict = {}
    for line in body.decode().splitlines() if status == 200 else []:
        for suffix, slot in (("_count", 0), ("_sum", 1)):
            head = f"mq_flush_seconds{suffix}{{actor=\"save-"
            if line.startswith(head):
                name, value = line[len(head):].split('"}')
                out.setdefault(f"save-{name}", [0, 0.0])[slot] = round(float(value), 2)
    return out


def cpu_times(procs: dict) -> dict:
    """{name: (user, system) CPU seconds} of each psutil.Process."""
    out = {}
    for name, proc in procs.items():
        try:
            times = proc.cpu_times()
            out[name] = (times.user, times.system)
        except Exception:
            out[name] = (float("nan"), float("nan"))
    return out


def perf_top(pids: list[int], seconds: float, folder: str) -> list[str]:
    """The hottest symbols (kernel's included) of these processes over `seconds`, from
    `perf record -g`, as `perf report` prints them; [] without perf."""
    data = os.path.join(folder, "perf.data")
    try:
        subprocess.run(["perf", "record", "-q", "-g", "-o", data, "-p", ",".join(map(str, pids)),
                        "--", "sleep", str(seconds)], capture_output=True, timeout=seconds + 60)
        out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                              "--sort", "sym", "-g", "none", "--percent-limit", "3"],
                             capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [" ".join(line.split()) for line in out.splitlines() if "%" in line and
            not line.startswith("#")][:8]


def one_round(args, number: int, folder: str, say) -> dict:
    """beanstalkd, then mq, each on a fresh folder in `folder`; the round's figures."""
    base = tempfile.mkdtemp(prefix=f"round{number}-", dir=folder)
    out = {"round": number, "folder": folder, "fs": filesystem(folder), "load": loadavg()}
    try:
        beanstalkd = servers.beanstalkd(os.path.join(base, "beanstalkd", "data"))
        try:
            done = asyncio.run(drive(lambda: Beanstalk(beanstalkd.port, "bench"), "put",
                                     args.conns, args.seconds))
            out["beanstalkd"] = done["messages"] / done["seconds"]
        finally:
            beanstalkd.stop()
        root = os.path.join(base, "mq", "root")
        os.makedirs(os.path.dirname(root))
        out["create_us"] = round(create_cost(os.path.dirname(root)), 1)
        daemon = Daemon(root, "auto", "fs", extra=args.mq_args.split()).start()
        try:
            procs = daemon.processes()
            device = disk_of(root)
            written, busy = diskstats(device)
            cpu = cpu_times(procs)
            watch = Watch()
            perf: list = []
            if args.perf:  # The save actors' hottest symbols, during the round.
                saves = [proc.pid for name, proc in procs.items() if name.startswith("save")]
                profiler = threading.Thread(target=lambda: perf.extend(
                    perf_top(saves, args.seconds, base)))
                profiler.start()
            done, per_second = asyncio.run(timeline(lambda: Mq(daemon.port, "batch"), args.conns,
                                                    args.seconds))
            most = watch.done()
            after = cpu_times(procs)
            if args.perf:
                profiler.join()
                out["perf"] = perf
            written2, busy2 = diskstats(device)
            out["mq"] = done["messages"] / done["seconds"]
            out["refused"] = done["refused"]
            out["per_second"] = per_second
            # What the save actors spent per message sent them (stored, or written and
            # discarded when it could not be committed before its deadline).
            saves = [name for name in procs if name.startswith("save")]
            out["save_us_per_sent"] = round(sum(
                sum(after[name]) - sum(cpu[name]) for name in saves) / max(done["sent"], 1) * 1e6)
            # user+system CPU seconds of each process in the round, and its system part
            out["cpu_s"] = {name: [round(after[name][0] + after[name][1] - sum(cpu[name]), 2),
                                   round(after[name][1] - cpu[name][1], 2)] for name in cpu}
            out["flushes"] = save_flushes(daemon.port)
            out["dirty_kib"], out["writeback_kib"] = most["Dirty"], most["Writeback"]
            out["disk"] = {"device": device, "mib_written": round((written2 - written) / 2048, 1),
                           "busy_ms": busy2 - busy}
        finally:
            daemon.stop()
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    out["ratio"] = round(out["mq"] / out["beanstalkd"], 2)
    say(json.dumps(out))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=64, dest="conns")
    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help="folder for the servers' data (its file system is the one measured);"
                             " several, comma-separated: the rounds take turns")
    parser.add_argument("--mq-args", default="", help="more mq options")
    parser.add_argument("--keep", action="store_true",
                        help="delete the rounds' folders at the end of the run, not of each round")
    parser.add_argument("--perf", action="store_true",
                        help="perf record the save actors in each round; print their hottest symbols")
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        print(text, flush=True)

    say(f"machine: {machine_line()}; mq: {code_under_test()}; load {loadavg()}")
    # One folder per --tmp, the rounds taking turns: file systems side by side, same load.
    kept = [tempfile.mkdtemp(prefix="mq-batch-rounds-", dir=tmp) for tmp in args.tmp.split(",")]
    rounds = []
    try:
        for n in range(args.rounds):
            rounds.append(one_round(args, n + 1, kept[n % len(kept)], say))
    finally:
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)
    for folder in kept if len(kept) > 1 else []:
        mine = [r["mq"] for r in rounds if r["folder"] == folder]
        say(f"{folder}: mq batch adds/s {', '.join(f'{v:,.0f}' for v in mine)}")
    mq = [r["mq"] for r in rounds]
    median = statistics.median(mq)
    peer = ", ".join(f"{r['beanstalkd']:,.0f}" for r in rounds)
    say(f"mq batch adds/s by round: {', '.join(f'{v:,.0f}' for v in mq)}; median {median:,.0f}; "
        f"beanstalkd {peer}; median ratio "
        f"{statistics.median(r['ratio'] for r in rounds):.2f}; rounds within 20 % of the median: "
        f"{sum(abs(v - median) <= 0.2 * median for v in mq)} of {len(mq)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
