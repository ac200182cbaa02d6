"""mqctl's exit statuses, and the one line it prints for a failure."""

import sys

from mq.errors import TABLE

OK, NOTHING, USAGE, NOT_FOUND, UNAVAILABLE, FAILED, REFUSED = 0, 1, 2, 3, 4, 5, 6
#: The reader of standard output went away (`mqctl tail -f q | head`): the shell's 128 + SIGPIPE.
READER_GONE = 141
INTERRUPTED = 130

#: The end of `mqctl --help`; docs/COMMANDS.md, "mqctl", repeats it.
EPILOG = """\
exit status:
  0  done
  1  nothing: get or peek found no message, or delete was not confirmed
  2  usage or invalid input (an option, a queue name, a record, a body or a URL over the limit)
  3  not found: no such queue, message or root folder
  4  unavailable: the daemon or the root could not take the request (after retries), or no FORMAT in --root
  5  any other error the daemon or the root reported (a stale receipt, a storage failure)
  6  refused: no token, an unknown token, or one without the scope or the queue (401, 403)
"""

#: The exit status of each error kind of mq.client.errors and mq.errors (both carry `.kind`),
#: from the one table of kinds; each is one of the statuses above.
BY_KIND = {kind.name: kind.exit for kind in TABLE}


class CtlError(Exception):
    """A failure mqctl finds itself (an unreadable input, a bad record), with its exit status."""

    def __init__(self, message: str, status: int = USAGE):
        super().__init__(message)
        self.message = message
        self.status = status


def lost_connection(err: BaseException) -> bool:
    """Whether err is httpx's refused or cut connection (httpx is loaded only by a command that
    goes over HTTP, and mqctl's work on a root spares its import)."""
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(err, httpx.TransportError)


def status_of(err: BaseException) -> int:
    """The exit status for a failure."""
    if isinstance(err, CtlError):
        return err.status
    if lost_connection(err):  # Refused or cut connections, once retries are spent.
        return UNAVAILABLE
    return BY_KIND.get(getattr(err, "kind", ""), FAILED)


def describe(err: BaseException) -> str:
    """A failure as one line of text, without the `mqctl: ` prefix."""
    if isinstance(err, OSError) and err.strerror:
        where = err.filename if err.filename is not None else ""
        return f"{where}: {err.strerror}" if where else err.strerror
    message = getattr(err, "message", None)
    if isinstance(message, str) and message:
        text = message
    elif lost_connection(err):
        text = f"cannot reach the daemon: {err or type(err).__name__}"
    else:
        text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return " ".join(text.split())  # One line, whatever the server's message held.
