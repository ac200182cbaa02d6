"""The reaper: unlinks what reaches remove/; also the standalone mq-reaper daemon."""

import argparse
import os
import signal
import sys
import time

from mq import logs
from mq.properties import PropertyFiles
from mq.store import Disk, Store, reap_folder

#: Seconds between passes over the remove folder.
INTERVAL_SECONDS = 0.5


#: Seconds between sweeps of expired de-duplication keys.
DEDUP_SWEEP_SECONDS = 60.0


def reap_forever(source: str, interval: float, stopping: list, chores=(), disk: Disk | None = None) -> None:
    """Unlink everything in source every interval seconds until stopping is non-empty.

    chores: (every_seconds, function) pairs run as often as they ask, between passes.
    """
    log = logs.get()
    disk = disk or Disk("file")
    last = [0.0] * len(chores)
    while not stopping:
        try:
            count = reap_folder(source, disk)
            if count:
                log.debug("reaper.unlinked", count=count)
            for i, (every, chore) in enumerate(chores):
                if time.monotonic() - last[i] >= every:
                    chore()
                    last[i] = time.monotonic()
        except OSError as err:
            log.error("reaper.error", error=str(err))
        time.sleep(interval)


def run_actor(options) -> None:
    """The reaper as an actor of the daemon's tree: remove/, then expired dedup keys."""
    stopping: list = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.get().info("actor.start", actor="reaper-0")
    store = Store(options.root, options.sync)
    props = PropertyFiles(store)

    def sweep_keys():
        swept = store.dedup_sweep(lambda queue: props.effective(queue)["dedup_window"])
        if swept:
            logs.get().info("reaper.dedup_swept", count=swept)
        leftovers = store.sweep_notice_temps()
        if leftovers:
            logs.get().info("reaper.notice_temps_swept", count=leftovers)

    reap_forever(store.folder("remove"), INTERVAL_SECONDS, stopping,
                 [(DEDUP_SWEEP_SECONDS, sweep_keys)], store.disk)


def main(argv: list[str] | None = None) -> int:
    """mq-reaper: remove files from --source."""
    parser = argparse.ArgumentParser(prog="mq-reaper", description="Remove files from a source directory.")
    parser.add_argument("--source", default="/tmp/mq/remove",
                        help="directory from which files are unlinked; must be writable (default /tmp/mq/remove)")
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
    reap_forever(args.source, args.interval, stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
