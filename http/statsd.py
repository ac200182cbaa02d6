"""StatsD output: with --statsd HOST:PORT, the front sends the statistics as StatsD lines over
UDP every --statsd-interval seconds: each queue's depths and bytes as gauges, its events as
counters (what happened since the previous send), and the root's free bytes and inodes."""

import asyncio
import socket

from mq import logs
from mq.config import Options
from mq.http.figures import DEPTHS
from mq.http.root_space import root_figures
from mq.operations import Stats

#: The segment after the prefix of the root's figures: '_mq' is no queue's name (reserved),
#: and no queue's metric name either ('.' and ':' become '_').
ROOT_SEGMENT = "_mq"

#: Largest datagram sent: lines are packed, newline-separated, up to this many bytes (a
#: common path MTU less headers, so no datagram is fragmented).
MAX_DATAGRAM = 1400


def metric_name(queue: str) -> str:
    """A queue name as one StatsD path segment ('.' separates segments, ':' ends the name)."""
    return queue.replace(".", "_").replace(":", "_")


def statsd_lines(figures: dict, prefix: str, previous: dict) -> list[str]:
    """The StatsD lines of one set of statistics; `previous` holds the totals last sent, and is
    updated (a total lower than before means the queue was deleted and made again: all of it
    is new)."""
    lines = []
    for queue, entry in figures["queues"].items():
        path = f"{prefix}.{metric_name(queue)}"
        for depth in DEPTHS:
            lines.append(f"{path}.{depth}:{entry[depth]}|g")
        lines.append(f"{path}.bytes:{entry['bytes']}|g")
        if entry["oldest_ready_age_s"] is not None:
            lines.append(f"{path}.oldest_ready_age_ms:{round(entry['oldest_ready_age_s'] * 1000)}|g")
        for event, total in entry["totals"].items():
            before = previous.get((queue, event), 0)
            delta = total - before if total >= before else total
            previous[(queue, event)] = total
            if delta:
                lines.append(f"{path}.{event}:{delta}|c")
    if figures.get("root") is not None:
        for key in ("free_bytes", "free_inodes"):
            lines.append(f"{prefix}.{ROOT_SEGMENT}.root_{key}:{figures['root'][key]}|g")
    return lines


def datagrams(lines: list[str]) -> list[bytes]:
    """Lines packed into datagrams of at most MAX_DATAGRAM bytes."""
    packed, current = [], b""
    for line in lines:
        data = line.encode()
        if current and len(current) + 1 + len(data) > MAX_DATAGRAM:
            packed.append(current)
            current = b""
        current = current + b"\n" + data if current else data
    if current:
        packed.append(current)
    return packed


def parse_address(text: str) -> tuple[str, int]:
    """(host, port) of 'HOST:PORT' ('[v6]:PORT' too); ValueError when it is not one."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class StatsdSender:
    """The front's task that sends the statistics to a StatsD server."""

    @classmethod
    def start(cls, service, options: Options) -> "StatsdSender | None":
        """A running sender when --statsd is set, else None."""
        if not options.statsd:
            return None
        return cls(service, parse_address(options.statsd), options.statsd_interval,
                   options.statsd_prefix, options.root)

    def __init__(self, service, address: tuple[str, int], interval: float, prefix: str,
                 root: str | None = None):
        self.service = service
        self.root = root  # Whose file system's free space is sent, when given.
        self.interval = interval
        self.prefix = prefix
        family, _, _, _, sockaddr = socket.getaddrinfo(*address, type=socket.SOCK_DGRAM)[0]
        self.address = sockaddr
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.previous: dict = {}
        self.log = logs.get()
        service.keep(self)
        self.task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        """Send once at start (the counters' baseline), then every interval."""
        first = True
        while True:
            try:
                figures = await self.service.run(None, Stats())
                figures["root"] = root_figures(self.root) if self.root else None
                lines = statsd_lines(figures, self.prefix, self.previous)
                if first:  # Totals from before this front started are not news.
                    lines = [line for line in lines if not line.endswith("|c")]
                first = False
                for datagram in datagrams(lines):
                    self.sock.sendto(datagram, self.address)
            except OSError as err:  # Nobody listening (ICMP refused), a full buffer: next time.
                self.log.debug("statsd.unsent", error=str(err))
            await asyncio.sleep(self.interval)

    def queue_tables(self) -> dict:
        """The queues whose totals were sent."""
        return {"statsd": {queue for queue, _ in self.previous}}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop the totals sent of queues that are gone."""
        self.previous = {key: total for key, total in self.previous.items() if key[0] not in gone}

    def stop(self) -> None:
        """Stop sending."""
        self.task.cancel()
        self.sock.close()
