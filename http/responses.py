"""The HTTP responses a front sent, counted by status code, for GET /metrics.

Counted where Tornado calls the application's log function, once per finished request
(every route, errors included), so the count costs a dict add per request whatever
--access-log says. The counts live in the front's memory and start from zero with it, as
Prometheus expects of a counter; each front counts its own (docs/OPERATIONS.md, "Metrics").
"""

import collections
from collections.abc import Callable

#: Status code -> responses this front process sent with it.
COUNTS: collections.Counter = collections.Counter()


def counting(log: Callable | None) -> Callable:
    """A Tornado log_function that counts the response, then hands it to log (if any)."""
    def done(handler) -> None:
        """Count one finished request, then log it."""
        COUNTS[handler.get_status()] += 1
        if log is not None:
            log(handler)
    return done


def snapshot() -> dict[int, int]:
    """Status code -> responses sent so far, in code order."""
    return dict(sorted(COUNTS.items()))
