#!/usr/bin/env python3
"""What one syncfs per batch of adds saves against two: the kernel's part of an add, alone.

    .venv/bin/python bench/add_flushes.py --tmp DIR [--batches 150] [--sizes 1,16] [--rounds 2]

A batch of adds as the save actor makes it, without Python's part: create and write each
file (150 bytes) in new/, then either `syncfs`, rename each into q/, `syncfs` ("two", for
keys, due times, windows and fan-outs) or rename each, `syncfs` ("one", a batch of plain
adds: docs/FORMAT.md, "Add"). Prints, per batch size and mode, the CPU time of this thread
per file (user + system: the kernel writes dirty pages back in the caller of syncfs) and the
wall time per batch (what an add waits for). Modes alternate within each round; each mode
works in a folder of its own, removed after it, so both meet the same file system.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

from harness import thread_cpu

from mq.store.disk import Disk

BODY = b"x" * 150


def cpu_seconds() -> float:
    """User + system CPU time of the calling thread."""
    used = thread_cpu()
    return used.real + used.imag


def run(base: str, mode: str, size: int, batches: int) -> tuple[float, float]:
    """(CPU us per file, wall ms per batch) of `batches` batches of `size` adds."""
    new, queue = os.path.join(base, "new"), os.path.join(base, "q")
    os.makedirs(new)
    os.makedirs(queue)
    disk = Disk("fs")  # Its syncfs, as the save actor calls it.
    try:
        cpu, wall = cpu_seconds(), time.perf_counter()
        for b in range(batches):
            names = [f"{b}-{i}" for i in range(size)]
            for name in names:
                out = os.open(os.path.join(new, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(out, BODY)
                os.close(out)
            if mode == "two":
                disk.syncfs_now(base)
            for name in names:
                os.rename(os.path.join(new, name), os.path.join(queue, name))
            disk.syncfs_now(base)
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    finally:
        shutil.rmtree(base)
    return cpu / (batches * size) * 1e6, wall / batches * 1e3


def main() -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help="a folder on the file system to measure")
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--sizes", default="1,16", help="adds per batch, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="mq-bench-flushes-", dir=args.tmp)
    try:
        figures: dict = {}
        for _ in range(args.rounds):
            for size in (int(s) for s in args.sizes.split(",")):
                for mode in ("two", "one"):
                    figures.setdefault((size, mode), []).append(
                        run(os.path.join(base, mode), mode, size, args.batches))
        print(f"{args.tmp}: medians of {args.rounds} rounds of {args.batches} batches")
        print("| adds per batch | syncfs per batch | CPU us per add | wall ms per batch |")
        print("|---:|---:|---:|---:|")
        for (size, mode), runs in figures.items():
            print(f"| {size} | {2 if mode == 'two' else 1} "
                  f"| {statistics.median(r[0] for r in runs):.1f} "
                  f"| {statistics.median(r[1] for r in runs):.2f} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
