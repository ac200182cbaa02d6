"""File operations per message, counted by the file system itself: a JuiceFS volume (metadata
in a local redis-server, data in a local folder) whose `.stats` file counts every FUSE
operation by kind (juicefs_fuse_ops_total_*), read before and after N adds and N fetch+acks
through one mq daemon, one request at a time, and the same for a plain Python process making
the fewest file calls each step needs (bench/RESULTS.md, "File operations per message").

    python bench/fs_ops.py --messages 200

Run as root (the mount). The daemon's background work (the supervisor's health file, the
actors' look at notices/, the reaper) is counted too: an idle stretch of as many seconds as
the slower phase is counted first and printed as well, for what is not the messages'.
"""

import argparse
import http.client
import os
import shlex
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster import Node, create_root  # noqa: E402
from cluster_fs import JuiceVolume  # noqa: E402
from harness import code_under_test, machine_line  # noqa: E402

PREFIX = "juicefs_fuse_ops_total_"


def fuse_ops(mount: str) -> Counter:
    """The volume's FUSE operations so far, by kind, as its client counts them."""
    with open(os.path.join(mount, ".stats")) as f:
        return Counter({line.split()[0][len(PREFIX):]: int(float(line.split()[1]))
                        for line in f if line.startswith(PREFIX)})


def counted(mount: str, work) -> tuple[Counter, float]:
    """The FUSE operations `work()` made (and the .stats reads around it), and its seconds."""
    before, started = fuse_ops(mount), time.monotonic()
    work()
    seconds = time.monotonic() - started
    after = fuse_ops(mount)
    after.subtract(before)
    return +after, seconds


def request(port: int, method: str, path: str, body: bytes | None = None):
    """One HTTP request on a new connection: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def mq_adds(port: int, queue: str, n: int) -> None:
    """n single adds, one after another."""
    for _ in range(n):
        status, _, body = request(port, "POST", f"/{queue}/messages", b"x" * 100)
        assert status == 201, (status, body)


def mq_fetch_acks(port: int, queue: str, n: int) -> None:
    """n fetches, each acknowledged before the next."""
    for _ in range(n):
        status, headers, body = request(port, "GET", f"/{queue}/messages")
        assert status == 200, (status, body)
        status, _, body = request(port, "DELETE", f"/{queue}/messages/{headers['X-Message-Id']}"
                                                  f"?receipt={headers['X-Receipt']}")
        assert status == 204, (status, body)


def plain_adds(folder: str, n: int) -> None:
    """The fewest calls of a durable add by rename: create in new/, write, fsync, close,
    rename into the queue's folder, fsync that folder."""
    queue = os.path.join(folder, "queue")
    qfd = os.open(queue, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(n):
        path = os.path.join(folder, "new", f"m{i}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 150)
        os.fsync(fd)
        os.close(fd)
        os.rename(path, os.path.join(queue, f"m{i}"))
        os.fsync(qfd)
    os.close(qfd)


def plain_fetch_acks(folder: str, n: int) -> None:
    """The fewest calls of a fetch and its ack by rename: open and read the message, rename
    it into delay/, set its due time, fsync it and the folder; then rename it out and unlink
    (the reaper's part)."""
    delay = os.open(os.path.join(folder, "delay"), os.O_RDONLY | os.O_DIRECTORY)
    for i in range(n):
        path = os.path.join(folder, "queue", f"m{i}")
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, 4096)
        held = os.path.join(folder, "delay", f"m{i}")
        os.rename(path, held)
        os.utime(fd, (time.time() + 30, time.time() + 30))
        os.fsync(fd)
        os.close(fd)
        os.fsync(delay)
        gone = os.path.join(folder, "remove", f"m{i}")
        os.rename(held, gone)
        os.fsync(delay)
        os.unlink(gone)
    os.close(delay)


def per(ops: Counter, n: int) -> str:
    """Operations per message, in all and by kind."""
    kinds = ", ".join(f"{kind} {count / n:.2f}" for kind, count in ops.most_common())
    return f"{sum(ops.values()) / n:.2f} ({kinds})"


def main() -> int:
    """Build the volume, count each phase, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mount-args", default="",
                        help="more `juicefs mount` options, as one string (its metadata caches: "
                             "'--attr-cache=10 --non-default-permission')")
    args = parser.parse_args()
    if JuiceVolume.missing():
        print(f"cannot run: {JuiceVolume.missing()}", file=sys.stderr)
        return 2
    n = args.messages
    with tempfile.TemporaryDirectory(prefix="mq-fs-ops-") as workdir:
        with JuiceVolume(workdir, mounts=1, mount_args=tuple(shlex.split(args.mount_args))) as volume:
            mount = volume.mounts[0]
            print(f"# {machine_line(mount)}")
            print(f"# {code_under_test()}")
            print(f"# JuiceFS {os.path.basename(JuiceVolume.juicefs() or '')}, redis metadata, "
                  f"file bucket, mount options {args.mount_args or '(defaults)'}; "
                  f"{n} messages of 100 bytes, one request at a time")
            plain = os.path.join(mount, "plain")
            for sub in ("", "new", "queue", "delay", "remove"):
                os.makedirs(os.path.join(plain, sub), exist_ok=True)
            rows = [("plain add", *counted(mount, lambda: plain_adds(plain, n))),
                    ("plain fetch+ack", *counted(mount, lambda: plain_fetch_acks(plain, n)))]
            root = os.path.join(mount, "root")
            create_root(root)
            node = Node("mq", root, workdir, peers=0, timeout=30, workers=args.workers,
                        extra=("--actor-timeout=30",))
            node.start()
            try:
                node.wait_answering()
                mq_adds(node.port, "q", 2)  # The queue exists; the actors are warm.
                mq_fetch_acks(node.port, "q", 2)
                time.sleep(3)  # The reaper's first pass over the warm-up.
                adds = counted(mount, lambda: mq_adds(node.port, "q", n))
                acks = counted(mount, lambda: mq_fetch_acks(node.port, "q", n))
                time.sleep(3)  # The reaper takes the acknowledged files (not counted above).
                idle = counted(mount, lambda: time.sleep(max(adds[1], acks[1])))
            finally:
                node.stop()
            rows += [("mq add", *adds), ("mq fetch+ack", *acks)]
    print(f"idle daemon: {sum(idle[0].values()) / idle[1]:.1f} FUSE ops/s "
          f"({', '.join(f'{k} {v / idle[1]:.1f}' for k, v in idle[0].most_common())})")
    print("| step | FUSE ops per message (by kind) | idle share | seconds |")
    print("| --- | --- | ---: | ---: |")
    rate = sum(idle[0].values()) / idle[1]
    for name, ops, seconds in rows:
        background = rate * seconds / n if name.startswith("mq") else 0.0
        print(f"| {name} | {per(ops, n)} | {background:.2f} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
