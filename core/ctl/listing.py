"""ls: every queue with its counts, from the daemon's statistics (GET /_mq/stats, one answer
held in memory, no folder listed) or, on a root, from one listing of delay/ and of each queue
shown."""

import os
import sys
from fnmatch import fnmatchcase

import orjson

from mq.ctl.errors import OK, UNAVAILABLE
from mq.ctl.status import table
from mq.store import split_name

#: The counts of each queue, in the order ls shows them (the names of GET /_mq/stats).
COUNTS = ("ready", "delayed", "in_flight", "dead")
HEADINGS = ("QUEUE", "READY", "DELAYED", "IN FLIGHT", "DEAD")
#: The characters that make a filter a glob rather than a substring.
GLOB = "*?["


def matcher(pattern: str | None):
    """Whether a queue name matches the filter: a glob when it has * ? or [, else a substring."""
    if not pattern:
        return lambda name: True
    if any(char in pattern for char in GLOB):
        return lambda name: fnmatchcase(name, pattern)
    return lambda name: pattern in name


def from_daemon(client) -> tuple[dict[str, dict], bool]:
    """{queue: counts} of every queue, from the daemon's statistics; and whether every actor
    answered (when one did not, its queues are missing or undercounted)."""
    stats = client.stats()
    queues = {name: {count: figures[count] for count in COUNTS}
              for name, figures in stats["queues"].items()}
    return queues, stats["complete"]


def from_root(client, keep) -> dict[str, dict]:
    """{queue: counts} of the matching queues of a root, through mq.store's listings; dead is
    the ready count of each queue's dead-letter queue."""
    store = client.store
    names = [name for name in store.queues.list_queues() if keep(name)]
    shown = set(names)
    hidden: dict[str, list[int]] = {}
    # One listing of delay/ for every queue: its names say the queue and the deliveries.
    for entry in os.listdir(store.folder("delay")):
        parts = split_name(entry)
        if parts and parts[0] in shown:
            hidden.setdefault(parts[0], [0, 0])[1 if parts[2] else 0] += 1
    ready: dict[str, int] = {}

    def ready_of(queue: str) -> int:
        if queue not in ready:
            ready[queue] = len(store.states.list_ready(queue))
        return ready[queue]

    queues = {}
    for name in names:
        delayed, in_flight = hidden.get(name, (0, 0))
        dead_letter_queue = client.props.effective(name)["dead_letter_queue"]
        queues[name] = {"ready": ready_of(name), "delayed": delayed, "in_flight": in_flight,
                        "dead": ready_of(dead_letter_queue) if dead_letter_queue else 0}
    return queues


def ls(client, args) -> int:
    """Print the queues (those matching FILTER) with their counts; --json: one line each."""
    keep = matcher(args.filter)
    if args.root is None:
        every, complete = from_daemon(client)
        queues = {name: counts for name, counts in every.items() if keep(name)}
    else:
        queues, complete = from_root(client, keep), True
    out = sys.stdout.buffer
    if args.json:
        for name, counts in queues.items():
            out.write(orjson.dumps({"queue": name, **counts}) + b"\n")
    elif queues:
        rows = [list(HEADINGS)] + [[name] + [counts[c] for c in COUNTS]
                                   for name, counts in queues.items()]
        out.write(table(rows).encode() + b"\n")
    out.flush()
    if not complete:
        print("mqctl: some of the daemon's actors did not answer: queues may be missing "
              "or undercounted", file=sys.stderr)
        return UNAVAILABLE
    return OK
