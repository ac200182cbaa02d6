"""The HTTP front: the application with every route, health, the OpenAPI document, the access
log, and serving until SIGTERM (the routes themselves: http/queues.py, http/messages.py)."""

import asyncio
import functools
import importlib.resources
import signal
import time

import orjson
import tornado.httpserver
import tornado.web

from mq import logs
from mq.errors import NotFound, Unavailable
from mq.http.actor_links import ActorPool
from mq.http.api import ApiHandler
from mq.http.messages import MessageHandler, MessagesHandler
from mq.http import sqs
from mq.http.queues import (DefaultRulesHandler, PeekHandler, PropertiesHandler, PurgeHandler,
                            QueueHandler, RedriveHandler)
from mq.store.root import health_path


class HealthHandler(ApiHandler):
    """GET /_mq/health: the supervisor's view of every process (pid, alive, restarts, memory)."""

    def initialize(self, pool: ActorPool, options, run_dir: str = "") -> None:
        """Also take the run folder, where the supervisor publishes health.json."""
        super().initialize(pool, options)
        self.run_dir = run_dir

    def get(self) -> None:
        """200 when every process is alive, 503 when one is down (being restarted)."""
        try:
            with open(health_path(self.run_dir), "rb") as f:
                health = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError):
            raise Unavailable("health not published yet") from None
        down = [c["name"] for c in health["children"] if not c["alive"] and c["name"] != "front-0"]
        health["status"] = "degraded" if down else "ok"
        health["down"] = down
        self.write_json(503 if down else 200, health)


@functools.cache
def openapi_document() -> bytes:
    """core/openapi.yaml as installed with the package, read once: the API of this very code."""
    return importlib.resources.files("mq").joinpath("openapi.yaml").read_bytes()


class OpenApiHandler(ApiHandler):
    """GET /_mq/openapi.yaml: the OpenAPI document of this API."""

    def get(self) -> None:
        """The document, as YAML."""
        self.set_header("Content-Type", "application/yaml")
        self.finish(openapi_document())


class NotFoundHandler(ApiHandler):
    """Any other path: a JSON 404."""

    def prepare(self) -> None:
        """Answer every method with 404."""
        super().prepare()
        raise NotFound(f"no such endpoint: {self.request.method} {self.request.path}")


#: The access log's logger, bound on its first line (after logs.configure) and kept.
ACCESS_LOG = logs.get("mq.access")


def log_request(handler: tornado.web.RequestHandler) -> None:
    """The access log: one line per request."""
    request = handler.request
    ACCESS_LOG.info(
        "http.request", method=request.method, path=request.path, status=handler.get_status(),
        ms=round(request.request_time() * 1000, 2), **getattr(handler, "log_fields", {}))


def make_app(pool: ActorPool, options, run_dir: str = "") -> tornado.web.Application:
    """The Tornado application with every route."""
    args = {"pool": pool, "options": options}
    name = r"([^/]+)"
    app = tornado.web.Application(
        [
            # The SQS API on the main port (--sqs-port 0): only requests meant for it match.
            *(sqs.routes(pool, options) if not options.sqs_port else []),
            (r"/_mq/properties", DefaultRulesHandler, args),
            (r"/_mq/health", HealthHandler, {**args, "run_dir": run_dir}),
            (r"/_mq/openapi\.yaml", OpenApiHandler, args),
            (rf"/{name}", QueueHandler, args),
            (rf"/{name}/messages", MessagesHandler, args),
            (rf"/{name}/messages/{name}", MessageHandler, args),
            (rf"/{name}/properties", PropertiesHandler, args),
            (rf"/{name}/redrive", RedriveHandler, args),
            (rf"/{name}/peek", PeekHandler, args),
            (rf"/{name}/purge", PurgeHandler, args),
        ],
        default_handler_class=NotFoundHandler,
        default_handler_args=args,
        log_function=log_request if options.access_log else (lambda handler: None),
    )
    app.in_flight = 0
    return app


async def serve(options, run_dir: str, drain_seconds: float = 10.0) -> None:
    """Run the front until SIGTERM, then stop accepting, finish what is in flight and return."""
    pool = ActorPool(options, run_dir)
    app = make_app(pool, options, run_dir)
    server = tornado.httpserver.HTTPServer(
        app, max_body_size=options.max_body_bytes + 1, idle_connection_timeout=60)
    server.listen(options.port, options.host)
    sqs_app = sqs_server = None
    if options.sqs_port:
        # The SQS API on a port of its own (--sqs-port); the drain waits for its requests too.
        sqs_app = tornado.web.Application(sqs.routes(pool, options), default_handler_class=NotFoundHandler,
                                          default_handler_args={"pool": pool, "options": options})
        sqs_app.in_flight = 0
        sqs_server = tornado.httpserver.HTTPServer(
            sqs_app, max_body_size=options.max_body_bytes + 1, idle_connection_timeout=60)
        sqs_server.listen(options.sqs_port, options.host)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # SIGINT (Ctrl-C reaches the whole group) is the supervisor's to turn into a SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.batch_lines(loop)
    logs.get().info("front.start", host=options.host, port=options.port)
    await stop.wait()
    server.stop()
    if sqs_server is not None:
        sqs_server.stop()
    deadline = time.monotonic() + drain_seconds
    while (app.in_flight or getattr(sqs_app, "in_flight", 0)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await server.close_all_connections()
    if sqs_server is not None:
        await sqs_server.close_all_connections()
    pool.close()
    logs.get().info("front.stop", unfinished=app.in_flight)
    logs.flush()
