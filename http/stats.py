"""GET /_mq/stats: the statistics every actor keeps, merged per queue by the queue service
(QueueService.stats, http/figures.py)."""

from mq.http.api import ApiHandler, accepts
from mq.http.root_space import root_figures


class StatsHandler(ApiHandler):
    """GET /_mq/stats: depths, counters and rates per queue, from the actors' memory."""

    @accepts("tables")
    async def get(self) -> None:
        """200 with the statistics; "complete" is false when an actor did not answer. With
        ?tables=1, also how many queues each process's per-queue tables hold."""
        self.set_header("Cache-Control", "no-store")
        figures = await self.service.stats(self.token)
        # Flush times are for /metrics' histogram; the JSON keeps to the queues' figures.
        figures.pop("flush")
        if self.get_query_argument("tables", None) != "1":
            figures.pop("tables")
        # The front's own reading of the root's file system, as /metrics shows it.
        figures["root"] = root_figures(self.config.root)
        self.write_json(200, figures)
