"""Fault injection on a cluster: daemons sharing one root under producers and consumers, while
a nemesis kills actors and daemons with kill -9, pauses processes with SIGSTOP and restarts
them; then everything is drained and the total-queue check prints its table.

    python bench/chaos.py --minutes 30

Exit status 0 when nothing was lost, unexpected, corrupted or duplicated without a cause, and
no request was answered 500.
tests/chaos/ runs the same `run` for well under a minute.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster import Nemesis, Node, become_subreaper, create_root, reap_zombies, stop_all  # noqa: E402
from cluster_run import server_errors  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402
from total_queue import History, passed, table  # noqa: E402
from workload import MOVER_RESCAN_SECONDS, Traffic, stop_and_check  # noqa: E402


def run(seconds: float, workdir: str, daemons: int = 3, timeout: float = 3.0,
        fault_interval: float = 2.0, queues: int = 3, producers: int = 2, consumers: int = 3,
        adds_per_second: float = 50.0, rng_state: int | None = None, say=print,
        peer_rescan: float = MOVER_RESCAN_SECONDS, every_fault: bool = False,
        min_faults: int = 0, min_adds: int = 0) -> dict:
    """Run the cluster under traffic and faults for `seconds` (with every_fault longer, by up
    to twice `seconds` or a minute, until each kind of fault was made once, `min_faults` in
    all, and `min_adds` adds were acknowledged), drain it, return the counts
    (total_queue.check) with the nemesis' counts under "faults" and how many answers of each
    HTTP status under "statuses" (Traffic.statuses: 0 for no answer, -1 refused).
    peer_rescan: the daemons' --peer-rescan, which the drain waits for."""
    rng = random.Random(rng_state)
    become_subreaper()
    root = os.path.join(workdir, "root")
    create_root(root)
    nodes = [Node(f"daemon-{n}", root, workdir, peers=daemons - 1, timeout=timeout,
                  extra=(f"--peer-rescan={peer_rescan:g}",)) for n in range(daemons)]
    history = History()
    traffic = None
    try:
        for node in nodes:  # At once, as hosts booting together.
            node.start()
        for node in nodes:
            node.wait_answering()
        traffic = Traffic([n.port for n in nodes], [f"chaos-{n}" for n in range(queues)],
                          history, rng, producers, consumers, adds_per_second).start()
        nemesis = Nemesis(nodes, fault_interval, rng, say)
        nemesis.start()
        time.sleep(seconds)
        deadline = time.monotonic() + max(2 * seconds, 60)
        while every_fault and time.monotonic() < deadline and (
                set(nemesis.counts) < set(nemesis.FAULTS)
                or sum(nemesis.counts.values()) < min_faults or len(history.added) < min_adds):
            time.sleep(0.5)
        say("  faults stop; every daemon resumed or restarted")
        nemesis.stop()
        counts = stop_and_check(traffic, history, timeout, say, peer_rescan)
        counts["faults"] = dict(nemesis.counts)
        counts["statuses"] = dict(traffic.statuses)
        return counts
    finally:
        if traffic:
            traffic.stopping.set()
        stop_all(nodes)
        reap_zombies(set())


def main() -> int:
    """Parse options, run, print the table; exit 1 when the check failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long faults go on")
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3.0,
                        help="the daemons' --timeout: seconds before an unacked message returns")
    parser.add_argument("--fault-interval", type=float, default=2.0,
                        help="mean seconds between two faults")
    parser.add_argument("--adds-per-second", type=float, default=50.0)
    parser.add_argument("--rng-state", type=int, default=None,
                        help="initial state of the random generator, to repeat a run's choices")
    parser.add_argument("--tmp", default=tempfile.gettempdir(),
                        help="folder for the shared root (its file system is the one tested)")
    parser.add_argument("--keep", action="store_true", help="keep the root and logs afterwards")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="mq-chaos-", dir=args.tmp)
    rng_state = args.rng_state if args.rng_state is not None else random.randrange(1 << 32)
    print(f"mq chaos: {args.daemons} daemons on one root, {args.minutes:g} min of faults, "
          f"--timeout {args.timeout:g}, --rng-state {rng_state}")
    print(f"  {machine_line(workdir)}; {code_under_test()}")
    print(f"  load before: {loadavg()}; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    started = time.monotonic()
    try:
        counts = run(args.minutes * 60, workdir, args.daemons, args.timeout, args.fault_interval,
                     adds_per_second=args.adds_per_second, rng_state=rng_state,
                     say=lambda line: print(line, flush=True))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    faults, errors = counts.pop("faults"), counts.pop("client errors")
    drained, statuses = counts.pop("drained"), counts.pop("statuses")
    print(f"\n  {time.monotonic() - started:.0f} s in all; load after: {loadavg()}")
    print(f"  faults: {', '.join(f'{k} x{v}' for k, v in sorted(faults.items())) or 'none'}")
    print(f"  client errors while faults went on: {errors}")
    print(f"  answers: {dict(sorted(statuses.items()))}")
    print(f"  drained: {drained}\n")
    print(table(counts))
    ok = passed(counts) and drained and not server_errors(statuses)
    print(f"\n{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
