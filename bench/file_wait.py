"""mq's adds against the file system's best multi-threaded rate, on JuiceFS and GlusterFS in
one run (bench/RESULTS.md, "Adds where the file system waits").

    python bench/file_wait.py --seconds 10 --connections 64

For each file system (built on this host by bench/cluster_fs.py, one mount): first a plain
Python process makes an add's file calls (create in new/, write, fsync, close, rename into
the queue's folder, fsync that folder) with 1, 2, 4 ... 64 threads, `--seconds` each, and
keeps its best files/s; then one daemon (`--workers 2`) on the same mount takes 100-byte adds
from `--connections` keep-alive clients for `--seconds` after a warm-up. Prints both and
their ratio. Run as root (the mounts).
"""

import argparse
import http.client
import os
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

THREADS = (1, 2, 4, 8, 16, 32, 64)


def plain_adds(folder: str, tag: str, until: float, counts: list) -> None:
    """Durable adds by rename, one after another until `until`; their number into counts."""
    queue = os.path.join(folder, "queue")
    qfd = os.open(queue, os.O_RDONLY | os.O_DIRECTORY)
    done = 0
    while time.monotonic() < until:
        path = os.path.join(folder, "new", f"{tag}-{done}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 150)
        os.fsync(fd)
        os.close(fd)
        os.rename(path, os.path.join(queue, f"{tag}-{done}"))
        os.fsync(qfd)
        done += 1
    os.close(qfd)
    counts.append(done)


def plain_rate(folder: str, threads: int, seconds: float) -> float:
    """Files per second of `threads` threads making plain adds for `seconds`."""
    for sub in ("new", "queue"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    return rate(plain_adds, [(folder, f"t{threads}x{n}") for n in range(threads)], seconds)


def rate(work, args: list[tuple], seconds: float) -> float:
    """Count per second of one thread per args running work(*args, until, counts) for
    `seconds`, each appending its count to counts."""
    counts: list = []
    until = time.monotonic() + seconds
    workers = [threading.Thread(target=work, args=(*each, until, counts)) for each in args]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.monotonic() - started)


def client(port: int, queue: str, until: float, counts: list) -> None:
    """100-byte adds on one keep-alive connection until `until`; the 201s into counts."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    done = 0
    while time.monotonic() < until:
        try:
            conn.request("POST", f"/{queue}/messages", body=b"x" * 100)
            resp = conn.getresponse()
            resp.read()
            done += resp.status == 201
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.close()
    counts.append(done)


def mq_rate(port: int, queue: str, connections: int, seconds: float) -> float:
    """201 adds per second of `connections` clients over `seconds`."""
    return rate(client, [(port, queue)] * connections, seconds)


def measure(kind: str, workdir: str, args) -> tuple[float, int, float]:
    """(the plain process's best files/s, its threads, mq adds/s) on one file system."""
    with VOLUMES[kind](workdir, mounts=1) as volume:
        mount = volume.mounts[0]
        rates = {}
        for threads in THREADS:
            rates[threads] = plain_rate(os.path.join(mount, f"plain-{threads}"), threads,
                                        args.seconds)
            print(f"  {kind}: plain, {threads} threads: {rates[threads]:.0f} files/s", flush=True)
        best = max(rates, key=rates.get)
        root = os.path.join(mount, "mq")
        create_root(root)
        node = Node(f"wait-{kind}", root, workdir, peers=0, timeout=60,
                    extra=("--actor-timeout=30",))
        try:
            node.start().wait_answering(120)
            mq_rate(node.port, "q", args.connections, min(5.0, args.seconds))  # warm-up
            adds = mq_rate(node.port, "q", args.connections, args.seconds)
        finally:
            node.stop()
            reap_zombies(set())
        print(f"  {kind}: mq, {args.connections} connections: {adds:.0f} adds/s", flush=True)
        return rates[best], best, adds


def main() -> int:
    """Build each file system in turn, measure both, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filesystems", default="juicefs,glusterfs")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    kinds = args.filesystems.split(",")
    for kind in kinds:
        if kind not in VOLUMES or (why := VOLUMES[kind].missing()):
            print(f"file_wait: cannot build {kind}: {why if kind in VOLUMES else 'unknown'}")
            return 2
    become_subreaper()
    print(f"# {machine_line(args.tmp)}; {code_under_test()}")
    print(f"# load before: {loadavg()}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    rows = []
    for kind in kinds:
        workdir = tempfile.mkdtemp(prefix=f"mq-file-wait-{kind}-", dir=args.tmp)
        rows.append((kind, *measure(kind, workdir, args), loadavg()))
    print("\n| file system | plain best, files/s (threads) | mq adds/s | mq / best | load after |")
    print("| --- | ---: | ---: | ---: | --- |")
    for kind, best, threads, adds, load in rows:
        print(f"| {kind} | {best:.0f} ({threads}) | {adds:.0f} | {adds / best:.2f} | {load} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
