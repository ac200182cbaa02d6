"""The consumers a front sees: per queue, the client connections that fetched from it in the
last minute (GET /{queue}/messages, long polls and batch fetches included), for the statistics'
`clients` figure and the dashboard.

A client is one connection (its address and port): a consumer that keeps its connection open
counts once however often it fetches, one that opens a connection per fetch counts once per
connection. Each front counts the connections it serves.
"""

import time

#: Seconds a client counts after its last fetch.
WINDOW_SECONDS = 60.0


class Clients:
    """queue -> {client: monotonic time of its last fetch}, pruned when counted."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, float]] = {}

    def seen(self, queue: str, client: str) -> None:
        """A client fetched from the queue now (one dictionary store: on every fetch's path)."""
        clients = self._seen.get(queue)
        if clients is None:
            clients = self._seen[queue] = {}
        clients[client] = time.monotonic()

    def counts(self) -> dict[str, int]:
        """How many distinct clients fetched from each queue in the last WINDOW_SECONDS; drops
        the older ones (the statistics ask at least every HISTORY_SECONDS, http/history.py)."""
        since = time.monotonic() - WINDOW_SECONDS
        counted = {}
        for queue in list(self._seen):
            clients = self._seen[queue]
            for client in [c for c, last in clients.items() if last < since]:
                del clients[client]
            if clients:
                counted[queue] = len(clients)
            else:
                del self._seen[queue]
        return counted

    def queue_tables(self) -> dict:
        """The queues this table holds, by its name (the sweep of gone queues)."""
        return {"clients": self._seen.keys()}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop the queues that are gone."""
        for queue in gone:
            self._seen.pop(queue, None)
