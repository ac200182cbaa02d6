"""The HTTP front: the application with every route, health, the OpenAPI document, the access
log, and serving until SIGTERM (the routes themselves: http/queues.py, http/messages.py)."""

import asyncio
import functools
import importlib.resources
import signal
import time

import tornado.httpserver
import tornado.ioloop
import tornado.web

from mq import event_loops, logs
from mq.config import Options
from mq.errors import NotFound
from mq.http import access, declared, listening, responses, sqs, tornado_io
from mq.http.actor_links import ActorPool
from mq.http.api import ApiHandler, FrontApplication
from mq.http.batches import AckBatchHandler
from mq.http.connection_timeouts import TimedHTTPServer
from mq.http.dashboard import DashboardHandler, HomeHandler
from mq.http.health import read_health
from mq.http.history import History, HistoryHandler
from mq.http.messages import MessageHandler, MessagesHandler
from mq.http.metrics import HealthCheckHandler, MetricsHandler
from mq.http.queues import (
    DefaultRulesHandler,
    PeekHandler,
    PropertiesHandler,
    QueueHandler,
    RedriveHandler,
)
from mq.http.routed import RoutedMessagesHandler
from mq.http.rpc_server import RpcServer
from mq.http.service import QueueService
from mq.http.stats import QueueListHandler, StatsHandler
from mq.http.statsd import StatsdSender
from mq.tokens import TokenFile

#: Bytes a connection's socket is read by at a time. Tornado's 64 KiB cost about 1.5 us to
#: allocate and zero per read, twice per request of a few hundred bytes (bench/RESULTS.md,
#: "CPU per add and per fetch+delete"); a large body takes more reads, of a copy each anyway.
READ_CHUNK_BYTES = 16 * 1024


class HealthHandler(ApiHandler):
    """GET /_mq/health: the supervisor's view of every process (pid, alive, restarts, memory)."""

    # Open: a load balancer probes it without a token, and it holds no message or queue name.
    open_methods = frozenset({"GET"})

    def initialize(self, service: QueueService, options: Options, run_dir: str = "") -> None:
        """Also take the run folder, where the supervisor publishes health.json."""
        super().initialize(service, options)
        self.run_dir = run_dir

    def get(self) -> None:
        """200 when every process is alive, 503 when one is down (being restarted)."""
        health = read_health(self.run_dir, self.application.front_name)
        self.write_json(503 if health["down"] else 200, health)


@functools.cache
def openapi_document() -> bytes:
    """core/openapi.yaml as installed with the package, read once: the API of this very code."""
    return importlib.resources.files("mq").joinpath("openapi.yaml").read_bytes()


class OpenApiHandler(ApiHandler):
    """GET /_mq/openapi.yaml: the OpenAPI document of this API."""

    # Open: the same document for every daemon of this version; it holds no data.
    open_methods = frozenset({"GET"})

    def get(self) -> None:
        """The document, as YAML."""
        self.set_header("Content-Type", "application/yaml")
        self.finish(openapi_document())


class NotFoundHandler(ApiHandler):
    """Any other path: a JSON 404."""

    def authorize(self) -> None:
        """Any valid token (or none with access control off) may learn that a path is unknown."""
        access.authenticate(self.application.tokens, self.request.headers.get("Authorization"))

    def prepare(self) -> None:
        """Answer every method with 404."""
        super().prepare()
        raise NotFound(f"no such endpoint: {self.request.method} {self.request.path}")


def log_request(handler: tornado.web.RequestHandler) -> None:
    """The access log: one line per request."""
    request = handler.request
    logs.info_line("http.request", {
        "method": request.method, "path": request.path, "status": handler.get_status(),
        "ms": round(request.request_time() * 1000, 2), **getattr(handler, "log_fields", {})})


def make_app(service: QueueService, options: Options, run_dir: str = "",
             index: int = 0, history: History | None = None) -> FrontApplication:
    """The Tornado application with every route, for front number index (history: the
    front's ring of samples that /_mq/history serves; none: an empty one)."""
    args = {"service": service, "options": options}
    name = r"([^/]+)"
    return FrontApplication(
        [
            # The SQS API on the main port (--sqs-port 0): only requests meant for it match.
            *(sqs.routes(service, options) if not options.sqs_port else []),
            # Adds, fetches, acks and deletes first: Tornado tries the routes in order, a regex
            # each (no route below matches a path of these shapes).
            (r"/_mq/messages", RoutedMessagesHandler, args),
            (rf"/{name}/messages", MessagesHandler, args),
            (rf"/{name}/messages/ack", AckBatchHandler, args),
            (rf"/{name}/messages/{name}", MessageHandler, args),
            # The routes the ops declare (http/declared.py): POST /{queue}/messages/{id}/move, ...
            *declared.routes(args),
            (r"/_mq/properties", DefaultRulesHandler, args),
            (r"/_mq/health", HealthHandler, {**args, "run_dir": run_dir}),
            (r"/_mq/openapi\.yaml", OpenApiHandler, args),
            (r"/_mq/stats", StatsHandler, args),
            (r"/_mq/queues", QueueListHandler, args),
            (r"/_mq/history", HistoryHandler, {**args, "history": history}),
            (r"/_mq/dashboard(?:/([^/]+))?", DashboardHandler, args),
            (r"/", HomeHandler, args),
            (r"/(metrics)", MetricsHandler, {**args, "run_dir": run_dir}),
            (r"/(health)", HealthCheckHandler, {**args, "run_dir": run_dir}),
            (rf"/{name}", QueueHandler, args),
            (rf"/{name}/properties", PropertiesHandler, args),
            (rf"/{name}/redrive", RedriveHandler, args),
            (rf"/{name}/peek", PeekHandler, args),
        ],
        default_handler_class=NotFoundHandler,
        default_handler_args=args,
        log_function=responses.counting(log_request if options.access_log else None),
        tokens=access.open_token_file(options.token_file),
        front_name=f"front-{index}",
    )


def http_server(app: FrontApplication, options: Options) -> tornado.httpserver.HTTPServer:
    """An HTTP server for app with the daemon's connection limits (HTTPS with --tls-cert)."""
    server = TimedHTTPServer(
        app, max_body_size=options.max_body_bytes + 1, max_header_size=options.max_header_bytes,
        idle_timeout=options.idle_timeout, body_timeout=options.body_timeout,
        ssl_options=options.server_tls())
    # Each connection's reads: Tornado makes a new zeroed buffer of this size for every read
    # of a socket (two per request, the second finding it drained), 64 KiB by default.
    server.read_chunk_size = READ_CHUNK_BYTES
    return server


def sqs_application(service: QueueService, options: Options, tokens: TokenFile | None) -> FrontApplication:
    """The SQS API alone, for --sqs-port: its routes, and a JSON 404 for any other request."""
    args = {"service": service, "options": options}
    return FrontApplication(sqs.routes(service, options), default_handler_class=NotFoundHandler,
                            default_handler_args=args,
                            log_function=responses.counting(
                                log_request if options.access_log else None),
                            tokens=tokens)


async def serve(options: Options, run_dir: str, drain_seconds: float = 10.0, index: int = 0) -> None:
    """Run front number index until SIGTERM, then stop accepting, finish what is in flight and
    return."""
    tornado_io.install()  # Before the servers ask Tornado for the loop.
    pool = ActorPool(options, run_dir, front=index)
    service = QueueService(pool, options)
    history = History(service, options.root)
    app = make_app(service, options, run_dir, index, history)
    # With several fronts each has its own listening socket on a port (SO_REUSEPORT), so the
    # kernel spreads new connections over them and no front wakes for another's.
    reuse = options.fronts > 1
    servers = [http_server(app, options)]
    apps = [app]
    if options.sqs_port:
        apps.append(sqs_application(service, options, app.tokens))
        servers.append(http_server(apps[1], options))
    rpc = RpcServer(service, options, app.tokens) if options.rpc_port else None
    port = options.port
    try:
        for server, port in zip(servers, (options.port, options.sqs_port)):
            server.listen(port, options.host, reuse_port=reuse)
        if rpc is not None:
            port = options.rpc_port
            await rpc.start()
    except OSError as err:
        # The supervisor checked the ports at start; one taken since (by another program
        # while this front restarted) is this line and exit status 2, not a traceback: the
        # supervisor restarts the front with its backoff, and gives up as for any crash loop.
        logs.get().error("front.listen_failed", host=options.host, port=port,
                         error=err.strerror or str(err), front=index)
        raise SystemExit(2) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # SIGINT (Ctrl-C reaches the whole group) is the supervisor's to turn into a SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.batch_lines(loop)
    logs.get().info("front.start", host=options.host, port=options.port, front=index,
                    access_control=app.tokens is not None, tls=bool(options.tls_cert),
                    event_loop=event_loops.running())
    if app.tokens is None and access.exposed(options.host):
        logs.get().warning("front.open_access", host=options.host)
    if index == 0:
        listening.announce(options)  # Once for the daemon, however many fronts it runs.
    # One front sends StatsD lines for the daemon: the statistics come from the shared actors.
    statsd = StatsdSender.start(service, options) if index == 0 else None
    # The per-queue tables of the front ends forget gone queues (at most every SWEEP_SECONDS).
    sweep = tornado.ioloop.PeriodicCallback(service.gone, 1000)
    sweep.start()
    history.start()
    await stop.wait()
    sweep.stop()
    history.stop()
    if statsd is not None:
        statsd.stop()
    for server in servers:
        server.stop()
    if rpc is not None:
        rpc.stop_accepting()
    # Waiting long polls are answered now (empty), not cut at the end of the drain.
    service.drain()

    def in_flight() -> int:
        return sum(a.in_flight for a in apps) + (rpc.in_flight if rpc is not None else 0)

    deadline = time.monotonic() + drain_seconds
    while in_flight() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    for server in servers:
        await server.close_all_connections()
    if rpc is not None:
        await rpc.close()
    pool.close()
    logs.get().info("front.stop", unfinished=in_flight())
    logs.flush()
