#!/usr/bin/env python3
"""CPU per operation of one save actor and one fetch actor, in this process, over real sockets.

    .venv/bin/python bench/actor_cpu.py [--ops 6000] [--batch 32] [--runs 3]
        [--profile save|fetch|ack|delete] [--tmp DIR] [--plain]

bench/cores.py measures the whole tree under a load of HTTP clients, so its figures move with
the load of a shared machine and with the batch sizes that load happens to make. This one
drives the actors' own loop (`Actor.serve`: receive, decode, apply, flush, notify, reply) on
a real root with a real ROUTER socket, fed by a DEALER in this process with batches of
exactly --batch requests, as a front sends them; the actors' notifications go to sockets
bound here and drained between batches. Only `serve` is timed, by the CPU time of the thread
that runs it (getrusage RUSAGE_THREAD: the kernel's work in the actor's own system calls is
counted, the client's and ZeroMQ's I/O thread's are not), given as user + system; each
figure is the median over --runs. Creating a file on ext4 without a journal costs system
time that grows with the inodes freed near it lately (bench/RESULTS.md, "Why batch adds were
slow"), so the system part of an add moves from run to run; the user part does not.

Ops: "add" (single adds to one queue), then on that queue "fetch" (each keeping its
receipt), "ack" of half of them (a DELETE with the receipt) and "delete" of the rest
(without one: the single fetch+delete path's DELETE), then "fetch+delete" pairs (a fetch
then a delete of the same message, as bench/cores.py's clients make them). --profile prints
cProfile's hottest functions of one op's serving (by the thread's CPU clock).

--plain measures each actor against the file calls it makes: after each batch of adds,
fetches and acks, this thread makes the same system calls by plain Python on the same disk
(bench/plain_files.py), and after the deletes the reaper's two passes over remove/ (a
listing, then 2 s later the spare files kept) run against two plain passes; it prints each
actor's CPU per message over its plain calls' (bench/RESULTS.md, "CPU per message against
plain file calls").

CPU time moves with the load of a shared machine; instructions do not. Under
`valgrind --tool=callgrind`, two runs that differ only in --ops give the instructions per
operation by difference (the whole process, this client's side too):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python \
        bench/actor_cpu.py --runs 1 --ops 320 [--adds-only] --tmp /dev/shm
"""

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time

import zmq
from harness import thread_cpu
from plain_files import PlainFiles

from mq import logs, protocol
from mq import operations as ops
from mq.actors.fetch import FetchActor
from mq.actors.save import SaveActor
from mq.config import Options
from mq.store import Store
from mq.store.root import mover_endpoint
from mq.store.spares import GRACE_SECONDS

BODY = b"x" * 100
QUEUE = "hot"
SPARE_FILES = 65_536  # --spare-files' default


class Rig:
    """A root, one save actor and one fetch actor bound in this process, and a client."""

    def __init__(self, base: str):
        self.base = base
        self.root = os.path.join(base, "root")
        self.run_dir = os.path.join(base, "run")
        os.makedirs(self.run_dir)
        # As a daemon's actor logs: info and up, JSON lines into a file.
        logs.configure("bench", "info", os.path.join(base, "log"))
        Store(self.root, "fs").init()
        self.options = Options(root=self.root, workers=1, sync="fs")
        self.context = zmq.Context()
        # The mover's socket: the actors' "delayed" and "settled" notes land here.
        self.mover = self.context.socket(zmq.ROUTER)
        self.mover.bind(mover_endpoint(self.run_dir))
        self.save = self.actor(SaveActor)
        self.fetch = self.actor(FetchActor)
        self.save.connect_mover()
        self.save.connect_fetchers()
        self.fetch.connect_mover()
        self.drain()
        self.client = {}
        for actor in (self.save, self.fetch):
            sock = self.context.socket(zmq.DEALER)
            sock.connect(actor.endpoint())
            self.client[actor.kind] = sock
        self.sent = 0

    def actor(self, cls):
        actor = cls(self.options, 0, self.run_dir)
        actor.context = self.context
        actor.sock = actor.bind()
        return actor

    def drain(self) -> float:
        """Take in the notifications, the fetch actor's "ready" ones through its loop; return
        the CPU seconds the fetch actor spent on them."""
        while True:
            try:
                self.mover.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
        poller = zmq.Poller()
        poller.register(self.fetch.sock, zmq.POLLIN)
        used = 0j
        while poller.poll(5):
            started = thread_cpu()
            self.fetch.serve()
            used += thread_cpu() - started
        return used

    def batch(self, kind: str, requests: list, profile=None) -> tuple[float, list, float]:
        """Send the requests, let the actor serve them as one batch; return its CPU seconds,
        the replies, and the fetch actor's CPU seconds on the notifications it sent."""
        actor, sock = (self.save, self.client["save"]) if kind == "save" else \
            (self.fetch, self.client["fetch"])
        if hasattr(protocol, "encode_requests"):  # As a front sends one loop turn's requests.
            pairs = []
            for request in requests:
                self.sent += 1
                pairs.append((protocol.request_id(self.sent), request))
            sock.send_multipart(protocol.encode_requests(pairs))
        else:
            for request in requests:
                self.sent += 1
                sock.send_multipart(protocol.encode_request(protocol.request_id(self.sent), request))
        # ZeroMQ does not count what waits in a socket: the first request there, then a moment
        # for the rest over ipc://, so that the actor takes them as one batch.
        while actor.sock.getsockopt(zmq.EVENTS) & zmq.POLLIN == 0:
            time.sleep(0.0005)
        time.sleep(0.002)
        used, replies = 0j, []
        while len(replies) < len(requests):
            if actor.sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:  # (the rest of a late batch)
                if profile is not None:
                    profile.enable()
                started = thread_cpu()
                actor.serve()
                used += thread_cpu() - started
                if profile is not None:
                    profile.disable()
            while sock.poll(1 if len(replies) < len(requests) else 0):
                replies.extend(result for _, result in _decode(sock.recv_multipart()))
        return used, replies, self.drain()

    def close(self) -> None:
        self.context.destroy(linger=0)


def _decode(frames: list) -> list:
    """The replies in a message: several since replies are sent per batch, one before."""
    if hasattr(protocol, "decode_replies"):
        return protocol.decode_replies(frames)
    return [protocol.decode_reply(frames)]


def run_ops(rig: Rig, args, profiles: dict) -> dict:
    """Each op over --ops messages in batches of --batch: CPU microseconds per operation."""
    out = {}

    def timed(name: str, kind: str, make, items, plain=None):
        total, noted, replies, floor = 0j, 0j, [], 0j
        prof = profiles.get(name)
        for start in range(0, len(items), args.batch):
            chunk = items[start:start + args.batch]
            used, got, ready = rig.batch(kind, [make(x) for x in chunk], prof)
            total += used
            noted += ready
            replies.extend(got)
            if plain is not None:  # The same file calls, right after, on the same disk.
                started = thread_cpu()
                plain(chunk)
                floor += thread_cpu() - started
        if plain is not None:
            out[f"plain {name}"] = floor / len(items) * 1e6
        bad = [r for r in replies if not isinstance(r, dict) or r.get("empty")]
        if bad:
            raise SystemExit(f"{name}: {len(bad)} failed, e.g. {bad[0]!r}")
        out[name] = total / len(items) * 1e6
        if kind == "save":
            out["ready"] = noted / len(items) * 1e6
        return replies

    n = rig.ops = args.ops
    plain = PlainFiles(rig.base) if args.plain else None
    stored: list[str] = []
    timed("add", "save", lambda _: ops.Add(queue=QUEUE, body=BODY, content_type="text/plain"),
          list(range(n)), plain and (lambda chunk: stored.extend(plain.add(len(chunk)))))
    if args.adds_only:
        return out
    fetched = timed("fetch", "fetch", lambda _: ops.Fetch(queue=QUEUE), list(range(n)),
                    plain and (lambda chunk: plain.fetch([stored[i] for i in chunk])))
    taken = [(r["id"], r["receipt"]) for r in fetched]
    half = n // 2
    timed("ack", "fetch", lambda t: ops.Ack(queue=QUEUE, id=t[0], receipt=t[1]), taken[:half],
          plain and (lambda chunk: plain.ack(stored[:len(chunk)]) or stored.__delitem__(
              slice(0, len(chunk)))))
    timed("delete", "fetch", lambda t: ops.Delete(queue=QUEUE, id=t[0]), taken[half:])
    if plain is not None:
        reaped = reap(rig, plain, n - half)
        out.update(reaped)
    # fetch+delete pairs: a batch of fetches, then a batch of the deletes of what it took.
    for start in range(0, n, args.batch):
        rig.batch("save", [ops.Add(queue=QUEUE, body=BODY, content_type="text/plain")
                           for _ in range(min(args.batch, n - start))])
    total = 0j
    prof = profiles.get("fetch+delete")
    for start in range(0, n, args.batch):
        size = min(args.batch, n - start)
        used, got, _ = rig.batch("fetch", [ops.Fetch(queue=QUEUE) for _ in range(size)], prof)
        total += used
        used, _, _ = rig.batch("fetch", [ops.Delete(queue=QUEUE, id=r["id"]) for r in got], prof)
        total += used
    out["fetch+delete"] = total / n * 1e6
    return out


def reap(rig: "Rig", plain: PlainFiles, acked: int) -> dict:
    """The reaper's two passes over remove/ (a listing, then GRACE_SECONDS later the spares
    kept), timed against the plain passes over the acked files; CPU us per removed message."""
    store = Store(rig.root, "fs")
    used = floor = 0j
    for step in ("list", "keep"):
        if step == "keep":
            time.sleep(GRACE_SECONDS + 0.1)
        started = thread_cpu()
        recycled, _ = store.spares.recycle_removed(SPARE_FILES)
        used += thread_cpu() - started
        started = thread_cpu()
        plain.reap_listing() if step == "list" else plain.reap()
        floor += thread_cpu() - started
    if recycled != rig.ops:  # Every ack and delete of the run, kept as a spare.
        raise SystemExit(f"reaper: {recycled} recycled of {rig.ops}")
    # The ack's share: the plain side reaped only the acked half.
    return {"reaper": used / rig.ops * 1e6, "plain reaper": floor / acked * 1e6}


def _figure(name: str, values: list) -> str:
    """'add 73.4 (41.0 + 32.4)': the medians of user+system, user and system CPU."""
    total = statistics.median(v.real + v.imag for v in values)
    user = statistics.median(v.real for v in values)
    system = statistics.median(v.imag for v in values)
    return f"{name} {total:.1f} ({user:.1f} + {system:.1f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=6000, help="operations per op and run (default 6000)")
    parser.add_argument("--batch", type=int, default=32, help="requests per batch (default 32)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each on a fresh root (default 3)")
    parser.add_argument("--profile", choices=("add", "fetch", "ack", "delete", "fetch+delete"),
                        help="print cProfile's hottest functions of this op (last run)")
    parser.add_argument("--adds-only", action="store_true",
                        help="only the adds (under valgrind: instructions per add by difference)")
    parser.add_argument("--tmp", default=None, help="folder for the roots (on the disk to measure)")
    parser.add_argument("--plain", action="store_true",
                        help="after each batch, the same file calls by plain Python (plain_files.py)"
                             ", and the reaper's passes; print each actor's ratio to them")
    args = parser.parse_args(argv)
    runs = []
    for number in range(args.runs):
        base = tempfile.mkdtemp(prefix="mq-actor-cpu-", dir=args.tmp)
        # CPU time, not wall time: on a loaded machine a profile by wall time shows the waits.
        last = args.profile and number == args.runs - 1
        profiles = {args.profile: cProfile.Profile(time.thread_time)} if last else {}
        rig = Rig(base)
        try:
            runs.append(run_ops(rig, args, profiles))
        finally:
            rig.close()
            shutil.rmtree(base, ignore_errors=True)
        print(f"run {number + 1}: " + ", ".join(_figure(k, [v]) for k, v in runs[-1].items()),
              flush=True)
        for prof in profiles.values():
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    print(f"CPU us per operation (user, system), medians of {args.runs} runs, batches of "
          f"{args.batch}: " + ", ".join(_figure(k, [r[k] for r in runs]) for k in runs[0]))
    if args.plain:
        def ratio(mine: list, floor: list) -> str:
            values = [sum(r[k].real + r[k].imag for k in mine) /
                      sum(r[k].real + r[k].imag for k in floor) for r in runs]
            return f"{statistics.median(values):.2f} ({' / '.join(f'{v:.2f}' for v in values)})"
        print("actor / plain file calls, median (runs): "
              f"save actor per add {ratio(['add'], ['plain add'])}, "
              f"fetch actor per fetch+ack {ratio(['fetch', 'ack'], ['plain fetch', 'plain ack'])}"
              f" (fetch {ratio(['fetch'], ['plain fetch'])}, ack {ratio(['ack'], ['plain ack'])})"
              f", reaper per message {ratio(['reaper'], ['plain reaper'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
