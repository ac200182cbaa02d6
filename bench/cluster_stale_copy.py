"""A claim made while a brick of a replicated GlusterFS volume was down, then the same claim
through another mount once the brick is back: does the second also succeed (one message
handed out twice)?

    python bench/cluster_stale_copy.py --replica 2 --files 20 --rounds 2 [--mode add-down]

Per round, on a fresh set of files: mount B looks every file up (as a fetch opens the file it
claims), brick `--kill` is killed, mount A renames each file src/x -> dst/x with the Disk's
rename (as a claim: checked, GlusterFS refuses RENAME_NOREPLACE), the brick is started again,
and mount B renames the same files to the same names at once (`--after` seconds later). A
rename of B that succeeds is a second claim. Builds the volume with bench/cluster_fs.py
(root needed).
"""

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster_fs import GlusterVolume  # noqa: E402
from cluster_race import racer  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402

from mq.store import Disk  # noqa: E402

RENAME = Disk("file").rename


def outcome(action) -> str:
    """"ok", or the errno's words."""
    try:
        action()
        return "ok"
    except OSError as err:
        return os.strerror(err.errno)


def heal_pending(volume: GlusterVolume) -> int:
    """Entries `gluster volume heal info` lists as needing heal, over every brick."""
    out = volume.cli("volume", "heal", volume.name, "info", timeout=60).stdout
    return sum(int(line.split(":")[1]) for line in out.splitlines()
               if line.startswith("Number of entries:") and line.split(":")[1].strip().isdigit())


def made_files(volume: GlusterVolume, files: int) -> tuple[str, str, list[str]]:
    """Mounts A and B, and the names of `files` empty files made in src/ through A and looked
    up through B (so B holds them in its cache)."""
    a, b = volume.mounts[:2]
    run = uuid.uuid4().hex[:8]
    for folder in ("src", "dst"):
        os.makedirs(f"{a}/{folder}", exist_ok=True)
    names = [f"{run}-{n}" for n in range(files)]
    for name in names:
        os.close(os.open(f"{a}/src/{name}", os.O_CREAT | os.O_WRONLY, 0o644))
    for name in names:
        os.stat(f"{b}/src/{name}")
    return a, b, names


def one_round(volume: GlusterVolume, files: int, kill: int, after: float) -> dict:
    """One round; the outcomes of A's and B's renames, counted."""
    a, b, names = made_files(volume, files)
    volume.kill_server(kill)
    first = Counter(outcome(lambda n=n: RENAME(f"{a}/src/{n}", f"{a}/dst/{n}")) for n in names)
    volume.restart_servers()
    pending = heal_pending(volume)
    time.sleep(after)
    second = Counter(outcome(lambda n=n: RENAME(f"{b}/src/{n}", f"{b}/dst/{n}")) for n in names)
    left = sum(os.path.exists(f"{b}/src/{n}") for n in names)
    moved = sum(os.path.exists(f"{b}/dst/{n}") for n in names)
    return {"A (brick down)": first, "B (brick back)": second, "heal pending": pending,
            "src names left": left, "dst names": moved}


def race_round(volume: GlusterVolume, files: int, kill: int, after: float) -> dict:
    """Files made (as an add: created, renamed into src/) through A while the brick is down;
    the brick started again; then A and B rename each to the same name at the same moment
    (bench/cluster_race.py's racers, with the Disk's rename)."""
    a = volume.mounts[0]
    run = uuid.uuid4().hex[:8]
    for folder in ("new", "src", "dst"):
        os.makedirs(f"{a}/{folder}", exist_ok=True)
    volume.kill_server(kill)
    for n in range(files):
        os.close(os.open(f"{a}/new/{run}-{n}", os.O_CREAT | os.O_WRONLY, 0o644))
        RENAME(f"{a}/new/{run}-{n}", f"{a}/src/{run}-{n}")
    volume.restart_servers()
    pending = heal_pending(volume)
    time.sleep(after)
    barrier, results = multiprocessing.Barrier(2), multiprocessing.Queue()
    procs = [multiprocessing.Process(target=racer, args=(m, "Disk.rename", run, files, barrier,
                                                         results)) for m in volume.mounts[:2]]
    for proc in procs:
        proc.start()
    outcomes: dict[int, list[str]] = {}
    for _ in range(2 * files):
        n, result = results.get(timeout=120)
        outcomes.setdefault(n, []).append(result)
    for proc in procs:
        proc.join()
    return {"races": Counter(" / ".join(sorted(pair)) for pair in outcomes.values()),
            "heal pending": pending}


def kill_mid_round(volume: GlusterVolume, files: int, kill: int, after: float) -> dict:
    """A renames files one after another while brick `kill` is killed in the middle (some
    renames are in flight then); the brick is started again; B renames every file to the same
    name. Each brick's folders are then read directly: where did each file end up?"""
    a, b, names = made_files(volume, files)
    first: dict[str, str] = {}
    renaming = threading.Thread(target=lambda: first.update(
        (n, outcome(lambda n=n: RENAME(f"{a}/src/{n}", f"{a}/dst/{n}"))) for n in names))
    renaming.start()
    time.sleep(0.05)
    volume.kill_server(kill)
    renaming.join()
    volume.restart_servers()
    time.sleep(after)
    second = {n: outcome(lambda n=n: RENAME(f"{b}/src/{n}", f"{b}/dst/{n}")) for n in names}
    both = [n for n in names if first[n] == second[n] == "ok"]
    where = Counter()
    for n in names:
        where[" ".join(f"{os.path.basename(brick)}:" + "".join(
            tag for tag, folder in (("s", "src"), ("d", "dst"))
            if os.path.exists(f"{brick}/{folder}/{n}")) for brick in volume.bricks)] += 1
    return {"A": Counter(first.values()), "B": Counter(second.values()),
            "claimed twice": len(both), "on the bricks (s: src, d: dst)": where}


def main() -> int:
    """Build the volume, run the rounds, print each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replica", type=int, default=2)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kill", type=int, default=1, help="index of the brick killed")
    parser.add_argument("--after", type=float, default=0.0, help="seconds between the brick "
                        "back and B's renames")
    parser.add_argument("--mode", choices=("claim-down", "add-down", "kill-mid"),
                        default="claim-down",
                        help="claim-down: A claims while the brick is down, B after; add-down: "
                        "the files are added while it is down, A and B race once it is back; "
                        "kill-mid: the brick is killed while A renames, B renames after")
    parser.add_argument("--option", action="append", default=[], help="KEY=VALUE volume option")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    if (why := GlusterVolume.missing()):
        print(f"cluster_stale_copy: {why}")
        return 2
    workdir = tempfile.mkdtemp(prefix="mq-stale-", dir=args.tmp)
    print(f"stale copy on GlusterFS replica {args.replica}, brick {args.kill} killed, "
          f"{args.files} files x {args.rounds} rounds, B {args.after:g} s after; {args.option}")
    print(f"  {machine_line(workdir)}; {code_under_test()}; load {loadavg()}")
    try:
        with GlusterVolume(workdir, mounts=2, replica=args.replica) as volume:
            for option in args.option:
                volume.cli("volume", "set", volume.name, *option.split("=", 1))
            for n in range(args.rounds):
                step = {"claim-down": one_round, "add-down": race_round,
                        "kill-mid": kill_mid_round}[args.mode]
                print(f"round {n + 1}: {step(volume, args.files, args.kill, args.after)}",
                      flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
