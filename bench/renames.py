"""What a state change costs: the Disk's rename before (os.rename) against now (renameat2
with RENAME_NOREPLACE through ctypes, core/store/renames.py), on the disk holding --tmp.

    python bench/renames.py --renames 20000 --rounds 10

Each round moves the same files between two folders once with each method, in alternating
order, so that a machine whose load changes during the run weighs on both alike; the result
is the median per-rename time of each method over the rounds, and their ratio per round.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from harness import code_under_test, loadavg, machine_line  # noqa: E402

from mq.store import Disk  # noqa: E402


class PlainDisk(Disk):
    """The Disk as it renamed before: os.rename, which replaces an existing target."""

    def rename(self, source: str, target: str) -> None:
        """rename(2)."""
        os.rename(source, target)


def one_pass(rename, names: list[str], here: str, there: str) -> float:
    """Seconds per rename to move every name from here to there."""
    started = time.perf_counter()
    for name in names:
        rename(f"{here}/{name}", f"{there}/{name}")
    return (time.perf_counter() - started) / len(names)


def main() -> int:
    """Run the rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renames", type=int, default=20000, help="files moved per pass")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="mq-renames-", dir=args.tmp)
    print(f"mq renames: {args.renames} renames a pass, {args.rounds} rounds of both methods")
    print(f"  {machine_line(work)}; {code_under_test()}")
    print(f"  load before: {loadavg()}")
    disk, before = Disk("fs"), PlainDisk("fs")
    a, b = os.path.join(work, "a"), os.path.join(work, "b")
    os.mkdir(a)
    os.mkdir(b)
    names = [f"{n:08d}" for n in range(args.renames)]
    for name in names:
        os.close(os.open(f"{a}/{name}", os.O_CREAT | os.O_WRONLY, 0o644))
    methods = {"Disk.rename before (os.rename)": before.rename,
               "Disk.rename (renameat2 NOREPLACE)": disk.rename}
    times = {name: [] for name in methods}
    try:
        for round_ in range(args.rounds):
            order = list(methods) if round_ % 2 == 0 else list(reversed(methods))
            for name in order:
                # There and back: the files end where they started for the next method.
                there = one_pass(methods[name], names, a, b)
                back = one_pass(methods[name], names, b, a)
                times[name].append((there + back) / 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"  load after: {loadavg()}\n")
    print("| method | median us per rename | fastest round | slowest round |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values) * 1e6:.2f} | {min(values) * 1e6:.2f} | "
              f"{max(values) * 1e6:.2f} |")
    plain, ours = times["Disk.rename before (os.rename)"], times["Disk.rename (renameat2 NOREPLACE)"]
    ratios = [o / p for o, p in zip(ours, plain)]
    print(f"\nratio now / before per round: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f} to {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
