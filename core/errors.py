"""The kinds of failure that travel from actors to the front as values, and the one table
of how each face of mq reports each kind."""

import errno
import os
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict, TypeVar


@dataclass(frozen=True)
class Kind:
    """One kind of failure and its answer on each face of mq."""

    name: str
    #: The HTTP status the front answers with (mq.http.api.STATUS).
    status: int
    #: The SQS API's error for it: a name of mq.http.sqs.errors.ERRORS.
    sqs: str
    #: mqctl's exit status (mq.ctl.errors).
    exit: int


#: The one declaration of the error kinds: the front's statuses, the SQS API's errors, mqctl's
#: exit statuses, and the classes here and in mq.client.errors (one per kind) all derive from
#: it. docs/PROTOCOL.md shows it (its table of kinds); tests/frontends/test_error_kinds.py holds both.
TABLE = (
    #    kind            HTTP  SQS error                 mqctl exit
    Kind("invalid",      400, "InvalidParameterValue",   2),
    Kind("unauthorized", 401, "AccessDenied",            6),
    Kind("forbidden",    403, "AccessDenied",            6),
    Kind("not_found",    404, "QueueDoesNotExist",       3),
    Kind("conflict",     409, "InvalidParameterValue",   5),
    Kind("too_large",    413, "InvalidParameterValue",   2),
    Kind("too_long",     414, "InvalidParameterValue",   2),
    Kind("internal",     500, "InternalFailure",         5),
    Kind("storage",      500, "InternalFailure",         5),
    Kind("unavailable",  503, "ServiceUnavailable",      4),
)
BY_NAME = {kind.name: kind for kind in TABLE}


class Kinded(Protocol):
    """A class of one error kind: MqError here, ClientError in mq.client.errors."""

    kind: str


K = TypeVar("K", bound=Kinded)


def bind(classes: dict[str, type[K]], cls: type[K]) -> None:
    """Record cls in classes as the one class of its kind: a kind that TABLE does not declare,
    or a second class for one, is a TypeError at import."""
    if cls.kind not in BY_NAME:
        raise TypeError(f"{cls.__qualname__}: {cls.kind!r} is not a kind of mq.errors.TABLE")
    if cls.kind in classes:
        raise TypeError(f"{cls.__qualname__}: kind {cls.kind!r} already has "
                        f"{classes[cls.kind].__qualname__}")
    classes[cls.kind] = cls


#: kind -> its MqError class, filled as the classes below are defined.
KINDS: dict[str, type["MqError"]] = {}


class ErrorValue(TypedDict):
    """An error as a reply frame carries it (MqError.to_value, from_value)."""

    kind: str
    message: str
    retry_after: NotRequired[int]


class MqError(Exception):
    """Base of every failure mq reports to a client."""

    kind = "internal"

    def __init_subclass__(cls, **kwargs):
        """A subclass that sets `kind` becomes that kind's one class (see bind)."""
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            bind(KINDS, cls)

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def to_value(self) -> ErrorValue:
        """The error as a plain dict, the shape it has in a reply frame."""
        value: ErrorValue = {"kind": self.kind, "message": self.message}
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
    EPERM, ENOTDIR, ENAMETOOLONG: ERRNO_KINDS): an operator must look (it is logged)."""

    kind = "storage"


bind(KINDS, MqError)
if KINDS.keys() != BY_NAME.keys():
    raise TypeError(f"kinds without an MqError class: {sorted(BY_NAME.keys() - KINDS.keys())}")

#: errno -> kind of a failed disk operation outside a race (docs/PROTOCOL.md, the table of
#: kinds; docs/CLUSTER.md, "Errors and outages"). "storage" (500, logged) is kept for what an
#: operator must mend and no wait cures: the root's permissions, a name that is not a folder or
#: is too long, a link loop, another file system under the root. Every other errno, listed
#: here or not (DEFAULT_ERRNO_KIND), is a fault of the disk or of a network file system, and a
#: fault is "unavailable": 503 with Retry-After, never a 500.
ERRNO_KINDS = {
    # The operator's: the root's set-up, which mq cannot change and a retry would meet again.
    errno.EACCES: "storage", errno.EPERM: "storage", errno.ENOTDIR: "storage",
    errno.EISDIR: "storage", errno.ENAMETOOLONG: "storage", errno.ELOOP: "storage",
    errno.EXDEV: "storage", errno.EFBIG: "storage",
    # Local disks: full, quota, remounted read-only after errors, failing, out of resources.
    errno.ENOSPC: "unavailable", errno.EDQUOT: "unavailable", errno.EROFS: "unavailable",
    errno.EIO: "unavailable", errno.EAGAIN: "unavailable", errno.EMFILE: "unavailable",
    errno.ENFILE: "unavailable", errno.ENOMEM: "unavailable", errno.EINTR: "unavailable",
    errno.EBUSY: "unavailable", errno.ETIMEDOUT: "unavailable",
    # Network and FUSE file systems: the client lost its server or its FUSE daemon
    # (GlusterFS without quorum answers ENOTCONN; a dead FUSE daemon ENOTCONN too), a handle
    # the server no longer knows (ESTALE outside a race: a server restarted or failed over),
    # an unreachable or reset peer.
    errno.ENOTCONN: "unavailable", errno.ESTALE: "unavailable", errno.ECONNREFUSED: "unavailable",
    errno.ECONNRESET: "unavailable", errno.ECONNABORTED: "unavailable",
    errno.EHOSTDOWN: "unavailable", errno.EHOSTUNREACH: "unavailable",
    errno.ENETDOWN: "unavailable", errno.ENETUNREACH: "unavailable",
    errno.ENETRESET: "unavailable", errno.ENOLINK: "unavailable", errno.ECOMM: "unavailable",
    errno.EREMOTEIO: "unavailable",
    errno.ENODEV: "unavailable", errno.ENXIO: "unavailable", errno.EKEYEXPIRED: "unavailable",
    # A name mq made, missing outside the places where a peer may have taken it: a replicated
    # file system answering from a copy that missed it (a GlusterFS brick back from a kill),
    # or a metadata engine restarting (JuiceFS's Redis). The root itself gone is told apart
    # before the answer (Actor.recheck_root, http/disk_errors.py).
    errno.ENOENT: "unavailable",
}
#: The kind of an errno ERRNO_KINDS does not list: a fault nobody foresaw is still a fault.
DEFAULT_ERRNO_KIND = "unavailable"
#: errnos of a file system that is away (its server, quorum or FUSE daemon), rather than of a
#: disk that is full or broken: a daemon started meanwhile waits for it (supervisor/main.py).
OUTAGE_ERRNOS = frozenset({errno.ENOTCONN, errno.EIO, errno.ESTALE, errno.ETIMEDOUT,
                           errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED,
                           errno.EHOSTDOWN, errno.EHOSTUNREACH, errno.ENETDOWN,
                           errno.ENETUNREACH, errno.ENETRESET, errno.ENOLINK, errno.ECOMM,
                           errno.EREMOTEIO})
#: errnos of an open, read, rename or time change of a message file that a peer moved or
#: removed a moment before: the race is lost, the caller takes the next message. ENOENT: the
#: name is gone; ESTALE: a network file system's handle of a file unlinked meanwhile; EEXIST:
#: a rename that never replaces found the peer's new name (core/store/renames.py). Only where
#: the code expects a race; anywhere else each is what ERRNO_KINDS says (503).
LOST_RACE_ERRNOS = frozenset({errno.ENOENT, errno.ESTALE, errno.EEXIST})


def lost_race(err: OSError) -> bool:
    """True when a failed operation on a message file means a peer got there first."""
    return err.errno in LOST_RACE_ERRNOS


def errno_kind(err: OSError) -> str:
    """The kind of a failed disk operation outside a race (ERRNO_KINDS); an OSError without
    an errno is a fault too."""
    return ERRNO_KINDS.get(err.errno, DEFAULT_ERRNO_KIND) if err.errno else DEFAULT_ERRNO_KIND


def from_os_error(err: OSError, what: str) -> MqError:
    """The one translation of a failed disk operation into the error a client sees."""
    reason = os.strerror(err.errno) if err.errno else str(err)
    if errno_kind(err) == "unavailable":
        return Unavailable(f"{what}: {reason}", retry_after=1)
    return StorageFailure(f"{what}: {reason}")


def from_value(value: dict) -> MqError:
    """Rebuild an error from the dict a reply frame carried."""
    cls = KINDS.get(value.get("kind", ""), MqError)
    error = cls(value.get("message", "unknown error"))
    error.retry_after = value.get("retry_after")
    return error
