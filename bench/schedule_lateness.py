"""How late do scheduled messages become visible? (target: p99 < 1 s)

    .venv/bin/python bench/schedule_lateness.py                        # 100k, store fill
    .venv/bin/python bench/schedule_lateness.py --fill http --messages 20000
    .venv/bin/python bench/schedule_lateness.py --mode mover-cost      # move_due alone

Schedule run (default): N messages get due times spread uniformly over --spread seconds,
starting --lead seconds from now, so the fill is over before the first one is due. Then a
real daemon (`mq --workers W`) runs with C consumers, each a keep-alive connection that
long-polls `GET /{q}/messages?wait=20` (a parked poll is answered as soon as the mover's
'ready' notification reaches the fetch actor, so polling adds no latency). Each message's
body is its due time; lateness = when the consumer has its answer - due time.

Two more views of the same run, to tell the mover from the fetch path:
  * visible: an inotify watch (separate process) on the queue's folder, Store.queue_dir(q),
    time-stamps every rename into it: that is the mover's own lateness, whatever the
    consumers do afterwards.
  * CPU seconds of every daemon process (psutil) while the whole schedule sits in delay/ and
    nothing is due (a mover that scanned delay/ per tick would burn CPU here), and while the
    messages fall due (per thousand messages moved).

Fills:
  * store (default, set-up only): with no daemon running, Store.write_new(q, id, data, due)
    + store.states.deliver_new(q, id, delayed=True) per message and one flush at the end: the save
    actor's own write and rename (docs/FORMAT.md, "The fast fill path"). The daemon started
    afterwards loads delay/ once at start.
  * http: P concurrent producers `POST /{q}/messages?at=DUE` to the running daemon.

Fetched messages are not acked: the queue's `timeout` property is set to 12 h first, so
nothing comes back during the run (their in-flight files stay in delay/, which therefore
grows to N + the schedule while the mover works; it doesn't matter to the mover).

--mode mover-cost times mq.actors.mover.move_due directly on a scratch root: the same number
of due messages with small and with large delay/ folders, to show that a pass costs what
falls due, not what waits.
"""

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import tempfile
import time

import psutil
from harness import Daemon, cpu_snapshot, loadavg, machine_line, percentile, summary
from schedule_mover_cost import mover_cost
from schedule_traffic import QUEUE, consume, http_fill, set_timeout, store_fill
from schedule_watch import read_watch, watch_folder

from mq import store as fmt


def cpu_delta(before, after):
    """{process: CPU seconds between two cpu_snapshot()s}."""
    return {k: after[k] - before[k] for k in before if k in after}


# -- the schedule run ---------------------------------------------------------------------------

def rate_table(events, start, seconds, step=5.0):
    """Counts per step-second window from start."""
    counts = [0] * (int(seconds // step) + 1)
    for t in events:
        i = int((t - start) // step)
        if 0 <= i < len(counts):
            counts[i] += 1
    return counts


def schedule_run(args):
    """The schedule run: fill, start the daemon, consume, and print the figures."""
    print(f"# schedule_lateness: {args.messages} messages due over {args.spread:g} s, "
          f"fill={args.fill}, {args.consumers} consumers, --workers {args.workers}")
    print(f"machine: {machine_line(tempfile.gettempdir())}")
    print(f"load before: {loadavg()}")
    tmp = tempfile.mkdtemp(prefix="mq-sched-", dir=args.tmp)
    root = os.path.join(tmp, "root")
    log_path = os.path.join(tmp, "mq.log")
    daemon = Daemon(root, args.workers, log_path=log_path,
                    extra=["--no-access-log", "--log-level", "warning"])
    watcher = None
    try:
        lead = args.lead if args.lead is not None else (
            40.0 if args.fill == "store" else 20.0 + args.messages / 800.0)
        base = time.time() + lead
        rng = random.Random(args.rng_state)
        dues = [base + rng.uniform(0, args.spread) for _ in range(args.messages)]
        t0 = time.time()
        if args.fill == "store":
            ids = store_fill(root, dues)
            print(f"store fill: {len(ids)} messages in {time.time() - t0:.1f} s "
                  f"(first due in {base - time.time():.1f} s)")
            t1 = time.time()
            daemon.start()
            print(f"daemon: {daemon.command}; healthy {time.time() - t1:.1f} s after start "
                  "(loading delay/ included)")
        else:
            daemon.start()
            print(f"daemon: {daemon.command}")
            asyncio.run(set_timeout(daemon.port))  # also waits for the fetch actors
            t0 = time.time()
            ids, errors = asyncio.run(http_fill(daemon.port, dues, args.producers))
            took = time.time() - t0
            print(f"http fill: {len(ids)} messages in {took:.1f} s = {len(ids) / took:.0f}/s "
                  f"from {args.producers} connections, {len(errors)} non-201 answers (503s retried) "
                  f"(first due in {base - time.time():.1f} s)")
        if time.time() > base - 1:
            print("WARNING: the fill ended after the first due time; raise --lead")
        store = fmt.Store(root)
        asyncio.run(set_timeout(daemon.port))

        procs = daemon.processes()
        watch_out = os.path.join(tmp, "watch.txt")
        stop_event, ready_event = multiprocessing.Event(), multiprocessing.Event()
        watcher = multiprocessing.Process(target=watch_folder, daemon=True,
                                          args=(store.queue_dir(QUEUE), watch_out, stop_event,
                                                ready_event))
        watcher.start()
        ready_event.wait(10)

        # The mover loads delay/ once at start; wait until its CPU time stands still.
        mover_cpu = [cpu_snapshot(procs)["mover"]]
        while time.time() < base - 5:
            time.sleep(0.5)
            mover_cpu.append(cpu_snapshot(procs)["mover"])
            if mover_cpu[-1] - mover_cpu[-2] < 0.01:
                break
        what = (f"loading {len(ids)} entries of delay/ into its heap at start"
                if args.fill == "store" else
                f"timing {len(ids)} messages the save actors told it about")
        print(f"mover CPU since it started ({what}): {mover_cpu[-1]:.2f} s")
        # Idle window: the schedule sits in delay/, nothing is due yet.
        idle_from, cpu_idle0 = time.time(), cpu_snapshot(procs)
        got, statuses = {}, {}
        expected = len(ids)
        deadline = base + args.spread + args.grace

        async def run_consumers():
            task = asyncio.ensure_future(consume(daemon.port, args.consumers, expected,
                                                 deadline, got, statuses))
            snaps = {}
            sampler = asyncio.ensure_future(sample_others(others))
            await asyncio.sleep(max(0.0, base - 0.5 - time.time()))
            snaps["idle_end"] = (time.time(), cpu_snapshot(procs), os.getloadavg())
            await asyncio.sleep(max(0.0, base + args.spread + 0.5 - time.time()))
            snaps["due_end"] = (time.time(), cpu_snapshot(procs), os.getloadavg())
            await task
            snaps["done"] = (time.time(), cpu_snapshot(procs), os.getloadavg())
            sampler.cancel()
            return snaps

        ours = {**procs, "client": psutil.Process(), "watcher": psutil.Process(watcher.pid)}
        others = []  # (time, cores used by every other process on the machine, in that second)

        async def sample_others(out):
            """Each second: the machine's busy CPU minus this benchmark's processes'."""
            def busy():
                t = psutil.cpu_times()
                return t.user + t.nice + t.system + t.irq + t.softirq + t.steal
            b0, o0, w0 = busy(), sum(cpu_snapshot(ours).values()), time.time()
            while True:
                await asyncio.sleep(1.0)
                b1, o1, w1 = busy(), sum(cpu_snapshot(ours).values()), time.time()
                out.append((w1, max(0.0, (b1 - b0) - (o1 - o0)) / (w1 - w0)))
                b0, o0, w0 = b1, o1, w1

        me = psutil.Process()
        me_cpu0 = sum(me.cpu_times()[:2])
        snaps = asyncio.run(run_consumers())
        me_cpu = sum(me.cpu_times()[:2]) - me_cpu0
        time.sleep(0.5)
        stop_event.set()
        watcher.join(10)
        seen, overflow = read_watch(watch_out)

        # -- figures ---------------------------------------------------------------------
        fetched = [t - due for t, due in got.values()]
        visible = [seen[i] - due for i, due in ids.items() if i in seen]
        after_visible = [got[i][0] - seen[i] for i in got if i in seen]
        print(f"\nreceived {len(got)} of {expected}; statuses {statuses}; "
              f"watch saw {len(seen)} renames into queues/{QUEUE}/"
              + (f"; inotify OVERFLOWED {overflow} times" if overflow else ""))
        print(summary("lateness, fetched (consumer)", fetched))
        print(summary("lateness, visible (mover rename)", visible))
        print(summary("visible -> fetched", after_visible))
        for name, values in (("fetched", fetched), ("visible", visible)):
            if values:
                over = sum(1 for v in values if v > 1.0)
                print(f"  {name}: {over} of {len(values)} over 1 s late "
                      f"({100 * over / len(values):.2f} %)")
        missing = expected - len(got)
        if missing:
            print(f"  {missing} messages not received before the deadline "
                  f"(base + spread + {args.grace:g} s)")

        step = 5.0
        due_counts = rate_table(list(ids.values()), base, args.spread + args.grace, step)
        seen_counts = rate_table(list(seen.values()), base, args.spread + args.grace, step)
        got_counts = rate_table([t for t, _ in got.values()], base, args.spread + args.grace, step)
        print(f"\nper {step:g} s from the first due time: due / visible / fetched msg/s, and "
              f"CPU cores used by other processes on the machine (of {os.cpu_count()}):")
        last = max(i for i, c in enumerate(got_counts + [1]) if c) if any(got_counts) else 0
        for i in range(min(len(due_counts), max(last + 1, int(args.spread // step) + 1))):
            window = [c for t, c in others if base + i * step < t <= base + (i + 1) * step]
            print(f"  t+{i * step:5.0f}s  {due_counts[i] / step:7.0f} {seen_counts[i] / step:7.0f} "
                  f"{got_counts[i] / step:7.0f}   others {sum(window) / max(1, len(window)):.2f}")

        t_idle, cpu_idle1, load_idle = snaps["idle_end"]
        t_due, cpu_due1, load_due = snaps["due_end"]
        idle = cpu_delta(cpu_idle0, cpu_idle1)
        due = cpu_delta(cpu_idle1, cpu_due1)
        moved_in_window = sum(1 for i in seen.values() if t_idle <= i <= t_due)
        print("\nCPU seconds per daemon process (psutil, user+system):")
        print(f"  idle window {t_idle - idle_from:5.1f} s, {len(ids)} messages in delay/, none due:")
        print("    " + "  ".join(f"{k} {v:.2f}" for k, v in sorted(idle.items())))
        print(f"  due window  {t_due - t_idle:5.1f} s, {moved_in_window} moved:")
        print("    " + "  ".join(f"{k} {v:.2f}" for k, v in sorted(due.items())))
        if moved_in_window:
            print(f"  mover: {1e6 * due['mover'] / moved_in_window:.0f} µs CPU per message moved; "
                  f"idle: {100 * idle['mover'] / max(1e-9, t_idle - idle_from):.2f} % of a core "
                  f"with {len(ids)} files in delay/")
        print(f"  this client process: {me_cpu:.1f} s CPU")
        print(f"load at first due: {' '.join(f'{x:.2f}' for x in load_idle)}; at last due: "
              f"{' '.join(f'{x:.2f}' for x in load_due)}; after: {loadavg()}")
        p99 = percentile(fetched, 99)
        print(f"\nRESULT fetched p99 {p99 * 1000:.0f} ms, visible p99 "
              f"{percentile(visible, 99) * 1000:.0f} ms: target p99 < 1000 ms "
              f"{'MET' if p99 < 1.0 and not missing else 'MISSED'}")
    finally:
        if watcher is not None and watcher.is_alive():
            watcher.terminate()
        daemon.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    """Parse the command line and run the chosen mode."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["schedule", "mover-cost"], default="schedule")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--spread", type=float, default=60.0, help="seconds the due times span")
    p.add_argument("--lead", type=float, default=None,
                   help="seconds from start to the first due time (default 40 for the store "
                        "fill, 20 + messages/800 for http)")
    p.add_argument("--fill", choices=["store", "http"], default="store")
    p.add_argument("--producers", type=int, default=32, help="connections for --fill http")
    p.add_argument("--consumers", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--grace", type=float, default=30.0,
                   help="seconds after the last due time to wait for stragglers")
    p.add_argument("--rng-state", type=int, default=4,
                   help="starting state of the random due times, so runs are repeatable")
    p.add_argument("--tmp", default=None, help="folder for the scratch root (default $TMPDIR)")
    p.add_argument("--keep", action="store_true", help="keep the root and log")
    p.add_argument("--waiting", type=int, nargs="+", default=[0, 100_000],
                   help="mover-cost: files in delay/ not due")
    p.add_argument("--due", type=int, nargs="+", default=[10, 100, 1000],
                   help="mover-cost: files due in one pass")
    p.add_argument("--repeats", type=int, default=5, help="mover-cost: passes per size")
    args = p.parse_args()
    if args.mode == "mover-cost":
        mover_cost(args)
    else:
        schedule_run(args)


if __name__ == "__main__":
    main()
