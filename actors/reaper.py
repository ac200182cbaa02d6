"""The reaper: empties remove/ (keeping files to write again in spare/), runs the root's chores;
also the standalone mq-reaper, which unlinks everything in a folder.

Chores of the daemon's reaper: files in new/ whose writer died, expired de-duplication keys
and stale notice temporaries every DEDUP_SWEEP_SECONDS; messages past their queue's retention
(actors/retention.py); Spark stage folders every STAGE_SWEEP_SECONDS (jobs whose driver died
mid-commit are rolled forward, abandoned ones removed: docs/PIPELINE.md, "Stage folders").
Every chore also runs at the reaper's first pass, so a daemon's start finishes at once what
a crash left.
"""

import argparse
import os
import signal
import sys
import time

from mq import logs
from mq.actors.retention import SWEEP_SECONDS, RetentionSweep
from mq.config import Options
from mq.errors import errno_kind
from mq.liveness import writer_is_dead
from mq.properties import PropertyFiles
from mq.store import Disk, Store, reap_folder
from mq.store.publishing import roll_forward, sweep_abandoned_stages
from mq.supervisor import heartbeat

#: Seconds between passes over the remove folder.
INTERVAL_SECONDS = 0.5


#: Seconds between sweeps of expired de-duplication keys.
DEDUP_SWEEP_SECONDS = 60.0
#: Seconds between passes over stage/. Shorter than the other chores: a job whose driver died
#: mid-commit is half visible until it is rolled forward, at most COMMIT_GRACE_SECONDS plus
#: this after the driver's last sign; a pass lists stage/ and stats a few folders.
STAGE_SWEEP_SECONDS = 10.0


def reap_forever(reap, interval: float, stopping: list, chores=()) -> None:
    """Call reap() every interval seconds until stopping is non-empty; it returns how many
    entries it (recycled, unlinked).

    chores: (every_seconds, function) pairs run at the first pass, then as often as they ask.
    """
    log = logs.get()
    last = [float("-inf")] * len(chores)
    while not stopping:
        heartbeat.beat()  # Once a pass: the supervisor restarts a reaper stuck in one.
        if heartbeat.root_lost_since():  # Its path leads to an empty mount point meanwhile.
            time.sleep(interval)
            continue
        try:
            recycled, unlinked = reap()
            if recycled or unlinked:
                log.debug("reaper.reaped", recycled=recycled, unlinked=unlinked)
            for i, (every, chore) in enumerate(chores):
                if time.monotonic() - last[i] >= every:
                    chore()
                    last[i] = time.monotonic()
                    heartbeat.beat()  # Each chore has a deadline of its own.
        except OSError as err:
            log.error("reaper.error", error=str(err), kind=errno_kind(err))
        time.sleep(interval)


def run_actor(options: Options) -> None:
    """The reaper as an actor of the daemon's tree: remove/, then its chores (module docstring)."""
    stopping: list = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.get().info("actor.start", actor="reaper-0")
    store = Store(options.root, options.sync)
    props = PropertyFiles(store)

    def window(queue: str) -> float:
        """Seconds a key of the queue is remembered, as its properties say now."""
        return props.effective(queue)["dedup_window"]

    def sweep_keys():
        # First the files of writers that died mid-add (a broker-less process, a whole daemon
        # killed with -9): their keys go with them, so a retry is stored, not kept waiting.
        cleaned = store.recovery.clean_new(dead=writer_is_dead)
        if cleaned:
            logs.get().info("reaper.cleaned_new", count=cleaned)
        swept = store.dedup.sweep(window)
        if swept:
            logs.get().info("reaper.dedup_swept", count=swept)
        leftovers = store.notices.sweep_temps()
        if leftovers:
            logs.get().info("reaper.notice_temps_swept", count=leftovers)

    reap_forever(lambda: store.spares.recycle_removed(options.spare_files), INTERVAL_SECONDS, stopping,
                 [(DEDUP_SWEEP_SECONDS, sweep_keys),
                  (STAGE_SWEEP_SECONDS, lambda: sweep_stages(store, window)),
                  (SWEEP_SECONDS, RetentionSweep(store, props))])


def sweep_stages(store: Store, dedup_window) -> None:
    """Roll forward the Spark jobs whose driver died mid-commit; remove abandoned stage folders."""
    log = logs.get()

    def failed(job: str, err: Exception) -> None:
        """Log a job that could not be finished; the next pass tries again."""
        log.error("reaper.roll_forward_failed", job=job, error=str(err))

    # No ZeroMQ notification: the notices publishing posts reach every fetch actor within 0.5 s.
    finished = roll_forward(store, dedup_window, on_error=failed)
    for job, report in finished.items():
        log.info("reaper.rolled_forward", job=job, messages=report["messages"],
                 duplicates=report["duplicates"], queues=report["queues"])
    removed = sweep_abandoned_stages(store)
    for job in removed:
        log.info("reaper.stage_removed", job=job)
    # Once per pass, at debug: shows when a pass has looked at every stage folder.
    log.debug("reaper.stage_pass", rolled_forward=len(finished), removed=len(removed))


def main(argv: list[str] | None = None) -> int:
    """mq-reaper: remove files from --source."""
    parser = argparse.ArgumentParser(prog="mq-reaper", description="Remove files from a source directory.")
    parser.add_argument("--source", default="/tmp/mq/remove",
                        help="directory from which files are unlinked; must be writable "
                             "(default /tmp/mq/remove)")
    parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS,
                        help=f"seconds between passes (default {INTERVAL_SECONDS})")
    parser.add_argument("--once", action="store_true", help="make one pass and exit")
    args = parser.parse_args(argv)
    logs.configure("mq-reaper")
    if not os.path.isdir(args.source):
        print(f"mq-reaper: {args.source}: not a directory", file=sys.stderr)
        return 2
    if args.once:
        reap_folder(args.source, Disk("file"))
        return 0
    stopping: list = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.append(1))
    disk = Disk("file")
    reap_forever(lambda: (0, reap_folder(args.source, disk)), args.interval, stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
