"""Load shed before work on a slow file system: one daemon on a JuiceFS volume (bench/fs_ops.py's
set-up), CONNECTIONS clients each sending batch adds of MESSAGES messages for a while, as fast
as answered; then the queue is compared with the answers: every 2xx's ids must be in it and
nothing else (a 503 stored nothing), and new/ must be empty (bench/RESULTS.md, "Load shed
before work").

    python bench/shed_load.py --connections 64 --messages 100 --seconds 30
"""

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster import Node, create_root  # noqa: E402
from cluster_fs import JuiceVolume  # noqa: E402
from harness import code_under_test, machine_line  # noqa: E402


def client(port: int, queue: str, messages: int, until: float, out: list) -> None:
    """Batch adds until `until`: (status, ids or [], Retry-After, seconds) per answer."""
    body = "".join(json.dumps({"body": "x" * 100}) + "\n" for _ in range(messages)).encode()
    while time.monotonic() < until:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("POST", f"/{queue}/messages", body,
                         {"Content-Type": "application/x-ndjson"})
            resp = conn.getresponse()
            data = resp.read()
            ids = ([m["id"] for m in json.loads(data)["messages"]] if resp.status in (200, 201)
                   else [])
            out.append((resp.status, ids, resp.headers.get("Retry-After"),
                        time.monotonic() - started))
        except OSError as err:
            out.append((str(err), [], None, time.monotonic() - started))
        finally:
            conn.close()


def main() -> int:
    """Build the volume, run the load, compare the queue with the answers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--actor-timeout", type=float, default=10)
    parser.add_argument("--log", help="copy the daemon's log here")
    args = parser.parse_args()
    if JuiceVolume.missing():
        print(f"cannot run: {JuiceVolume.missing()}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mq-shed-") as workdir:
        with JuiceVolume(workdir, mounts=1) as volume:
            mount = volume.mounts[0]
            print(f"# {machine_line(mount)}")
            print(f"# {code_under_test()}")
            print(f"# {args.connections} connections, batch adds of {args.messages} messages, "
                  f"{args.seconds:g} s, --workers {args.workers}, "
                  f"--actor-timeout {args.actor_timeout:g}")
            root = os.path.join(mount, "root")
            create_root(root)
            node = Node("mq", root, workdir, peers=0, timeout=30, workers=args.workers,
                        extra=(f"--actor-timeout={args.actor_timeout}",))
            node.start()
            try:
                node.wait_answering()
                answers: list = []
                until = time.monotonic() + args.seconds
                threads = [threading.Thread(target=client, args=(node.port, "q", args.messages,
                                                                 until, answers))
                           for _ in range(args.connections)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                time.sleep(args.actor_timeout + 5)  # Whatever an actor still held is done.
                folder = os.path.join(root, "queues", "q")
                stored = set(os.listdir(folder)) if os.path.isdir(folder) else set()
                left = os.listdir(os.path.join(root, "new"))
            finally:
                node.stop()
                if args.log:
                    shutil.copy(node.log_path, args.log)
    statuses = Counter(status for status, *_ in answers)
    acked = {i for _, ids, *_ in answers for i in ids}
    retry = Counter(after for status, _, after, _ in answers if status == 503)
    slowest = max((seconds for *_, seconds in answers), default=0.0)
    print(f"answers: {dict(statuses)}; Retry-After of the 503s: {dict(retry)}; "
          f"slowest answer {slowest:.1f} s")
    print(f"messages acknowledged {len(acked)}, in the queue {len(stored)}, "
          f"acknowledged but missing {len(acked - stored)}, stored for a 503 "
          f"{len(stored - acked)}, left in new/ {len(left)}")
    ok = not (acked - stored) and not (stored - acked) and not left
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
