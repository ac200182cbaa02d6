"""Counters: an actor's per-queue event totals, with a rate over the last minute for each.

Counting is a dict lookup and an add: the actors count on their hot paths (every add, fetch
and ack). The totals live as long as the daemon: each answer to the statistics first keeps
them in the actor's counters file in the run folder (kept_totals), and a restarted actor
starts from its predecessor's file, so no total anyone was shown goes down (Prometheus
counters). What a killed actor counted after its last answer was never shown, and is lost.
A queue's totals go with the queue (forget).
"""

import os
import time
from collections import defaultdict
from collections.abc import Callable

import orjson

#: Seconds the rates are averaged over.
WINDOW_SECONDS = 60


def counters_file(run_dir: str, actor: str) -> str:
    """The file in the daemon's run folder where an actor keeps its totals."""
    return os.path.join(run_dir, f"counters-{actor}.json")


def daemon_identity() -> str:
    """The supervisor this process was forked from, as its pid and start time: a file left by
    another daemon in a reused --run-dir is not this daemon's."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/stat", "rb") as f:
            started = f.read().rpartition(b")")[2].split()[19].decode()
    except (OSError, IndexError):
        started = ""
    return f"{parent}:{started}"


def kept_totals(path: str) -> dict[str, dict[str, int]]:
    """The totals a predecessor kept in path ({} when none, or another daemon's)."""
    try:
        with open(path, "rb") as f:
            kept = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(kept, dict) or kept.get("daemon") != daemon_identity():
        return {}
    return kept.get("totals") or {}


class Counters:
    """Per-queue totals of named events, and a ring of per-second buckets for their rates."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, path: str | None = None) -> None:
        self.clock = clock
        self.totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        # queue -> event -> [second, count] buckets, one slot per second of the window.
        self.buckets: dict[str, dict[str, list[list[int]]]] = {}
        #: Where report() keeps the totals (None: nowhere, in-process actors of the tests).
        self.path = path
        self.changed = False  # since the totals were last kept
        if path is not None:
            for queue, events in kept_totals(path).items():
                self.totals[queue].update(events)

    def count(self, queue: str, event: str, n: int = 1) -> None:
        """Record n events of a kind for a queue."""
        self.totals[queue][event] += n
        self.changed = True
        second = int(self.clock())
        rings = self.buckets.get(queue)
        if rings is None:
            rings = self.buckets[queue] = {}
        ring = rings.get(event)
        if ring is None:
            ring = rings[event] = [[-1, 0] for _ in range(WINDOW_SECONDS)]
        slot = ring[second % WINDOW_SECONDS]
        if slot[0] != second:
            slot[0], slot[1] = second, 0
        slot[1] += n

    def rate(self, queue: str, event: str) -> float:
        """Events per second over the last WINDOW_SECONDS whole seconds (the current one too)."""
        ring = self.buckets.get(queue, {}).get(event)
        if ring is None:
            return 0.0
        now = int(self.clock())
        recent = sum(n for second, n in ring if now - second < WINDOW_SECONDS)
        return recent / WINDOW_SECONDS

    def queues(self) -> set[str]:
        """The queues counted."""
        return set(self.totals)

    def forget(self, queue: str) -> None:
        """Drop a deleted queue's counters."""
        if self.totals.pop(queue, None) is not None:
            self.changed = True
        self.buckets.pop(queue, None)

    def snapshot(self) -> dict[str, dict]:
        """queue -> {"totals": {event: n}, "rates": {event: per second over the last minute}}."""
        return {queue: {"totals": dict(events),
                        "rates": {event: round(self.rate(queue, event), 3) for event in events}}
                for queue, events in self.totals.items()}

    def report(self) -> dict[str, dict]:
        """The snapshot, once the totals in it are kept in the counters file (when changed)."""
        if self.path is not None and self.changed:
            temp = f"{self.path}.tmp"
            try:
                with open(temp, "wb") as f:
                    f.write(orjson.dumps({"daemon": daemon_identity(), "totals": self.totals}))
                os.replace(temp, self.path)
                self.changed = False
            except OSError:
                pass  # Kept at the next answer; meanwhile a restart loses what this one shows.
        return self.snapshot()
