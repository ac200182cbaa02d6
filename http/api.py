"""ApiHandler: what every route shares (JSON errors through the status table of the error
kinds, the access log's fields, the queue service, the bearer token and the URL limit)."""

import functools
import time

import orjson
import tornado
import tornado.http1connection
import tornado.httputil
import tornado.web

from mq import logs
from mq import store as fmt
from mq.config import Options
from mq.errors import TABLE, Invalid, MqError, TooLong
from mq.http import access
from mq.http.disk_errors import disk_error
from mq.http.service import QueueService
from mq.tokens import Token, TokenFile

#: Error kind -> HTTP status, from the one table of kinds (mq.errors.TABLE).
STATUS = {kind.name: kind.status for kind in TABLE}

#: Tornado's own Server header.
SERVER = f"TornadoServer/{tornado.version}"


@functools.lru_cache(maxsize=1)
def _date_header(second: int) -> str:
    """The Date header of a whole second."""
    return tornado.httputil.format_timestamp(second)


def http_date(now: float) -> str:
    """The Date header for the time now, formatted once a second (Tornado formats it for every
    request: 3 us, 1-3 % of the front's CPU per add under py-spy)."""
    return _date_header(int(now))


def accepts(*names: str):
    """Declare the query parameters a handler method reads: ApiHandler refuses any other with
    400, so that a misspelled option is never silently ignored."""
    def declare(method):
        method.query_parameters = frozenset(names)
        return method
    return declare


def query_parameters(handler_class: type, method: str) -> frozenset[str]:
    """The query parameters the handler's method for an HTTP method declares (`accepts`)."""
    return getattr(getattr(handler_class, method.lower(), None), "query_parameters", frozenset())


class FrontApplication(tornado.web.Application):
    """A front's Tornado application, with what its handlers share."""

    def __init__(self, handlers: list, *, tokens: TokenFile | None, front_name: str = "",
                 **settings) -> None:
        super().__init__(handlers, **settings)
        #: Requests being handled now: a drain waits until none is left.
        self.in_flight = 0
        #: The front's process name, under which health.json lists it.
        self.front_name = front_name
        #: The bearer tokens requests are checked against; None: access control is off.
        self.tokens = tokens


class ApiHandler(tornado.web.RequestHandler):
    """Shared by every route: JSON error bodies, the access log fields, the queue service
    (http/service.py, the one way to the actors and the one access check), the bearer token
    (http/access.py) and the URL limit."""

    #: The HTTP methods any client may call without a token (health, the OpenAPI document).
    #: The others authenticate here, and the queue service checks what the token may do on
    #: the operation each method runs (http/service.py): the one access check.
    open_methods: frozenset = frozenset()
    #: The request's token once authenticated (None while access control is off).
    token: Token | None = None
    #: Every route of mq is served by a FrontApplication.
    application: FrontApplication
    #: Whether the query string holds only the parameters the method declares (`accepts`);
    #: off where another protocol owns it (the SQS API speaks AWS's query protocol as AWS does).
    checks_query = True

    def initialize(self, service: QueueService, options: Options) -> None:
        """Take the queue service (http/service.py) and the daemon's options."""
        self.service = service
        # Not self.options: that is the handler of the HTTP method OPTIONS.
        self.config = options
        self.log_fields: dict = {}

    def clear(self) -> None:
        """Reset the reply, as Tornado's clear() does, with the Date header of this second."""
        self._headers = tornado.httputil.HTTPHeaders({
            "Server": SERVER, "Content-Type": "text/html; charset=UTF-8",
            "Date": http_date(time.time())})
        self.set_default_headers()
        self._write_buffer: list[bytes] = []
        self._status_code = 200
        self._reason = tornado.httputil.responses[200]

    def prepare(self) -> None:
        """Count the request as in flight so a drain can wait for it; refuse a URL over the
        limit (414) and a request without a valid token (401)."""
        self.application.in_flight += 1
        self._counted = True
        if len(self.request.uri) > self.config.max_url_bytes:
            raise TooLong(f"URL of {len(self.request.uri)} bytes is over the limit of "
                          f"{self.config.max_url_bytes} bytes")
        self.authorize()
        if self.request.query and self.checks_query and self.serves(self.request.method):
            self.check_query()

    def check_query(self) -> None:
        """Invalid naming each query parameter the route's method does not declare."""
        accepted = query_parameters(type(self), self.request.method)
        unknown = sorted(set(self.request.query_arguments) - accepted)
        if unknown:
            raise Invalid(f"unknown query parameter {', '.join(map(repr, unknown))}: "
                          f"{self.request.method} {self.request.path} takes "
                          f"{', '.join(sorted(accepted)) or 'none'}")

    def authorize(self) -> None:
        """Authenticate the request's bearer token (401), unless its method is open. A method
        the route does not serve runs no operation: it needs the admin scope, so that only an
        admin learns that it is not served (405)."""
        if self.request.method in self.open_methods or self.application.tokens is None:
            return  # Open, or access control is off: no token to read.
        self.token = access.authenticate(self.application.tokens, self.header("Authorization"))
        if self.token is None:
            return  # (never: with a token file, authenticate returns a token or raises)
        self.log_fields["token"] = self.token.name
        if not self.serves(self.request.method):
            access.check(self.token, "admin", ())

    @classmethod
    def serves(cls, method: str) -> bool:
        """Whether the route has a handler of its own for the HTTP method."""
        name = method.lower()
        return getattr(cls, name, None) is not getattr(tornado.web.RequestHandler, name, None)

    def on_finish(self) -> None:
        """Uncount the request."""
        if getattr(self, "_counted", False):
            self.application.in_flight -= 1

    def http_connection(self) -> tornado.http1connection.HTTP1Connection:
        """The request's connection (its body limit, its socket)."""
        connection = self.request.connection
        assert isinstance(connection, tornado.http1connection.HTTP1Connection), \
            "Tornado's HTTPServer makes an HTTP1Connection for each request"
        return connection

    def compute_etag(self) -> None:
        """No ETag: a fetch is a state change, never a cacheable representation."""
        return None

    def queue_name(self, name: str) -> str:
        """The validated queue name from the path (the service checks the token on it)."""
        self.log_fields["queue"] = name
        return fmt.validate_queue(name)

    def header(self, name: str) -> str | None:
        """A request header's value (several joined by commas, as Tornado's `get` joins them),
        None when absent. Tornado's `get` finds a missing header by catching a KeyError, a
        microsecond each, and an add looks for six headers it rarely has."""
        values = self.request.headers.get_list(name)
        return ",".join(values) if values else None

    def param(self, query: str, header: str) -> str | None:
        """A request parameter from the query string, else from a header."""
        value = self.get_query_argument(query, None) if self.request.query else None
        return value if value is not None else self.header(header)

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
        if isinstance(error, OSError):  # A read of the root the front made itself.
            error = disk_error(error, "cannot read the root", self.config.root)
        if isinstance(error, MqError):
            status_code = STATUS.get(error.kind, 500)
            if error.retry_after is not None or status_code == 503:
                self.set_header("Retry-After", str(error.retry_after or 1))
            body = {"error": error.kind, "message": error.message}
            challenge = getattr(error, "challenge", None)  # Set by access.denied().
            if challenge:
                self.set_header("WWW-Authenticate", challenge)
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
        if isinstance(value, (MqError, tornado.web.HTTPError, OSError)):
            return  # An OSError is logged as front.disk_error by its answer (write_error).
        logs.get().error("front.error", path=self.request.path, exc_info=(typ, value, tb))
