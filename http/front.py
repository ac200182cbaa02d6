"""The HTTP front: routes, each request sent to the actor that owns it, and the status table."""

import asyncio
import base64
import socket
import functools
import importlib.resources
import signal
import time

import orjson
import tornado.httpserver
import tornado.web

from mq import logs
from mq import store as fmt
from mq.adds import check_add
from mq.errors import Invalid, MqError, NotFound, TooLarge, Unavailable
from mq.http.actor_links import ActorPool
from mq.numbers import parse_number
from mq.schedule import due_time
from mq.store.root import health_path

#: The one table from error kind to HTTP status.
STATUS = {
    "invalid": 400,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "internal": 500,
    "storage": 500,
    "unavailable": 503,
}


#: Seconds between checks that the client of a waiting long poll is still connected.
CLIENT_CHECK_SECONDS = 0.5

#: The connection's own body limit for a chunked add: MessagesHandler enforces the real one.
UNLIMITED_CHUNKED_BODY = 1 << 62


class ApiHandler(tornado.web.RequestHandler):
    """Shared by every route: JSON error bodies, the access log fields, the actor pool."""

    def initialize(self, pool: ActorPool, options) -> None:
        """Take the pool of actor links and the daemon's options."""
        self.pool = pool
        # Not self.options: that is the handler of the HTTP method OPTIONS.
        self.config = options
        self.log_fields: dict = {}

    def prepare(self) -> None:
        """Count the request as in flight so a drain can wait for it."""
        self.application.in_flight += 1
        self._counted = True

    def on_finish(self) -> None:
        """Uncount the request."""
        if getattr(self, "_counted", False):
            self.application.in_flight -= 1

    def compute_etag(self) -> None:
        """No ETag: a fetch is a state change, never a cacheable representation."""
        return None

    def queue_name(self, name: str) -> str:
        """The validated queue name from the path."""
        self.log_fields["queue"] = name
        return fmt.validate_queue(name)

    def param(self, query: str, header: str) -> str | None:
        """A request parameter from the query string, else from a header."""
        value = self.get_query_argument(query, None)
        return value if value is not None else self.request.headers.get(header)

    def json_body(self):
        """The request body parsed as JSON, or Invalid."""
        try:
            return orjson.loads(self.request.body)
        except orjson.JSONDecodeError as err:
            raise Invalid(f"body is not valid JSON: {err}") from None

    def write_json(self, status: int, value) -> None:
        """Answer with a JSON body."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(orjson.dumps(value))

    def write_error(self, status_code: int, **kwargs) -> None:
        """Every error reply has a JSON body: {"error": kind, "message": why}."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, MqError):
            status_code = STATUS.get(error.kind, 500)
            if error.retry_after is not None or status_code == 503:
                self.set_header("Retry-After", str(error.retry_after or 1))
            body = {"error": error.kind, "message": error.message}
        elif isinstance(error, tornado.web.HTTPError):
            body = {"error": "invalid" if status_code < 500 else "internal",
                    "message": error.log_message or self._reason}
        else:
            body = {"error": "internal", "message": "internal error"}
        self.clear_header("X-Message-Id")
        self.set_status(status_code)
        self.set_header("Content-Type", "application/json")
        self.finish(orjson.dumps(body))

    def log_exception(self, typ, value, tb) -> None:
        """Expected errors are answers, not crashes: only log what was not an MqError."""
        if isinstance(value, (MqError, tornado.web.HTTPError)):
            return
        logs.get().error("front.error", path=self.request.path, exc_info=(typ, value, tb))


class QueueHandler(ApiHandler):
    """GET, PUT and DELETE /{queue}."""

    async def get(self, name: str) -> None:
        """200 when the queue exists, 404 when not."""
        queue = self.queue_name(name)
        result = await self.pool.fetcher(queue).call("queue_get", queue=queue)
        self.write_json(200, result)

    async def put(self, name: str) -> None:
        """Create the queue: 201 when created, 200 when it already existed."""
        queue = self.queue_name(name)
        result = await self.pool.fetcher(queue).call("queue_put", queue=queue)
        self.write_json(201 if result["created"] else 200, {"queue": queue, "created": result["created"]})

    async def delete(self, name: str) -> None:
        """Delete the queue and all its messages, in every state: 204."""
        queue = self.queue_name(name)
        await self.pool.fetcher(queue).call("queue_delete", queue=queue)
        self.set_status(204)
        self.finish()


@tornado.web.stream_request_body
class MessagesHandler(ApiHandler):
    """GET and POST /{queue}/messages.

    The body is streamed in, so that one over --max-body-bytes gets a JSON 413 from here
    rather than the bare 400 Tornado's connection gives a body over its own limit.
    """

    def prepare(self) -> None:
        """Refuse a declared Content-Length over the limit before reading the body."""
        super().prepare()
        self.chunks: list[bytes] = []
        self.received = 0
        length = self.request.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.config.max_body_bytes:
            # Let the connection take in (and drop) the rest, then close after the 413.
            self.request.connection.set_max_body_size(int(length))
            raise TooLarge(f"body of {length} bytes is over the limit of "
                           f"{self.config.max_body_bytes} bytes")
        if not length:
            # A chunked body declares no length: data_received counts it, so that one over
            # the limit gets this JSON 413, not the bare 400 of the connection's own limit.
            self.request.connection.set_max_body_size(UNLIMITED_CHUNKED_BODY)

    def data_received(self, chunk: bytes) -> None:
        """Collect the body; answer 413 as soon as a chunked one passes the limit."""
        if self._finished:
            return
        self.received += len(chunk)
        if self.received > self.config.max_body_bytes:
            self.chunks = []
            error = TooLarge(f"chunked body over the limit of {self.config.max_body_bytes} bytes")
            # Tornado stops passing the body on once the reply is finished, and closes the
            # connection after it.
            self.send_error(413, exc_info=(TooLarge, error, None))
            return
        self.chunks.append(chunk)

    async def post(self, name: str) -> None:
        """Add a message: 201 with X-Message-Id once durable; 200 for a duplicate's first id."""
        queue = self.queue_name(name)
        body = b"".join(self.chunks)
        if len(body) > self.config.max_body_bytes:
            raise TooLarge(f"body of {len(body)} bytes is over the limit of "
                           f"{self.config.max_body_bytes} bytes")
        now = time.time()
        add = check_add(queue, body, self.request.headers.get("Content-Type"),
                        due_time(self.param("delay", "X-Delay"), self.param("at", "X-At"), now),
                        self.param("dedup_id", "X-Dedup-Id"), now)
        result = await self.pool.saver().call("add", queue=add.queue, body=add.body,
                                              content_type=add.content_type, due=add.due,
                                              dedup_id=add.dedup_id or None)
        message_id = result["id"]
        self.log_fields["id"] = message_id
        self.set_header("X-Message-Id", message_id)
        self.set_header("Location", f"/{queue}/messages/{message_id}")
        reply = {"id": message_id, "queue": queue}
        if result.get("due"):
            reply["due"] = result["due"]
        if result.get("duplicate"):
            self.set_header("X-Duplicate", "true")
            reply["duplicate"] = True
        self.write_json(200 if result.get("duplicate") else 201, reply)

    async def get(self, name: str) -> None:
        """Fetch the oldest ready message, waiting up to ?wait=N seconds; 204 when there is none."""
        queue = self.queue_name(name)
        wait = parse_number("wait", self.param("wait", "X-Wait"), 0.0)
        fetcher = self.pool.fetcher(queue)
        self.poll = None
        watch = asyncio.ensure_future(self.watch_client(wait)) if wait > 0 else None
        try:
            result = await fetcher.call("fetch", queue=queue, wait=wait,
                                        timeout=wait + self.config.actor_timeout,
                                        on_sent=lambda rid: setattr(self, "poll", (fetcher, rid)))
        finally:
            if watch is not None:
                watch.cancel()
        if result.get("cancelled"):
            return  # The client went away while waiting: there is no one to answer.
        if result.get("empty"):
            self.set_status(204)
            self.finish()
            return
        self.log_fields["id"] = result["id"]
        self.set_header("X-Message-Id", result["id"])
        self.set_header("X-Receipt", result["receipt"])
        self.set_header("X-Attempts", str(result["attempts"]))
        self.set_header("Content-Type", result["content_type"])
        self.set_header("Cache-Control", "no-store")
        self.finish(result["body"])


    async def watch_client(self, wait: float) -> None:
        """While a long poll waits, look every CLIENT_CHECK_SECONDS whether its client hung up
        (Tornado reads nothing during a request, so it would not notice), and cancel the poll:
        its fetch actor then claims no message for nobody (hidden for a whole timer)."""
        sock = self.request.connection.stream.socket
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            await asyncio.sleep(CLIENT_CHECK_SECONDS)
            try:
                closed = sock is None or sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                closed = False  # Open, nothing sent: still waiting.
            except OSError:
                closed = True
            if closed and self.poll is not None:
                self.poll[0].cancel(self.poll[1])
                return


class MessageHandler(ApiHandler):
    """DELETE /{queue}/messages/{id}, and POST /{queue}/messages/{id}?reply=ack|nack|ext."""

    REPLIES = {"ack": "ack", "nack": "nack", "ext": "extend", "extend": "extend"}

    async def delete(self, name: str, message_id: str) -> None:
        """Remove the message from whatever state it is in: 204; 404 unknown; 409 stale receipt."""
        queue = self.queue_name(name)
        self.log_fields["id"] = message_id
        fmt.validate_id(message_id)
        receipt = self.param("receipt", "X-Receipt")
        op = "ack" if receipt else "delete"
        await self.pool.fetcher(queue).call(op, queue=queue, id=message_id, receipt=receipt)
        self.set_status(204)
        self.finish()

    async def post(self, name: str, message_id: str) -> None:
        """Reply to a delivery: ack deletes, nack makes it ready now, ext extends its timer."""
        queue = self.queue_name(name)
        self.log_fields["id"] = message_id
        fmt.validate_id(message_id)
        reply = self.get_query_argument("reply", None)
        if reply not in self.REPLIES:
            raise Invalid("reply must be one of ack, nack, ext")
        seconds = parse_number("seconds", self.get_query_argument("seconds", None), None)
        result = await self.pool.fetcher(queue).call(
            self.REPLIES[reply], queue=queue, id=message_id,
            receipt=self.param("receipt", "X-Receipt"), seconds=seconds)
        if reply in ("ext", "extend"):
            self.set_header("X-Receipt", result["receipt"])
            self.write_json(200, {"id": message_id, "due": result["due"]})
            return
        if result.get("dead_letter"):
            self.write_json(200, {"id": message_id, "dead_letter_queue": result["dead_letter"]})
            return
        self.set_status(204)
        self.finish()


class RedriveHandler(ApiHandler):
    """POST /{queue}/redrive: move the queue's dead letters back into it."""

    async def post(self, name: str) -> None:
        """Answer how many messages came back."""
        queue = self.queue_name(name)
        self.write_json(200, await self.pool.fetcher(queue).call("redrive", queue=queue))


class PeekHandler(ApiHandler):
    """GET /{queue}/peek?max=N&after=ID: the oldest ready messages, none claimed."""

    async def get(self, name: str) -> None:
        """Up to max (default 10) messages, bodies in base64, oldest first."""
        queue = self.queue_name(name)
        count = parse_number("max", self.get_query_argument("max", None), 10, int, 1)
        after = self.get_query_argument("after", None)
        result = await self.pool.fetcher(queue).call("peek", queue=queue, max=count, after=after)
        for message in result["messages"]:
            message["body"] = base64.b64encode(message["body"]).decode()
        self.write_json(200, {"queue": queue, "messages": result["messages"]})


class PurgeHandler(ApiHandler):
    """POST /{queue}/purge: remove every message of the queue, keep the queue."""

    async def post(self, name: str) -> None:
        """Answer how many messages went."""
        queue = self.queue_name(name)
        self.write_json(200, await self.pool.fetcher(queue).call("purge", queue=queue))


class PropertiesHandler(ApiHandler):
    """GET|PUT|PATCH|DELETE /{queue}/properties."""

    async def props(self, name: str, op: str, value=None) -> None:
        queue = self.queue_name(name)
        result = await self.pool.fetcher(queue).call(op, queue=queue, properties=value)
        self.write_json(200, {"queue": queue, "properties": result["effective"], "own": result["own"]})

    async def get(self, name: str) -> None:
        """The queue's effective properties and the ones set on it."""
        await self.props(name, "props_get")

    async def put(self, name: str) -> None:
        """Replace the queue's own properties."""
        await self.props(name, "props_put", self.json_body())

    async def patch(self, name: str) -> None:
        """Change some of the queue's own properties."""
        await self.props(name, "props_patch", self.json_body())

    async def delete(self, name: str) -> None:
        """Reset the queue's own properties (rules and system defaults apply again)."""
        await self.props(name, "props_delete")


class DefaultRulesHandler(ApiHandler):
    """GET|PUT|DELETE /_mq/properties: the ordered [regex, properties] default rules."""

    async def get(self) -> None:
        """The rules."""
        self.write_json(200, (await self.pool.fetchers[0].call("rules_get"))["rules"])

    async def put(self) -> None:
        """Replace the rules."""
        self.write_json(200, (await self.pool.fetchers[0].call("rules_put", rules=self.json_body()))["rules"])

    async def delete(self) -> None:
        """Remove every rule."""
        self.write_json(200, (await self.pool.fetchers[0].call("rules_delete"))["rules"])


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
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # SIGINT (Ctrl-C reaches the whole group) is the supervisor's to turn into a SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.batch_lines(loop)
    logs.get().info("front.start", host=options.host, port=options.port)
    await stop.wait()
    server.stop()
    deadline = time.monotonic() + drain_seconds
    while app.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await server.close_all_connections()
    pool.close()
    logs.get().info("front.stop", unfinished=app.in_flight)
    logs.flush()
