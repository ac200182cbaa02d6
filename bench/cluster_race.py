"""Two clients of one distributed file system rename the same files to the same names at
the same moment: how often do both report success? Once with plain rename(2), once with the
Disk's rename (renameat2 RENAME_NOREPLACE, checked where refused: core/store/renames.py).

    python bench/cluster_race.py glusterfs --trials 300 --rounds 2
    python bench/cluster_race.py juicefs

Builds the file system with bench/cluster_fs.py (root needed) and uses two of its mounts;
each process stats the source and the target first, as a fetch opens the file it claims.
"""

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import uuid
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster_fs import VOLUMES  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402

from mq.store import Disk  # noqa: E402

METHODS = {"rename(2)": os.rename, "Disk.rename": Disk("file").rename}


def racer(mount: str, method: str, run: str, trials: int, barrier, results) -> None:
    """Rename each file of the run from src/ to dst/ in step with the other racer."""
    rename = METHODS[method]
    for n in range(trials):
        source, target = f"{mount}/src/{run}-{n}", f"{mount}/dst/{run}-{n}"
        os.path.exists(source)
        os.path.exists(target)
        barrier.wait()
        try:
            rename(source, target)
            results.put((n, "ok"))
        except OSError as err:
            results.put((n, os.strerror(err.errno)))


def race(mounts: list[str], method: str, trials: int) -> Counter:
    """One round: outcomes of the two racers, counted per file."""
    run = uuid.uuid4().hex[:8]
    for folder in ("src", "dst"):
        os.makedirs(f"{mounts[0]}/{folder}", exist_ok=True)
    for n in range(trials):
        os.close(os.open(f"{mounts[0]}/src/{run}-{n}", os.O_CREAT | os.O_WRONLY, 0o644))
    barrier, results = multiprocessing.Barrier(2), multiprocessing.Queue()
    procs = [multiprocessing.Process(target=racer, args=(m, method, run, trials, barrier, results))
             for m in mounts[:2]]
    for proc in procs:
        proc.start()
    outcomes: dict[int, list[str]] = {}
    for _ in range(2 * trials):
        n, outcome = results.get(timeout=120)
        outcomes.setdefault(n, []).append(outcome)
    for proc in procs:
        proc.join()
    return Counter(" / ".join(sorted(pair)) for pair in outcomes.values())


def main() -> int:
    """Build the file system, race, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filesystem", choices=sorted(VOLUMES))
    parser.add_argument("--trials", type=int, default=300, help="files raced per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each method, alternated")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    volume_class = VOLUMES[args.filesystem]
    if (why := volume_class.missing()):
        print(f"cluster_race: {why}")
        return 2
    workdir = tempfile.mkdtemp(prefix="mq-race-", dir=args.tmp)
    print(f"mq rename race on {args.filesystem}: {args.rounds} rounds x {args.trials} files a method")
    print(f"  {machine_line(workdir)}; {code_under_test()}; load {loadavg()}")
    totals = {method: Counter() for method in METHODS}
    try:
        with volume_class(workdir, mounts=2) as volume:
            for _ in range(args.rounds):
                for method in METHODS:
                    totals[method] += race(volume.mounts, method, args.trials)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n| method | races | both succeeded | outcomes |\n|---|---:|---:|---|")
    for method, outcomes in totals.items():
        print(f"| {method} | {sum(outcomes.values())} | {outcomes.get('ok / ok', 0)} | "
              f"{', '.join(f'{k}: {v}' for k, v in sorted(outcomes.items()))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
