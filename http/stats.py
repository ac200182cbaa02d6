"""GET /_mq/stats: the statistics every actor keeps, merged per queue by the queue service
(QueueService.stats, http/figures.py); GET /_mq/queues: a page of them, filtered by name."""

from mq.http.api import ApiHandler, accepts
from mq.http.history import version
from mq.http.root_space import free_space, root_figures
from mq.numbers import parse_number
from mq.operations import Stats


class StatsHandler(ApiHandler):
    """GET /_mq/stats: depths, counters and rates per queue, from the actors' memory."""

    @accepts("tables", "heap")
    async def get(self) -> None:
        """200 with the statistics; "complete" is false when an actor did not answer. With
        ?tables=1, also how many queues each process's per-queue tables hold; with ?heap=1,
        how many memory blocks Python's allocator holds for each process."""
        self.set_header("Cache-Control", "no-store")
        heap = self.get_query_argument("heap", None) == "1"
        figures = await self.service.run(self.token, Stats(heap=heap))
        # Flush times are for /metrics' histogram; the JSON keeps to the queues' figures.
        figures.pop("flush")
        if self.get_query_argument("tables", None) != "1":
            figures.pop("tables")
        if not heap:
            figures.pop("heap_blocks")
        # The front's own reading of the root's file system, as /metrics shows it.
        figures["root"] = root_figures(self.config.root)
        self.write_json(200, figures)


#: Queues a page of GET /_mq/queues holds by default, and at most.
PAGE_QUEUES, MAX_PAGE_QUEUES = 50, 1000


class QueueListHandler(ApiHandler):
    """GET /_mq/queues: the statistics of one page of the queues whose names match a filter,
    with the sums over every queue, the root's free space and the daemon's version (what the
    dashboard shows, without sending it the figures of 10,000 queues every second)."""

    @accepts("filter", "offset", "limit", "name")
    async def get(self) -> None:
        """200 with the page: queues in name order, each with its figures and its name."""
        text = (self.get_query_argument("filter", None) or "").casefold()
        offset = parse_number("offset", self.get_query_argument("offset", None), 0, int)
        limit = parse_number("limit", self.get_query_argument("limit", None), PAGE_QUEUES, int, 1,
                             MAX_PAGE_QUEUES)
        exact = self.get_query_argument("name", None)
        self.set_header("Cache-Control", "no-store")
        # Shared with the other pages and the history while younger than STATS_AGE_S.
        figures, sums = await self.service.recent_stats(self.token)
        queues = figures["queues"]
        if exact is not None:
            names = [exact] if exact in queues else []
        elif text:
            names = [queue for queue in queues if text in queue.casefold()]
        else:
            names = list(queues)
        space = free_space(self.config.root)
        self.write_json(200, {
            "time": figures["time"], "complete": figures["complete"], "actors": figures["actors"],
            "version": version(), "count": len(queues), "matched": len(names),
            "offset": offset, "limit": limit, "sums": sums,
            "root_free_bytes": space[0] if space else None,
            "root_free_inodes": space[1] if space else None,
            "queues": [{"name": queue, **queues[queue]} for queue in names[offset:offset + limit]]})
