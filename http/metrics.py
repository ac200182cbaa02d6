"""GET /metrics (Prometheus text format) and GET /health, both made from the statistics and
the supervisor's health.json.

/metrics and /health are also queue names: these handlers answer GET, and PUT and DELETE of
a queue so named still work (its GET /{queue} figures are in GET /_mq/stats).
"""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from mq import event_loops
from mq.config import Options
from mq.errors import MqError
from mq.http import responses
from mq.http.health import read_health
from mq.http.queues import QueueHandler
from mq.http.root_space import free_space
from mq.operations import Stats
from mq.supervisor import heartbeat

#: (stats key, metric name, help) of the gauges per queue.
QUEUE_GAUGES = (
    ("ready", "mq_messages_ready", "Messages ready to be fetched."),
    ("delayed", "mq_messages_delayed", "Messages added with a delay that has not passed yet."),
    ("in_flight", "mq_messages_in_flight", "Messages fetched and neither acknowledged nor back yet."),
    ("dead", "mq_messages_dead", "Messages ready in the queue's dead-letter queue."),
    ("oldest_ready_age_s", "mq_oldest_ready_age_seconds",
     "Age of the oldest ready message (since it was added); absent when none is ready."),
    ("bytes", "mq_queue_bytes", "Bytes of the queue's message files (header and body), ready "
     "and in flight; a delayed add counts from when it falls due."),
)
#: (event, metric name without _total, help) of the counters per queue.
QUEUE_COUNTERS = (
    ("adds", "mq_adds", "Messages added (stored) since the save actors started."),
    ("fetches", "mq_fetches", "Messages handed out by fetches, redeliveries included."),
    ("acks", "mq_acks", "Messages acknowledged or deleted."),
    ("nacks", "mq_nacks", "Deliveries given back with a nack."),
    ("redeliveries", "mq_redeliveries", "Fetches of a message delivered before."),
    ("dead_letters", "mq_dead_letters", "Messages moved to their dead-letter queue."),
)


class Snapshot:
    """A Prometheus collector over one set of statistics and health.json, made per scrape."""

    def __init__(self, figures: dict, health: dict | None, front: str, root: str | None = None):
        self.figures = figures
        self.health = health
        self.front = front  # The front answering: up, whatever health.json says.
        self.root = root  # Whose file system's free space is shown, when given.

    def collect(self):
        """The metric families: per queue, per actor, per process."""
        queues = self.figures["queues"]
        for key, name, help_text in QUEUE_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=["queue"])
            for queue, entry in queues.items():
                if entry[key] is not None:
                    family.add_metric([queue], entry[key])
            yield family
        for event, name, help_text in QUEUE_COUNTERS:
            counter = CounterMetricFamily(name, help_text, labels=["queue"])
            for queue, entry in queues.items():
                counter.add_metric([queue], entry["totals"][event])
            yield counter
        up = GaugeMetricFamily("mq_actor_up", "1 when the actor answered for these statistics.",
                               labels=["actor"])
        for actor, state in self.figures["actors"].items():
            up.add_metric([actor], 1 if state == "ok" else 0)
        yield up
        flush = HistogramMetricFamily("mq_flush_seconds", "Time an actor's flushes took (syncfs, or "
                                      "the fsyncs of a batch's folders).", labels=["actor"])
        for actor, times in self.figures.get("flush", {}).items():
            buckets = [("+Inf" if bound is None else repr(float(bound)), n)
                       for bound, n in times["buckets"]]
            flush.add_metric([actor], buckets, times["sum_s"])
        yield flush
        codes = CounterMetricFamily("mq_http_responses", "HTTP responses this front sent, by status "
                                    "code.", labels=["front", "code"])
        for code, n in responses.snapshot().items():
            codes.add_metric([self.front, str(code)], n)
        yield codes
        info = GaugeMetricFamily("mq_front_info", "1, labelled with the front that answered and "
                                 "the asyncio event loop it runs on (--event-loop).",
                                 labels=["front", "event_loop"])
        info.add_metric([self.front, event_loops.running()], 1)
        yield info
        root = GaugeMetricFamily("mq_root_available", "1 while the root's file system is there "
                                 "(mounted, its FORMAT found); 0 while it is away and what needs "
                                 "it is refused with 503.")
        root.add_metric([], 0 if heartbeat.root_lost_since() else 1)
        yield root
        free = free_space(self.root) if self.root else None
        if free is not None:
            yield GaugeMetricFamily("mq_root_free_bytes", "Bytes free to mq on the root's file "
                                    "system (statvfs f_bavail, read at most once a second).",
                                    value=free[0])
            yield GaugeMetricFamily("mq_root_free_inodes", "Inodes free to mq on the root's file "
                                    "system (statvfs f_favail): every message is a file.",
                                    value=free[1])
        yield from self.process_families()

    def process_families(self):
        """Every process of the tree, as health.json (at most a second old) shows it."""
        if self.health is None:
            return
        rows = self.health["children"]
        alive = GaugeMetricFamily("mq_process_up", "1 when the process is running.", labels=["process"])
        restarts = CounterMetricFamily("mq_process_restarts", "Times the supervisor restarted it.",
                                       labels=["process"])
        hung = CounterMetricFamily(
            "mq_process_hung_restarts", "Times the supervisor killed and restarted it for going "
            "--hang-timeout without a turn of its loop (counted in mq_process_restarts too).",
            labels=["process"])
        memory = GaugeMetricFamily("mq_process_resident_memory_bytes", "Resident memory.",
                                   labels=["process"])
        cpu = CounterMetricFamily("mq_process_cpu_seconds", "User and system CPU time.",
                                  labels=["process"])
        for row in rows:
            name = row["name"]
            alive.add_metric([name], 1 if row["alive"] or name == self.front else 0)
            restarts.add_metric([name], row["restarts"])
            hung.add_metric([name], row.get("hung", 0))
            if "rss_bytes" in row:
                memory.add_metric([name], row["rss_bytes"])
                cpu.add_metric([name], row["cpu_s"])
        yield from (alive, restarts, hung, memory, cpu)


class MetricsHandler(QueueHandler):
    """GET /metrics: the statistics and process health in the Prometheus text format.

    PUT and DELETE /metrics still manage a queue named "metrics" (QueueHandler's)."""

    async def get(self, *_) -> None:
        """200 with every metric (docs/OPERATIONS.md lists them)."""
        figures = await self.service.run(self.token, Stats())
        try:
            health = read_health(self.run_dir, self.application.front_name)
        except MqError:
            health = None
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(generate_latest(Snapshot(figures, health, self.application.front_name,
                                             self.config.root)))

    def initialize(self, service, options: Options, run_dir: str = "") -> None:
        """Also take the run folder, where the supervisor publishes health.json."""
        super().initialize(service, options)
        self.run_dir = run_dir


class HealthCheckHandler(QueueHandler):
    """GET /health: 200 when the front and every actor are up, 503 naming what is down.

    PUT and DELETE /health still manage a queue named "health" (QueueHandler's)."""

    # Open, like /_mq/health: a load balancer probes it without a token.
    open_methods = frozenset({"GET"})

    def initialize(self, service, options: Options, run_dir: str = "") -> None:
        """Also take the run folder, where the supervisor publishes health.json."""
        super().initialize(service, options)
        self.run_dir = run_dir

    async def get(self, *_) -> None:
        """{"status": "ok"|"degraded", "down": [process names]}, 200 or 503.

        Down is what health.json (at most a second old) says is not alive, and every actor
        the front's link has no connection to right now (seen at once, through its monitor).
        """
        self.set_header("Cache-Control", "no-store")
        down = read_health(self.run_dir, self.application.front_name)["down"]
        down += [name for name in self.service.unreachable() if name not in down]
        if down:
            self.set_header("Retry-After", "1")
        self.write_json(503 if down else 200, {"status": "degraded" if down else "ok", "down": down})
