"""The mover: returns messages from delay/ to their queues when due; also the mq-mover daemon."""

import argparse
import math
import os
import signal
import sys
import time
from collections import defaultdict

from mq import logs, properties
from mq import operations as ops
from mq.actors import accumulation
from mq.actors.base import Actor
from mq.actors.batch import Batch
from mq.actors.counters import Counters, counters_file
from mq.actors.due_heap import DueHeap
from mq.config import Options
from mq.errors import errno_kind
from mq.store import Changes, Disk
from mq.store.notices import RETIME
from mq.store.root import mover_endpoint

# With --peers, the mover scans delay/ every --peer-rescan seconds, to pick up what other
# daemons on the root put there. Alone on a root, it scans at its start and when a save or
# fetch actor starts (asking with "rescan"): every actor that puts a message in delay/ tells
# it, a notification sent while it was down waits in the sender's socket or is covered by its
# start-up scan, and one lost with a killed sender is covered by the successor's request.
#: Seconds between reads of delay/'s notice file, which a writer no daemon hears (a Spark
#: driver on another host) replaces after putting messages in delay/.
NOTICE_SECONDS = 0.5
#: Longest wait between checks of the timer heap, in seconds.
MAX_SLEEP_SECONDS = 0.5
class MoverActor(Actor[Batch]):
    """Cost follows the number of messages falling due: a heap, not a scan per tick."""

    kind = "mover"
    batch_class = Batch

    def __init__(self, options: Options, index: int, run_dir: str, store=None):
        super().__init__(options, index, run_dir, store)
        self.timers = DueHeap()
        self.windows = DueHeap()  # accumulation windows: (due, queue, window name, 0)
        self.props = properties.PropertyFiles(self.store, {"timeout": options.timeout})
        self.counters = Counters(path=counters_file(run_dir, f"{self.kind}-{index}"))

    def endpoint(self) -> str:
        """The mover binds one address, whatever its index."""
        return mover_endpoint(self.run_dir)

    def start(self) -> None:
        """Load every message in delay/ and connect to the fetch actors it wakes (which re-list
        their queues: a predecessor may have died between a release and its "ready")."""
        self.connect_fetchers()
        self.rescan()

    def rescan(self, only_new: bool = False) -> None:
        """Time every message in delay/ from its file's mtime (only_new: those not timed yet).

        A full rescan also corrects due times a lost notification left wrong; a noticed one
        (a Spark claim, after every micro-batch) only needs the new entries, and skips the
        stat of the others.
        """
        # Read before the listing, so a notice posted meanwhile is seen as new.
        self.notice = self.store.notices.read()
        self.noticed_at = time.monotonic()
        known = self.timers.due if only_new else ()
        for due, queue, message_id, attempts in self.store.states.list_delayed(known=known):
            self.timers.add(due, queue, message_id, attempts)
        accumulation.time_windows(self.store, self.windows, bool(self.options.peers))
        self.scanned_at = time.monotonic()
        self.log.debug("mover.rescan", timed=len(self.timers))

    def poll_timeout_ms(self) -> int:
        """Sleep until the next message is due, at most MAX_SLEEP_SECONDS."""
        due = min((d for d in (self.timers.next_due(), self.windows.next_due()) if d is not None),
                  default=None)
        wait = MAX_SLEEP_SECONDS if due is None else min(MAX_SLEEP_SECONDS, due - time.time())
        # Round up: a wait under 1 ms truncated to 0 would spin on poll(0) until the due time.
        return max(0, math.ceil(wait * 1000))

    def delayed(self, batch, request: ops.Delayed, sender) -> dict:
        """Notification: time a message a save or fetch actor put in delay/ (or, with
        `entries`, every [queue, id, attempts, due] of a batch)."""
        for queue, message_id, attempts, due in request.all_entries():
            if self.timers.purged_lately(queue) and \
                    not self.store.states.is_delayed(queue, message_id, int(attempts)):
                continue  # Made before a purge that took it, and told after.
            self.timers.add(float(due), queue, message_id, int(attempts))
        return {}

    def relay(self, batch, request: ops.Relay, sender) -> dict:
        """Notification: pass ids on to their queue's fetch actor (dead letters; redriven out)."""
        (self.tell_taken if request.taken else self.tell_ready)(request.queue, request.ids)
        return {}

    def rescan_all(self, batch, request: ops.Rescan, sender) -> dict:
        """Notification from a restarted save or fetch actor: list delay/ again."""
        self.rescan()
        return {}

    def settled(self, batch, request: ops.Settled, sender) -> dict:
        """Notification: [queue, id, deliveries] entries a fetch actor took out of delay/
        (id or deliveries nil: any), for the counts and the timers (DueHeap.settle)."""
        for queue, message_id, attempts in request.entries:
            self.timers.settle(queue, message_id, attempts)
        return {}

    def stats(self, batch, request: ops.Stats, sender) -> dict:
        """Per queue: messages delayed and in flight in delay/, and dead letters it made."""
        counted = self.counters.report()
        queues = {queue: {**(counted.get(queue) or {"totals": {}, "rates": {}}),
                          "delayed": counts[0], "in_flight": counts[1]}
                  for queue, counts in self.timers.counts.items()}
        for queue, entry in counted.items():
            queues.setdefault(queue, {**entry, "delayed": 0, "in_flight": 0})
        # Each answer is a gather of the statistics by a front (QueueService.recent_stats).
        self.log.debug("mover.stats", queues=len(queues))
        return {"actor": f"{self.kind}-{self.index}", "queues": queues,
                "flush": self.store.flush_times.snapshot(), **self.gone.figures(request.heap)}

    def queue_tables(self) -> dict:
        """The queues counted, with cached properties, with timers, purged or deleted in the
        last EARLY_SETTLED_SECONDS."""
        return {"counters": self.counters.queues(), "properties": self.props.queues(),
                "timers": self.timers.queues(), "purges": set(self.timers.purged)}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop the dead-letter counters, properties and timers of queues that are gone."""
        for queue in gone:
            self.counters.forget(queue)
            self.props.forget(queue)
        self.timers.forget(gone, self.store.states.is_delayed)

    COMMANDS = {ops.Delayed: delayed, ops.Relay: relay, ops.Rescan: rescan_all,
                ops.Settled: settled, ops.Stats: stats, ops.Window: accumulation.window_note}

    def tick(self) -> None:
        """Move what is due, flush, then tell each queue's fetch actor."""
        if self.options.peers and time.monotonic() - self.scanned_at > self.options.peer_rescan:
            self.rescan()
        elif time.monotonic() - self.noticed_at >= NOTICE_SECONDS:
            self.noticed_at = time.monotonic()
            token = self.store.notices.read()
            if token is not None and token != self.notice:
                retime = token.startswith(RETIME)
                self.log.debug("mover.noticed", retime=retime)
                self.rescan(only_new=not retime)
        moved = move_due(self.store, self.timers, time.time(), self.props, self.counters)
        for queue, ids in moved.items():
            self.tell_ready(queue, ids)
        self.post_notices(moved)
        closed = accumulation.close_due_windows(self.store, self.windows, time.time())
        for queue, ids in closed.items():
            self.tell_ready(queue, ids)
        self.post_notices(closed)


def move_due(store, timers: DueHeap, now: float, props=None, counters=None) -> dict[str, list]:
    """Release every due message to its queue (or dead-letter queue), flush once.

    Returns the [id, deliveries] pairs made ready, per queue. A message delivered more than
    its queue's `retry` times goes to the dead-letter queue as a new ready message.
    """
    moved: dict[str, list] = defaultdict(list)
    changes = Changes()
    for queue, message_id, attempts in timers.pop_due(now):
        dead, dead_count = None, 0
        if props is not None and attempts:
            dead, dead_count = properties.dead_letter(props.effective(queue), attempts,
                                                      props.effective)
        try:
            outcome, due = store.states.release(queue, message_id, now, attempts, dead,
                                         dead_count=dead_count, changes=changes)
        except OSError as err:
            logs.get().error("mover.error", queue=queue, id=message_id, error=str(err), kind=errno_kind(err))
            timers.add(now + 1, queue, message_id, attempts)
            continue
        if outcome == "not_due":
            timers.add(due, queue, message_id, attempts)
        elif outcome == "ready":
            moved[queue].append([message_id, attempts])
        elif outcome == "dead":
            assert dead is not None, "release() dead-letters only into the queue it is given"
            logs.get().info("mover.dead_letter", queue=queue, id=message_id, attempts=attempts,
                            dead_letter_queue=dead)
            moved[dead].append([message_id, dead_count])
            if counters is not None:
                counters.count(queue, "dead_letters")
    if changes:
        try:
            store.flush(changes)
        except OSError as err:
            logs.get().error("mover.flush_failed", error=str(err), kind=errno_kind(err))
    return dict(moved)


def move_folder_once(source: str, destination: str, delay: float, now: float) -> int:
    """The standalone mover's pass: move each file older than delay seconds to destination.

    A file named queue:id goes to destination/queue/id when that folder exists (the original
    delivery layout), any other file to destination/name. Each move is one rename, and the
    destination folders are fsynced before the pass ends.
    """
    moved, touched = 0, set()
    with os.scandir(source) as it:
        for entry in it:
            try:
                if not entry.is_file() or entry.stat().st_mtime + delay > now:
                    continue
                queue, sep, message_id = entry.name.rpartition(":")
                target_dir = os.path.join(destination, queue) if sep else destination
                if not os.path.isdir(target_dir):
                    target_dir, message_id = destination, entry.name
                os.rename(entry.path, os.path.join(target_dir, message_id))
                touched.update({target_dir, source})
                moved += 1
            except FileNotFoundError:
                continue
    disk = Disk("file")
    for path in touched:
        disk.fsync_dir(path)
    return moved


def main(argv: list[str] | None = None) -> int:
    """mq-mover: move files from --source to --destination, --delay seconds after their mtime."""
    parser = argparse.ArgumentParser(
        prog="mq-mover",
        description="Move files from a source to a destination directory, optionally "
        "with a delay per file (counted from the file's modification time).")
    parser.add_argument("--source", required=True, help="directory files are taken from; must be readable")
    parser.add_argument("--destination", required=True,
                        help="directory files are delivered to; must be writable")
    parser.add_argument("--delay", type=float, default=0.0,
                        help="seconds to wait before delivering a file (default 0)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between passes (default 0.2)")
    parser.add_argument("--once", action="store_true", help="make one pass and exit")
    args = parser.parse_args(argv)
    logs.configure("mq-mover")
    log = logs.get()
    for path in (args.source, args.destination):
        if not os.path.isdir(path):
            print(f"mq-mover: {path}: not a directory", file=sys.stderr)
            return 2
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.append(1))
    log.info("mover.start", source=args.source, destination=args.destination, delay=args.delay)
    while not stopping:
        moved = move_folder_once(args.source, args.destination, args.delay, time.time())
        if moved:
            log.info("mover.moved", count=moved)
        if args.once:
            break
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
