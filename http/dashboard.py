"""The dashboard: GET / points to it, GET /_mq/dashboard serves its page, and its script and
style sheet come from the package (core/dashboard/, package data: no build step, no CDN).

The page polls GET /_mq/queues (a page of the queues, filtered by name), GET /_mq/health and
GET /_mq/history (the last hour, kept by the front: http/history.py); it creates queues, and a
queue's page (#/queue/NAME) reads and PATCHes /{queue}/properties, publishes, peeks, fetches,
acks and nacks, peeks at its dead-letter queue, redrives, purges and deletes the queue, all
through the ordinary API; it holds no state of its own.
"""

import functools
import importlib.resources

from mq.errors import NotFound
from mq.http.api import ApiHandler

#: The files of the page, with their content types.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "overview.js": "text/javascript; charset=utf-8",
    "queue.js": "text/javascript; charset=utf-8",
    "queue_actions.js": "text/javascript; charset=utf-8",
    "history.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}


@functools.cache
def asset(name: str) -> bytes:
    """One file of core/dashboard/ as installed with the package, read once."""
    return importlib.resources.files("mq").joinpath("dashboard", name).read_bytes()


class HomeHandler(ApiHandler):
    """GET /: a redirect to the dashboard. Other methods on / are not this page's: they stay
    the JSON 404 of an unknown endpoint (POST / is left to an API that wants it)."""

    open_methods = frozenset({"GET", "HEAD"})

    def prepare(self) -> None:
        """Answer 404 to anything but GET and HEAD."""
        super().prepare()
        if self.request.method not in ("GET", "HEAD"):
            raise NotFound(f"no such endpoint: {self.request.method} /")

    def get(self) -> None:
        """302 to /_mq/dashboard."""
        self.redirect("/_mq/dashboard")

    head = get


class DashboardHandler(ApiHandler):
    """GET /_mq/dashboard and its files, /_mq/dashboard/{name}."""

    # Open: the files hold no data; the page asks for the statistics with the token typed in it.
    open_methods = frozenset({"GET"})

    def get(self, name: str | None = None) -> None:
        """The page (no name), or one of its files; 404 for any other name."""
        name = name or "index.html"
        if name not in ASSETS:
            raise NotFound(f"no such dashboard file: {name}")
        self.set_header("Content-Type", ASSETS[name])
        self.set_header("Cache-Control", "no-cache")
        self.finish(asset(name))
