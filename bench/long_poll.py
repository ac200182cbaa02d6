"""A thousand parked long polls: what they cost, and how fast an add reaches one.

    .venv/bin/python bench/long_poll.py                      # 1000 polls on 1 queue
    .venv/bin/python bench/long_poll.py --queues 10          # 100 polls on each of 10 queues

1. Starts a real daemon (`mq --workers W`), creates the queues, then opens --polls keep-alive
   connections (raw asyncio streams, one client process) that each send
   `GET /{q}/messages?wait=20` and send it again as soon as it is answered (200 or 204).
2. While they all wait, samples for --sample seconds the CPU time of every process of the
   daemon (psutil, user+system) and counts the front's threads, connections and descriptors:
   a thread per poll or a busy loop would show here.
3. Adds --adds messages one at a time (POST on its own connection, round-robin over the
   queues, --gap seconds apart) and times each from the add's send and from its reply to the
   moment a waiting poll hands that very message (matched by X-Message-Id) to its client.
   The front sends the fetch actor its 'ready' notification just before it writes the add's
   reply, so "from reply" can be slightly negative.
Target: median from the add to the waiting fetch's answer < 20 ms.
"""

import argparse
import asyncio
import os
import shutil
import tempfile
import time

import psutil
from harness import AsyncClient as Http
from harness import Daemon, cpu_snapshot, machine_line, percentile, summary


def loadavg():
    """The load averages, two decimals each."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(args, daemon, queues):
    answers: dict[str, float] = {}          # message id -> when a poll handed it over
    waiters: dict[str, asyncio.Future] = {}  # message id -> future the adder awaits
    counts = {"sent": 0, "200": 0, "204": 0, "other": 0}
    stop = asyncio.Event()

    async def poller(queue):
        conn = await Http(daemon.port).open()
        try:
            while not stop.is_set():
                counts["sent"] += 1
                status, hdrs, _ = await conn.request("GET", f"/{queue}/messages?wait={args.wait:g}")
                now = time.time()
                if status == 200:
                    counts["200"] += 1
                    message_id = hdrs["x-message-id"]
                    answers[message_id] = now
                    fut = waiters.get(message_id)
                    if fut is not None and not fut.done():
                        fut.set_result(now)
                elif status == 204:
                    counts["204"] += 1
                else:
                    counts["other"] += 1
        finally:
            conn.close()

    tasks = []
    t0 = time.time()
    for i in range(args.polls):
        tasks.append(asyncio.ensure_future(poller(queues[i % len(queues)])))
        if i % 100 == 99:
            await asyncio.sleep(0.05)  # ramp: stay under the listen backlog
    while counts["sent"] < args.polls and time.time() - t0 < 30:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    procs = daemon.processes()
    front = procs["front"]
    established = sum(1 for c in front.net_connections(kind="tcp")
                      if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == daemon.port)
    print(f"{counts['sent']} polls sent in {time.time() - t0:.1f} s on {len(queues)} queue(s); "
          f"front holds {established} client connections, {front.num_fds()} descriptors")
    print("threads per process: " + "  ".join(
        f"{k} {p.num_threads()}" for k, p in sorted(procs.items())))

    # -- idle: every poll parked --------------------------------------------------------------
    me = psutil.Process()
    c0, m0, w0 = cpu_snapshot(procs), sum(me.cpu_times()[:2]), time.time()
    await asyncio.sleep(args.sample)
    c1, m1, w1 = cpu_snapshot(procs), sum(me.cpu_times()[:2]), time.time()
    span = w1 - w0
    total = sum(c1[k] - c0[k] for k in c0)
    print(f"\nCPU while {args.polls} polls wait ({span:.1f} s, % of one core):")
    print("  " + "  ".join(f"{k} {100 * (c1[k] - c0[k]) / span:.1f}" for k in sorted(c0)))
    print(f"  daemon total {100 * total / span:.1f} %, client {100 * (m1 - m0) / span:.1f} %; "
          f"answers during the wait: {counts['200']} x 200, {counts['204']} x 204")
    idle_pct = 100 * total / span

    # -- adds, one at a time ------------------------------------------------------------------
    adder = await Http(daemon.port).open()
    from_send, from_reply, lost = [], [], 0
    c2, w2 = cpu_snapshot(procs), time.time()
    for i in range(args.adds):
        queue = queues[i % len(queues)]
        sent = time.time()
        status, hdrs, _ = await adder.request("POST", f"/{queue}/messages", b"x" * args.size)
        replied = time.time()
        if status != 201:
            lost += 1
            continue
        message_id = hdrs["x-message-id"]
        if message_id not in answers:
            fut = waiters[message_id] = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(fut, 5.0)
            except TimeoutError:
                lost += 1
                continue
        answered = answers[message_id]
        from_send.append(answered - sent)
        from_reply.append(answered - replied)
        await asyncio.sleep(args.gap)
    c3, w3 = cpu_snapshot(procs), time.time()
    adder.close()
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    print(f"\n{args.adds} adds one at a time, {args.gap * 1000:g} ms apart, "
          f"{args.size}-byte bodies ({lost} not answered within 5 s):")
    print(summary("add sent -> poll answered", from_send))
    print(summary("add replied -> poll answered", from_reply))
    print(f"  CPU during the adds ({w3 - w2:.1f} s, % of one core): " + "  ".join(
        f"{k} {100 * (c3[k] - c2[k]) / (w3 - w2):.1f}" for k in sorted(c2)))
    med = percentile(from_send, 50)
    print(f"\nRESULT median add -> waiting fetch {med * 1000:.1f} ms (from send), "
          f"{percentile(from_reply, 50) * 1000:.1f} ms (from reply): target < 20 ms "
          f"{'MET' if med < 0.020 and not lost else 'MISSED'}; idle daemon CPU with "
          f"{args.polls} polls {idle_pct:.1f} % of a core; front threads "
          f"{front.num_threads()}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--polls", type=int, default=1000)
    p.add_argument("--queues", type=int, default=1)
    p.add_argument("--adds", type=int, default=400)
    p.add_argument("--gap", type=float, default=0.01, help="seconds between adds")
    p.add_argument("--size", type=int, default=64, help="body bytes")
    p.add_argument("--wait", type=float, default=20.0)
    p.add_argument("--sample", type=float, default=5.0, help="seconds of CPU sampling")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()

    print(f"# long_poll: {args.polls} polls (?wait={args.wait:g}) on {args.queues} queue(s), "
          f"--workers {args.workers}")
    print(f"machine: {machine_line()}; load before: {loadavg()}")
    tmp = tempfile.mkdtemp(prefix="mq-longpoll-")
    log_path = os.path.join(tmp, "mq.log")
    daemon = Daemon(os.path.join(tmp, "root"), args.workers, log_path=log_path,
                    extra=["--no-access-log", "--log-level", "warning"])
    queues = [f"lp{i}" for i in range(args.queues)]
    try:
        daemon.start()
        print(f"daemon: {daemon.command}")
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port)
        for q in queues:
            conn.request("PUT", f"/{q}")
            conn.getresponse().read()
        conn.close()
        asyncio.run(run(args, daemon, queues))
        print(f"load after: {loadavg()}")
    finally:
        daemon.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
