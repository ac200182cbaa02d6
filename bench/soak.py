"""Soak: steady traffic on one daemon for a given time, sampling the resident memory and the
open files of every process of its tree (and the backlog) every few seconds; prints whether
both stay flat.

    python bench/soak.py --minutes 30

"Flat" compares the last quarter of the samples with the first quarter after a warm-up (the
first tenth): the median resident memory may grow by at most 10% + 2 MB, the median number
of open files by at most 3. Exit status 0 when every process stays flat and the traffic,
drained at the end, lost nothing (bench/total_queue.py).
"""

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import psutil  # noqa: E402
from cluster import Node  # noqa: E402
from harness import code_under_test, loadavg, machine_line  # noqa: E402
from total_queue import History, check, passed, table  # noqa: E402
from workload import Traffic, call, drain  # noqa: E402

#: Growth allowed between the first and the last quarter: fraction and MB of resident memory,
#: and open files.
RSS_GROWTH, RSS_SLACK_MB, FDS_SLACK = 0.10, 2.0, 3


def sample(node: Node) -> dict[str, tuple[int, float, int]]:
    """{title: (pid, resident MB, open files)} of every process of the tree now."""
    out = {}
    for title, proc in node.processes().items():
        try:
            out[title] = (proc.pid, proc.memory_info().rss / 2**20, proc.num_fds())
        except psutil.Error:
            continue
    return out


def backlog(node: Node, queues: list[str]) -> int:
    """Ready messages in the queues now, as the daemon's indexes count them (-1 if unknown)."""
    total = 0
    for queue in queues:
        status, _, body = call(node.port, "GET", f"/{queue}")
        if status != 200:
            return -1
        total += json.loads(body)["ready"]
    return total


def sampler(node: Node, every: float, samples: list, stop: threading.Event,
            queues: list[str]) -> None:
    """Append (seconds since start, sample, backlog) every `every` seconds until stopped."""
    started = time.monotonic()
    while not stop.wait(every):
        samples.append((time.monotonic() - started, sample(node), backlog(node, queues)))


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else 3600 * sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def verdicts(samples: list) -> list[dict]:
    """Per process: memory and open files at the start and the end, slope, and flat or not
    (samples are (seconds, {title: (pid, MB, open files)}, backlog))."""
    warm = samples[len(samples) // 10:]
    quarter = max(1, len(warm) // 4)
    first, last = warm[:quarter], warm[-quarter:]
    rows = []
    for title in sorted(set(samples[-1][1]) & {t for _, s, _ in first for t in s}):
        def series(part, i, title=title):
            return [s[title][i] for _, s, _ in part if title in s]
        pids = {s[title][0] for _, s, _ in warm if title in s}
        rss0, rss1 = statistics.median(series(first, 1)), statistics.median(series(last, 1))
        fds0, fds1 = statistics.median(series(first, 2)), statistics.median(series(last, 2))
        rss_flat = rss1 <= rss0 * (1 + RSS_GROWTH) + RSS_SLACK_MB
        fds_flat = fds1 <= fds0 + FDS_SLACK
        rows.append({"process": title, "rss0": rss0, "rss1": rss1,
                     "rss_slope": slope_per_hour([(t, s[title][1])
                                                  for t, s, _ in warm if title in s]),
                     "fds0": fds0, "fds1": fds1, "restarted": len(pids) > 1,
                     "flat": rss_flat and fds_flat})
    return rows


def main() -> int:
    """Run the soak, print the table; exit 1 when something grew or a message was lost."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--adds-per-second", type=float, default=100.0)
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="the daemon's --timeout (1%% of deliveries are left to it)")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    parser.add_argument("--wait", type=float, default=1.0,
                        help="seconds each fetch long-polls (0: plain fetches)")
    parser.add_argument("--samples", default="",
                        help="also write every sample to this file, one JSON line each")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="mq-soak-", dir=args.tmp)
    print(f"mq soak: {args.minutes:g} min, {args.adds_per_second:g} adds/s, a sample every "
          f"{args.every:g} s")
    print(f"  {machine_line(workdir)}; {code_under_test()}")
    print(f"  load before: {loadavg()}; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    node = Node("soak", os.path.join(workdir, "root"), workdir, peers=0, timeout=args.timeout)
    history, samples, stop = History(), [], threading.Event()
    try:
        node.start()
        node.wait_answering()
        queues = ["soak-0", "soak-1"]
        traffic = Traffic([node.port], queues, history, random.Random(),
                          producers=2, consumers=3, adds_per_second=args.adds_per_second,
                          abandon=0.01, wait=args.wait).start()
        watcher = threading.Thread(target=sampler, args=(node, args.every, samples, stop, queues))
        watcher.start()
        time.sleep(args.minutes * 60)
        stop.set()
        watcher.join()
        traffic.stop()
        drained = drain(traffic, quiet_seconds=args.timeout + 2, timeout=120 + args.timeout)
    finally:
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.samples:
        with open(args.samples, "w") as f:
            for at, sampled, ready in samples:
                f.write(json.dumps({"s": round(at, 1), "ready": ready,
                                    **{t: v[1:] for t, v in sampled.items()}}) + "\n")
    rows = verdicts(samples)
    counts = check(history)
    print(f"\n  {len(samples)} samples; load after: {loadavg()}; traffic errors: {traffic.counts}\n")
    print("| process | RSS MB first quarter | RSS MB last quarter | RSS slope MB/h | open files "
          "first | open files last | flat |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        note = " (restarted)" if r["restarted"] else ""
        print(f"| {r['process']}{note} | {r['rss0']:.1f} | {r['rss1']:.1f} | {r['rss_slope']:+.1f} "
              f"| {r['fds0']:g} | {r['fds1']:g} | {'yes' if r['flat'] else '**no**'} |")
    flat = all(r["flat"] for r in rows)
    print(f"\nmemory and open files {'stay flat' if flat else 'GROW'} in every process\n")
    print(table(counts))
    ok = flat and passed(counts) and drained
    print(f"\n{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
