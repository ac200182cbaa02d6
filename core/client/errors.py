"""The errors a client raises: one class per error kind of the HTTP API (docs/DELIVERY.md)."""


class ClientError(Exception):
    """A request mq refused or could not serve: its HTTP status, error kind and why."""

    status = 500
    kind = "internal"

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

    status, kind = 400, "invalid"


class UnauthorizedError(ClientError):
    """401: no bearer token, or one the daemon does not know."""

    status, kind = 401, "unauthorized"


class ForbiddenError(ClientError):
    """403: the token lacks the scope or the queue the request needs."""

    status, kind = 403, "forbidden"


class NotFoundError(ClientError):
    """404: the queue or the message does not exist."""

    status, kind = 404, "not_found"


class ConflictError(ClientError):
    """409: a stale receipt, or a message not in the state the request needs."""

    status, kind = 409, "conflict"


class TooLargeError(ClientError):
    """413: a body over the queue's size limit."""

    status, kind = 413, "too_large"


class UnavailableError(ClientError):
    """503: the change cannot be made durable now; retrying later may succeed."""

    status, kind = 503, "unavailable"


class ServerError(ClientError):
    """Any other 5xx: an internal or storage failure an operator must look at."""

    status, kind = 500, "internal"


_BY_STATUS = {cls.status: cls for cls in (InvalidError, NotFoundError, ConflictError,
                                          TooLargeError, UnavailableError, UnauthorizedError,
                                          ForbiddenError)}


def error_for(status: int, kind: str, message: str) -> ClientError:
    """The exception for an error answer: the class of its status (ServerError for other 5xx)."""
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ClientError)
    return cls(message, status, kind)
