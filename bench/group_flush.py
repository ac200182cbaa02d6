#!/usr/bin/env python3
"""The flush group alone: P processes writing 100-byte files the way save actors do, each
flushing on its own or through one shared mq.store.group_flush file.

    .venv/bin/python bench/group_flush.py [--procs 1,4,8] [--batch 1,4,16] [--files 2000]
                                          [--rounds 2] [--tmp DIR]

Each process repeats, --files times in all: create and write --batch files in its own folder,
flush, rename each into a second folder, flush (mq's two flushes per save batch). "alone" flushes
with syncfs(2) every time; "group" goes through a GroupFlush shared by the P processes (a
flush is skipped when a syncfs started after the process's writes has completed). Reported per
file: CPU (user+system of the P processes, from os.wait4), syncfs calls made, and the files
per second of the whole run (on a shared machine, the CPU is the figure that carries over).
The setups take turns in an order that rotates every round.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from mq.store.disk import Disk
from mq.store.group_flush import GroupFlush, flush_file, read_counts

BODY = b"m" * 100


def writer(folder: str, files: int, batch: int, group: str | None, start) -> None:
    """One process's work (run in a forked child); exits when done."""
    disk = Disk("fs")
    if group:
        disk.share_flushes(GroupFlush(group))
    new, done = os.path.join(folder, "new"), os.path.join(folder, "done")
    os.makedirs(new)
    os.makedirs(done)
    os.read(start, 1)  # All start together.
    for first in range(0, files, batch):
        names = [f"{n:08d}" for n in range(first, min(first + batch, files))]
        for name in names:
            disk.create(os.path.join(new, name), BODY)
        disk.syncfs(folder)
        for name in names:
            disk.rename(os.path.join(new, name), os.path.join(done, name))
        disk.syncfs(folder)
    os._exit(0)


def one_run(base: str, procs: int, batch: int, files: int, grouped: bool) -> dict:
    """P forked writers; their CPU, files per second and syncfs calls."""
    run = tempfile.mkdtemp(dir=base)
    group = flush_file(run) if grouped else None
    read_end, write_end = os.pipe()
    pids = []
    for p in range(procs):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            writer(os.path.join(run, f"w{p}"), files // procs, batch, group, read_end)
        pids.append(pid)
    os.close(read_end)
    time.sleep(0.2)  # let them make their folders (not measured)
    started = time.monotonic()
    os.write(write_end, b"g" * procs)
    cpu = 0.0
    for pid in pids:
        _, status, usage = os.wait4(pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
    seconds = time.monotonic() - started
    os.close(write_end)
    counts = read_counts(group) if grouped else None
    shutil.rmtree(run, ignore_errors=True)
    total = (files // procs) * procs
    flushes = 2 * procs * -(-(files // procs) // batch)
    syncfs = counts["started"] if counts else flushes
    return {"cpu_us": cpu / total * 1e6, "per_s": total / seconds, "syncfs": syncfs / total,
            "flushes": flushes / total}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="1,4,8")
    parser.add_argument("--batch", default="1,4,16")
    parser.add_argument("--files", type=int, default=2000, help="files per run, all processes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tmp", default=None, help="folder on the file system to measure")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mq-bench-group-", dir=args.tmp)
    setups = [(p, b, g) for p in map(int, args.procs.split(",")) for b in map(int, args.batch.split(","))
              for g in (False, True) if not (g and p == 1)]
    results: dict = {s: [] for s in setups}
    print(f"load {os.getloadavg()}, {os.cpu_count()} cores, {args.files} files per run", flush=True)
    try:
        for r in range(args.rounds):
            turn = r % len(setups)
            for setup in setups[turn:] + setups[:turn]:
                results[setup].append(one_run(base, setup[0], setup[1], args.files, setup[2]))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("| processes | batch | flush | CPU us per file | syncfs per file | files/s |")
    print("|---:|---:|---|---:|---:|---:|")
    for (procs, batch, grouped), runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {procs} | {batch} | {'group' if grouped else 'alone'} | {med['cpu_us']:.0f} | "
              f"{med['syncfs']:.3f} | {med['per_s']:,.0f} |")
    print(f"(medians of {args.rounds} rounds; load after {os.getloadavg()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
