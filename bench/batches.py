"""Batch throughput: batch adds, batch fetch+ack and single fetch+delete against one daemon,
beside the file ceiling of the same disk (256 new files, a rename each, two syncfs).

    .venv/bin/python bench/batches.py [--clients 16] [--batch 100] [--seconds 8]

Prints one line per workload in messages per second. The machine's other load shifts every
number: run the workloads in turn, twice (--rounds 2), and read the ranges.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import AsyncClient, Daemon, code_under_test, loadavg, machine_line  # noqa: E402
from peers_servers import file_ceiling  # noqa: E402

QUEUE = "bench-batches"
NDJSON = {"Content-Type": "application/x-ndjson"}


async def run_clients(port: int, clients: int, seconds: float, work) -> float:
    """Messages per second that `clients` connections doing work(client) -> count reach."""
    deadline = time.monotonic() + seconds
    counts = []

    async def one():
        client = await AsyncClient(port).open()
        done = 0
        try:
            while time.monotonic() < deadline:
                done += await work(client)
        finally:
            client.close()
            counts.append(done)

    started = time.monotonic()
    await asyncio.gather(*[one() for _ in range(clients)])
    return sum(counts) / (time.monotonic() - started)


def batch_body(batch: int, size: int) -> bytes:
    """A JSON lines batch of `batch` messages of `size` bytes."""
    return b"".join(json.dumps({"body": "x" * size}).encode() + b"\n" for _ in range(batch))


async def measure(port: int, args) -> dict:
    """Each workload once, in turn."""
    body = batch_body(args.batch, args.size)
    path = f"/{QUEUE}/messages"

    async def batch_add(client):
        status, _, _ = await client.request("POST", path, body, NDJSON)
        return args.batch if status == 201 else 0

    async def batch_fetch_ack(client):
        status, _, data = await client.request("GET", f"{path}?max={min(args.batch, 100)}")
        if status != 200:
            return 0
        receipts = [r.decode() for r in re.findall(rb"X-Receipt: (\S+)", data)]
        status, _, _ = await client.request("POST", f"{path}/ack",
                                            json.dumps({"receipts": receipts}).encode())
        return len(receipts) if status == 200 else 0

    async def fetch_delete(client):
        status, headers, _ = await client.request("GET", path)
        if status != 200:
            return 0
        status, _, _ = await client.request("DELETE", f"{path}/{headers['x-message-id']}")
        return 1 if status == 204 else 0

    out = {"batch adds": await run_clients(port, args.clients, args.seconds, batch_add)}
    out["batch fetch+ack"] = await run_clients(port, args.clients, args.seconds / 2, batch_fetch_ack)
    await run_clients(port, args.clients, args.seconds / 2, batch_add)  # Refill, unmeasured.
    out["single fetch+delete"] = await run_clients(port, args.clients, args.seconds / 2, fetch_delete)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="connections (default 16)")
    parser.add_argument("--batch", type=int, default=100, help="messages per batch (default 100)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--seconds", type=float, default=8, help="seconds of adds per round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every workload")
    parser.add_argument("--workers", type=int, default=2, help="mq --workers (default 2)")
    parser.add_argument("--tmp", default=None, help="where the root goes (default $TMPDIR)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mq-bench-batches-", dir=args.tmp)
    print(f"{machine_line(base)}\nmq: {code_under_test()}; {args.clients} clients, batches of "
          f"{args.batch} x {args.size} B, load {loadavg()}", flush=True)
    daemon = Daemon(os.path.join(base, "root"), args.workers, extra=["--no-access-log"]).start()
    try:
        for r in range(args.rounds):
            ceiling = file_ceiling(os.path.join(base, f"ceiling-{r}"), 3)  # Left until the end.
            ceiling = ceiling["messages"] / ceiling["seconds"]
            print(f"round {r + 1}: file ceiling {ceiling:,.0f} files/s", flush=True)
            for name, rate in asyncio.run(measure(daemon.port, args)).items():
                print(f"  {name}: {rate:,.0f} messages/s", flush=True)
        print(f"load after: {loadavg()}")
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
