"""Aggregate adds and fetches per second with 1, 2 and 3 daemons on one distributed file
system, each daemon on its own mount (bench/cluster_fs.py builds it on this host).

    python bench/cluster_throughput.py glusterfs --seconds 15 --clients 8

For each number of daemons: `--clients` threads, each on a keep-alive connection to one
daemon (spread evenly), add 1 KiB messages for `--seconds`; then as many threads fetch and
acknowledge for `--seconds`. Counts only 201 adds and fetches whose ack answered 204.
"""

import argparse
import http.client
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster import Node, become_subreaper, create_root, reap_zombies  # noqa: E402
from cluster_fs import VOLUMES  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402

BODY = os.urandom(1024)


def hammer(port: int, seconds: float, queue: str, fetch: bool, counts: list, lock) -> None:
    """Add (or fetch and ack) on one connection until time is up; add the successes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    done, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if not fetch:
                conn.request("POST", f"/{queue}/messages", body=BODY)
                resp = conn.getresponse()
                resp.read()
                done += resp.status == 201
                continue
            conn.request("GET", f"/{queue}/messages")
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                continue
            conn.request("DELETE", f"/{queue}/messages/{resp.headers['X-Message-Id']}"
                                   f"?receipt={resp.headers['X-Receipt']}")
            ack = conn.getresponse()
            ack.read()
            done += ack.status == 204
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.close()
    with lock:
        counts.append(done)


def phase(ports: list[int], clients: int, seconds: float, queue: str, fetch: bool) -> float:
    """Successes per second of `clients` threads spread over the daemons' ports."""
    counts, lock = [], threading.Lock()
    threads = [threading.Thread(target=hammer, args=(ports[n % len(ports)], seconds, queue,
                                                     fetch, counts, lock))
               for n in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - started)


def main() -> int:
    """Build the file system, measure 1, 2 and 3 daemons, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filesystem", choices=sorted(VOLUMES))
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--daemons", default="1,2,3")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    volume_class = VOLUMES[args.filesystem]
    if (why := volume_class.missing()):
        print(f"cluster_throughput: {why}")
        return 2
    become_subreaper()
    workdir = tempfile.mkdtemp(prefix="mq-cluster-tp-", dir=args.tmp)
    print(f"mq throughput on {args.filesystem}: {args.clients} clients, {args.seconds:g} s a phase")
    print(f"  {machine_line(workdir)}; {code_under_test()}")
    print(f"  load before: {loadavg()}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    rows = []
    try:
        with volume_class(workdir) as volume:
            for count in (int(n) for n in args.daemons.split(",")):
                nodes = []
                create_root(os.path.join(volume.mounts[0], "mq"))
                for n in range(count):
                    rundir = os.path.join(workdir, f"run-{count}-{n}")
                    os.makedirs(rundir)
                    nodes.append(Node(f"tp{count}-{n}", os.path.join(volume.mounts[n], "mq"),
                                      workdir, peers=count - 1, timeout=30.0,
                                      extra=(f"--run-dir={rundir}",)))
                try:
                    for node in nodes:
                        node.start().wait_answering(120)
                    ports, queue = [node.port for node in nodes], f"tp{count}"
                    adds = phase(ports, args.clients, args.seconds, queue, fetch=False)
                    fetches = phase(ports, args.clients, args.seconds, queue, fetch=True)
                    rows.append((count, adds, fetches, loadavg()))
                finally:
                    for node in nodes:
                        node.stop()
                    reap_zombies(set())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n| daemons | adds/s | fetches and acks/s | load after |\n|---:|---:|---:|---|")
    for count, adds, fetches, load in rows:
        print(f"| {count} | {adds:.0f} | {fetches:.0f} | {load} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
