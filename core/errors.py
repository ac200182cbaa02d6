"""The kinds of failure that travel from actors to the front as values."""

import errno
import os


class MqError(Exception):
    """Base of every failure mq reports to a client."""

    kind = "internal"

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def to_value(self) -> dict:
        """The error as a plain dict, the shape it has in a reply frame."""
        value = {"kind": self.kind, "message": self.message}
        if self.retry_after is not None:
            value["retry_after"] = self.retry_after
        return value


class NotFound(MqError):
    """Raised when a queue or message does not exist."""

    kind = "not_found"


class Invalid(MqError):
    """Raised when a request is malformed: a bad name, id, body or option."""

    kind = "invalid"


class Unavailable(MqError):
    """Raised when a change cannot be guaranteed durable now (disk full, I/O error, actor down)."""

    kind = "unavailable"

    def __init__(self, message: str, retry_after: int | None = 1):
        super().__init__(message, retry_after)


class Conflict(MqError):
    """Raised when a request conflicts with the current state."""

    kind = "conflict"


class TooLarge(MqError):
    """Raised when a body is over the size limit."""

    kind = "too_large"


class Unauthorized(MqError):
    """Raised when a request carries no bearer token, or one the token file does not hold."""

    kind = "unauthorized"


class Forbidden(MqError):
    """Raised when a request's token lacks the scope or the queue the request needs."""

    kind = "forbidden"


class TooLong(MqError):
    """Raised when a request's URL is over the length limit."""

    kind = "too_long"


class StorageFailure(MqError):
    """Raised when the disk refuses a change for a reason waiting will not cure (EACCES,
    EPERM, ENOTDIR, ENAMETOOLONG, ...): an operator must look (it is logged)."""

    kind = "storage"


KINDS = {cls.kind: cls for cls in (MqError, NotFound, Invalid, Unavailable, Conflict, TooLarge,
                                   StorageFailure, Unauthorized, Forbidden, TooLong)}

#: errnos that mean "cannot be stored now, try later" rather than "something is broken".
RETRYABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.EAGAIN,
                              errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ETIMEDOUT,
                              errno.EINTR, errno.EBUSY})


def from_os_error(err: OSError, what: str) -> MqError:
    """The one translation of a failed disk operation into the error a client sees."""
    reason = os.strerror(err.errno) if err.errno else str(err)
    if err.errno in RETRYABLE_ERRNOS:
        return Unavailable(f"{what}: {reason}", retry_after=1)
    return StorageFailure(f"{what}: {reason}")


def from_value(value: dict) -> MqError:
    """Rebuild an error from the dict a reply frame carried."""
    cls = KINDS.get(value.get("kind"), MqError)
    error = cls(value.get("message", "unknown error"))
    error.retry_after = value.get("retry_after")
    return error
