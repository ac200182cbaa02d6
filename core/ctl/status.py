"""status: a running daemon's processes (pid, role, uptime, restarts), its root and its queues,
from GET /_mq/health and GET /_mq/stats."""

import sys
import time
from typing import TYPE_CHECKING

import orjson

from mq.ctl.errors import OK, UNAVAILABLE, CtlError

if TYPE_CHECKING:
    import httpx  # Imported by status() itself: mqctl's other commands may not go over HTTP.

#: The queue table's columns: (heading, how a queue's statistics give the cell).
QUEUE_COLUMNS = (
    ("QUEUE", None),
    ("READY", lambda q: q["ready"]),
    ("DELAYED", lambda q: q["delayed"]),
    ("IN FLIGHT", lambda q: q["in_flight"]),
    ("DEAD", lambda q: q["dead"]),
    ("BYTES", lambda q: size(q.get("bytes", 0))),
    ("OLDEST", lambda q: duration(q["oldest_ready_age_s"])),
    ("ADDS", lambda q: q["totals"]["adds"]),
    ("FETCHES", lambda q: q["totals"]["fetches"]),
    ("ACKS", lambda q: q["totals"]["acks"]),
    ("NACKS", lambda q: q["totals"]["nacks"]),
    ("REDELIVERED", lambda q: q["totals"]["redeliveries"]),
    ("DEAD LETTERS", lambda q: q["totals"]["dead_letters"]),
    ("ADDS/S", lambda q: f"{q['rates']['adds']:.2f}"),
    ("FETCHES/S", lambda q: f"{q['rates']['fetches']:.2f}"),
)
#: What each kind of process does, for the ROLE column.
ROLES = {"mover": "times delay/", "reaper": "empties remove/", "fetch": "fetch actor",
         "save": "save actor", "front": "HTTP front"}


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration: 42s, 3m07s, 5h02m, 2d03h; '-' for None."""
    if seconds is None:
        return "-"
    seconds = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60),
                                      ("m", 60, "s", 1)):
        if seconds >= size:
            return f"{seconds // size}{unit}{(seconds % size) // sub_size:02d}{sub}"
    return f"{seconds}s"


def size(n: int) -> str:
    """Bytes as a short human size: 612 B, 4.1 KiB, 3.0 GiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def table(rows: list[list]) -> str:
    """Rows as left-aligned columns, two spaces apart; the first row is the heading."""
    texts = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in texts) for i in range(len(texts[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in texts)


def fetch_json(http: "httpx.Client", url: str) -> dict:
    """A JSON document of the daemon; health answers 503 with its body when a process is down."""
    from mq.client.calls import error_from

    response = http.get(url)
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise CtlError(f"{url}: answered {response.status_code} without JSON", UNAVAILABLE) from None
    if response.status_code != 200 and "children" not in body and "queues" not in body:
        # The kind's own exit status: a refused token is 6, a daemon that cannot answer 4.
        raise error_from(response)
    return body


def render(url: str, health: dict, stats: dict, now: float) -> str:
    """The report: the daemon line, the root's free space, the process table, the queue table."""
    lines = [f"mq at {url}: {health['status']}"
             + (f" (down: {', '.join(health['down'])})" if health["down"] else ""),
             f"root {health.get('root', '?')}, supervisor pid {health['supervisor_pid']}, up "
             + (duration(now - health["started"]) if "started" in health else "?")]
    # Older daemons' statistics have no "root"; None when the front could not read it.
    free = stats.get("root")
    lines.append("root's file system: " + (f"{size(free['free_bytes'])} free, {free['free_inodes']} "
                                           "inodes free" if free else "free space unknown"))
    silent = [name for name, state in stats["actors"].items() if state != "ok"]
    if silent:
        lines.append(f"not answering for statistics: {', '.join(silent)}")
    processes = [["PROCESS", "PID", "ROLE", "UP", "RESTARTS", "MEMORY"]]
    for child in health["children"]:
        up = duration(now - child["started"]) if child.get("alive") and "started" in child else "down"
        memory = f"{child['rss_bytes'] / 2**20:.1f} MiB" if "rss_bytes" in child else "-"
        processes.append([child["name"], child["pid"] or "-", ROLES.get(child["name"].split("-")[0], ""),
                          up, child["restarts"], memory])
    lines += ["", table(processes), ""]
    if stats["queues"]:
        queues = [[heading for heading, _ in QUEUE_COLUMNS]]
        for name, figures in stats["queues"].items():
            queues.append([name] + [cell(figures) for _, cell in QUEUE_COLUMNS[1:]])
        lines.append(table(queues))
    else:
        lines.append("no queues")
    return "\n".join(lines) + "\n"


def status(client, args) -> int:
    """Print the daemon's processes, root and queues; exit 4 when a process is down."""
    import httpx

    from mq.client.api import verifier

    if args.url is None:
        raise CtlError("status asks a running daemon: give --url (or $MQ_URL), not --root")
    base = args.url.rstrip("/")
    # The token and the authorities of every other command (--token, $MQ_TOKEN, --ca, $MQ_CA).
    headers = {"Authorization": f"Bearer {args.token.strip()}"} if args.token else {}
    try:
        trust = verifier(args.ca)
    except ValueError as err:
        raise CtlError(str(err)) from None
    with httpx.Client(timeout=args.timeout, headers=headers, verify=trust) as http:
        health = fetch_json(http, base + "/_mq/health")
        stats = fetch_json(http, base + "/_mq/stats")
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"health": health, "stats": stats}) + b"\n")
    else:
        sys.stdout.write(render(base, health, stats, time.time()))
    degraded = health["down"] or not stats["complete"]
    return UNAVAILABLE if degraded else OK
