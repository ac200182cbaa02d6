"""The errors a client raises: one class per error kind of mq.errors.TABLE, whose status it
takes from there (the kinds of the HTTP API: docs/PROTOCOL.md, its table of kinds)."""

from mq.errors import BY_NAME, TABLE, bind

#: kind -> its ClientError class, filled as the classes below are defined.
CLASSES: dict[str, type["ClientError"]] = {}


class ClientError(Exception):
    """A request mq refused or could not serve: its HTTP status, error kind and why."""

    status = 500
    kind = "internal"

    def __init_subclass__(cls, **kwargs):
        """A subclass that sets `kind` becomes that kind's one class, with the kind's status."""
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            bind(CLASSES, cls)
            cls.status = BY_NAME[cls.kind].status

    def __init__(self, message: str, status: int | None = None, kind: str | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if kind is not None:
            self.kind = kind


class InvalidError(ClientError, ValueError):
    """400: a bad name, id, body, receipt or option; raised before sending for an argument
    the daemon would refuse (also a ValueError, what such a bad argument raised before)."""

    kind = "invalid"


class UnauthorizedError(ClientError):
    """401: no bearer token, or one the daemon does not know."""

    kind = "unauthorized"


class ForbiddenError(ClientError):
    """403: the token lacks the scope or the queue the request needs."""

    kind = "forbidden"


class NotFoundError(ClientError):
    """404: the queue or the message does not exist."""

    kind = "not_found"


class ConflictError(ClientError):
    """409: a stale receipt, or a message not in the state the request needs."""

    kind = "conflict"


class TooLargeError(ClientError):
    """413: a body over the queue's size limit."""

    kind = "too_large"


class TooLongError(ClientError):
    """414: a URL over the daemon's length limit (--max-url-bytes)."""

    kind = "too_long"


class UnavailableError(ClientError):
    """503: the change cannot be made durable now; retrying later may succeed."""

    kind = "unavailable"


class ServerError(ClientError):
    """500: an internal failure an operator must look at; also any other 5xx."""

    kind = "internal"


class StorageError(ServerError):
    """500: the disk refused a change for a reason waiting will not cure (an operator must look)."""

    kind = "storage"


if CLASSES.keys() != BY_NAME.keys():
    raise TypeError(f"kinds without a client class: {sorted(BY_NAME.keys() - CLASSES.keys())}")

#: HTTP status -> the class of the first kind in TABLE with it, for an answer whose kind is
#: unknown or does not fit its status (a proxy's, or the HTTP layer's).
_BY_STATUS: dict[int, type[ClientError]] = {}
for _kind in TABLE:
    _BY_STATUS.setdefault(_kind.status, CLASSES[_kind.name])


def error_for(status: int, kind: str | None, message: str) -> ClientError:
    """The exception for an error answer: the class of its kind when the status agrees, else
    the class of its status (ServerError for other 5xx, ClientError for other 4xx)."""
    cls = CLASSES.get(kind) if kind is not None else None
    if cls is None or cls.status != status:
        cls = _BY_STATUS.get(status, ServerError if status >= 500 else ClientError)
    return cls(message, status, kind)
