"""The free space and free inodes of the root's file system, for /metrics, /_mq/stats and
StatsD: one statvfs(2) per second at most, however many scrapes ask."""

import os
import time

#: Seconds a reading serves.
CACHE_SECONDS = 1.0

_readings: dict[str, tuple[float, tuple[int, int] | None]] = {}


def free_space(root: str) -> tuple[int, int] | None:
    """(bytes, inodes) free to an unprivileged writer on the root's file system; None when it
    cannot be read (the root is away)."""
    now = time.monotonic()
    cached = _readings.get(root)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    try:
        st = os.statvfs(root)
        reading: tuple[int, int] | None = (st.f_bavail * st.f_frsize, st.f_favail)
    except OSError:
        reading = None
    _readings[root] = (now, reading)
    return reading


def root_figures(root: str) -> dict | None:
    """{"free_bytes", "free_inodes"} of the root's file system, as /_mq/stats and StatsD show
    them; None when it cannot be read."""
    free = free_space(root)
    return None if free is None else {"free_bytes": free[0], "free_inodes": free[1]}
