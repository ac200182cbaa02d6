"""Several daemons on a distributed file system, one mount each, under producers and
consumers while a nemesis kills actors and daemons with kill -9; then everything is drained
and the total-queue check prints its table (bench/total_queue.py).

    python bench/cluster_run.py glusterfs --seconds 60
    python bench/cluster_run.py juicefs --seconds 60 --faults "kill actor,kill daemon"

Run as root (mounts). Exit status 0 when nothing was lost, unexpected, corrupted or handed to
two consumers within its timer, and no request was answered 500. tests/cluster/ runs the same
`run` for well under a minute.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster import Nemesis, Node, become_subreaper, create_root, reap_zombies, stop_all  # noqa: E402
from cluster_fs import VOLUMES  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402
from total_queue import History, passed, table  # noqa: E402
from workload import MOVER_RESCAN_SECONDS, Traffic, stop_and_check  # noqa: E402

#: The faults of a run: kill -9 of one process of a daemon, and of a whole daemon; "kill
#: server" (a GlusterFS brick, JuiceFS's Redis) is one more.
FAULTS = ("kill actor", "kill daemon")


class VolumeNemesis(Nemesis):
    """The Nemesis of bench/cluster.py, with the file system's servers among its targets."""

    def __init__(self, nodes, interval, rng, say, volume, faults):
        super().__init__(nodes, interval, rng, say)
        self.volume, self.FAULTS = volume, faults

    def kill_server(self) -> str:
        """kill -9 a server of the file system, start it again after 1 to 4 s."""
        killed = self.volume.kill_server(self.rng.randrange(2))
        seconds = self.rng.uniform(1.0, 4.0)
        self.stopping.wait(seconds)
        self.volume.restart_servers()
        return f"{killed}, down {seconds:.1f} s"


def run(volume, seconds: float, workdir: str, timeout: float = 3.0, fault_interval: float = 3.0,
        faults: tuple = FAULTS, queues: int = 3, producers: int = 2, consumers: int = 3,
        adds_per_second: float = 30.0, rng_state: int | None = None, say=print,
        every_fault: bool = False, root_name: str = "mq", min_adds: int = 0,
        peer_rescan: float = MOVER_RESCAN_SECONDS) -> dict:
    """Run one daemon per mount of `volume` (entered) on the root `root_name` of the volume
    under traffic and faults for `seconds` (with every_fault longer, by up to twice `seconds`
    or a minute, until each of `faults` was made once and `min_adds` adds were acknowledged:
    a restart on a busy machine can take most of a short run, and a slow file system's adds
    crawl), drain, return the counts (total_queue.check)
    with "faults", "client errors", "statuses" (how many answers of each HTTP status, 0 for no
    answer), "odd answers" (the first that no fault excuses: Traffic.odd_answers) and
    "drained". peer_rescan: the daemons' --peer-rescan, which the drain waits for."""
    rng = random.Random(rng_state)
    become_subreaper()
    root_of = [os.path.join(mount, root_name) for mount in volume.mounts]
    create_root(root_of[0])  # One volume: made through one mount, seen through every one.
    nodes = []
    for n, root in enumerate(root_of):
        rundir = os.path.join(workdir, f"run-{n}")  # ZeroMQ sockets on a local disk.
        os.makedirs(rundir, exist_ok=True)
        nodes.append(Node(f"daemon-{n}", root, workdir, peers=len(root_of) - 1, timeout=timeout,
                          extra=(f"--run-dir={rundir}", f"--peer-rescan={peer_rescan:g}")))
    history = History()
    traffic = None
    try:
        for node in nodes:  # At once, as hosts booting together: each waits on its mount.
            node.start()
        for node in nodes:
            node.wait_answering(120)
        traffic = Traffic([n.port for n in nodes], [f"cluster-{n}" for n in range(queues)],
                          history, rng, producers, consumers, adds_per_second).start()
        nemesis = VolumeNemesis(nodes, fault_interval, rng, say, volume, faults)
        nemesis.start()
        time.sleep(seconds)
        deadline = time.monotonic() + max(2 * seconds, 60)
        while every_fault and time.monotonic() < deadline and (
                set(nemesis.counts) < set(faults) or len(history.added) < min_adds):
            time.sleep(0.5)
        say("  faults stop; every daemon resumed or restarted")
        nemesis.stop()
        volume.restart_servers()
        counts = stop_and_check(traffic, history, timeout, say, peer_rescan)
        counts["faults"] = dict(nemesis.counts)
        counts["statuses"] = dict(traffic.statuses)
        counts["odd answers"] = list(traffic.odd_answers)
        counts["error lines"] = error_lines(nodes)
        return counts
    finally:
        if traffic:
            traffic.stopping.set()
        stop_all(nodes)
        reap_zombies(set())


def error_lines(nodes, limit: int = 10) -> list[str]:
    """The daemons' log lines of failures a client saw as 500 (storage kind, internal)."""
    found = []
    for node in nodes:
        try:
            with open(node.log_path) as f:
                found += [f"{node.name}: {line.strip()}" for line in f
                          if '"kind": "storage"' in line or '"kind":"storage"' in line
                          or '"actor.error"' in line or '"error"' in line and "Traceback" in line]
        except OSError:
            continue
    return found[:limit]


def server_errors(statuses: dict) -> int:
    """Answers that were 500 (or any 5xx but 503, the one a fault may cause)."""
    return sum(count for (_, status), count in statuses.items() if status >= 500 and status != 503)


def main() -> int:
    """Parse options, build the file system, run, print the table; exit 1 when it failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filesystem", choices=sorted(VOLUMES))
    parser.add_argument("--seconds", type=float, default=60.0, help="how long faults go on")
    parser.add_argument("--timeout", type=float, default=3.0,
                        help="the daemons' --timeout: seconds before an unacked message returns")
    parser.add_argument("--fault-interval", type=float, default=3.0)
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help="comma-separated faults of bench/cluster.py's Nemesis")
    parser.add_argument("--adds-per-second", type=float, default=30.0)
    parser.add_argument("--rng-state", type=int, default=None)
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs afterwards")
    args = parser.parse_args()
    volume_class = VOLUMES[args.filesystem]
    if (why := volume_class.missing()):
        print(f"cluster_run: {why}")
        return 2
    workdir = tempfile.mkdtemp(prefix="mq-cluster-", dir=args.tmp)
    rng_state = args.rng_state if args.rng_state is not None else random.randrange(1 << 32)
    print(f"mq on {args.filesystem}: 3 daemons, one mount each, {args.seconds:g} s of faults "
          f"({args.faults}), --timeout {args.timeout:g}, --rng-state {rng_state}")
    print(f"  {machine_line(workdir)}; {code_under_test()}")
    print(f"  load before: {loadavg()}; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    try:
        with volume_class(workdir) as volume:
            counts = run(volume, args.seconds, workdir, args.timeout, args.fault_interval,
                         tuple(args.faults.split(",")), adds_per_second=args.adds_per_second,
                         rng_state=rng_state, say=lambda line: print(
                             f"{time.strftime('%H:%M:%S', time.gmtime())} {line}", flush=True))
    finally:
        if args.keep:
            print(f"  logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    faults, errors = counts.pop("faults"), counts.pop("client errors")
    statuses, drained = counts.pop("statuses"), counts.pop("drained")
    for at, port, method, path, status, body in counts.pop("odd answers"):
        clock = time.strftime("%H:%M:%S", time.gmtime(at)) + f"{at % 1:.3f}"[1:]
        print(f"  odd answer at {clock}: {method} {path} on port {port}: {status} {body}")
    for line in counts.pop("error lines"):
        print(f"  {line}")
    print(f"\n  load after: {loadavg()}")
    print(f"  faults: {', '.join(f'{k} x{v}' for k, v in sorted(faults.items())) or 'none'}")
    print(f"  client errors while faults went on: {errors}")
    print(f"  answers: {dict(sorted(Counter(statuses).items()))}")
    print(f"  drained: {drained}\n")
    print(table(counts))
    ok = passed(counts) and drained and not server_errors(statuses)
    print(f"\n{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
