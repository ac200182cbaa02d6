"""The last hour of the daemon's figures, kept by each front: every HISTORY_SECONDS it asks
the actors for their statistics (QueueService.stats) and keeps one sample of the totals over
every queue, in a ring of an hour's samples. GET /_mq/history serves the ring, for the
dashboard's charts (docs/OPERATIONS.md, "Dashboard"); nothing is written to disk, so a
restarted front starts an empty ring.
"""

import collections
import functools
import time

import tornado.ioloop

from mq import installed_version
from mq.config import Options
from mq.http.api import ApiHandler, accepts
from mq.http.figures import RATES
from mq.http.root_space import free_space
from mq.http.service import QueueService, check
from mq.numbers import parse_number
from mq.operations import Stats

#: Seconds between two samples.
HISTORY_SECONDS = 10.0
#: Seconds of samples kept.
SPAN_SECONDS = 3600.0


@functools.cache
def version() -> str:
    """The daemon's version (the installed package's), read once."""
    return installed_version()


class History:
    """The ring of samples of one front."""

    def __init__(self, service: QueueService, root: str) -> None:
        self.service = service
        self.root = root
        self.samples: collections.deque = collections.deque(
            maxlen=int(SPAN_SECONDS / HISTORY_SECONDS))
        self._totals: tuple[float, dict] | None = None  # (time, totals) of the last sample
        self._timer: tornado.ioloop.PeriodicCallback | None = None

    def start(self) -> None:
        """Take a sample now and every HISTORY_SECONDS."""
        self._timer = tornado.ioloop.PeriodicCallback(self.sample, HISTORY_SECONDS * 1000)
        self._timer.start()
        tornado.ioloop.IOLoop.current().add_callback(self.sample)

    def stop(self) -> None:
        """Take no more samples."""
        if self._timer is not None:
            self._timer.stop()

    async def sample(self) -> None:
        """Ask the actors and keep one sample; an actor that does not answer leaves its queues
        out of it (the sample says `complete: false`), and is never an error."""
        figures, sums = await self.service.recent_stats(None)
        self.add(figures["time"], sums, figures["complete"])

    def add(self, now: float, sums: dict, complete: bool = True) -> None:
        """Keep a sample of the sums taken at `now`: rates from the totals' growth since the
        sample before (none when a total went down: an actor restarted, a queue was deleted)."""
        # The sums are shared with the queue list's pages (QueueService.recent_stats): read only.
        totals = sums["totals"]
        rates = dict.fromkeys(RATES, 0.0)
        if self._totals is not None and now > self._totals[0]:
            then, before = self._totals
            rates = {event: round(max(0, totals[event] - before[event]) / (now - then), 3)
                     for event in RATES}
        self._totals = (now, totals)
        space = free_space(self.root)
        self.samples.append({
            "time": round(now, 3), **rates,
            **{name: value for name, value in sums.items() if name != "totals"},
            "complete": complete,
            "root_free_bytes": space[0] if space else None,
            "root_free_inodes": space[1] if space else None})


class HistoryHandler(ApiHandler):
    """GET /_mq/history: the samples of the last hour, oldest first."""

    def initialize(self, service: QueueService, options: Options,
                   history: History | None = None) -> None:
        """Also take the front's ring of samples."""
        super().initialize(service, options)
        self.history = history

    @accepts("since")
    def get(self) -> None:
        """200 with the samples taken after ?since= (a Unix time; default: all of them)."""
        check(self.token, Stats())  # The statistics' own scope: read, on every queue.
        since = parse_number("since", self.get_query_argument("since", None), 0.0)
        samples = list(self.history.samples) if self.history is not None else []
        self.set_header("Cache-Control", "no-store")
        self.write_json(200, {"interval_s": HISTORY_SECONDS, "span_s": SPAN_SECONDS,
                              "version": version(), "time": round(time.time(), 3),
                              "samples": [s for s in samples if s["time"] > since]})
