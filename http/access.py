"""Access control (docs/OPERATIONS.md, "Access control"): who a request is (`authenticate`, which
ApiHandler.prepare calls for every route but its open methods), and the one check of what it
may do (`check`), which the queue service (http/service.py) makes for every operation, over
every front end: the token's scope, on every queue the operation touches.
"""

import ipaddress
from collections.abc import Iterable

from mq import logs
from mq.errors import Forbidden, Unauthorized
from mq.tokens import Token, TokenFile, find

#: The realm of every challenge.
REALM = 'Bearer realm="mq"'


def open_token_file(path: str) -> TokenFile | None:
    """The token file the front checks requests against, or None: access control is off."""
    if not path:
        return None
    log = logs.get()
    return TokenFile(path,
                     on_load=lambda tokens: log.info("access.tokens_loaded", path=path,
                                                     tokens=len(tokens)),
                     on_error=lambda why: log.error("access.tokens_refused", path=path,
                                                    error=why))


def exposed(host: str) -> bool:
    """True when the front listens on an address other hosts may reach."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # "", a host name: assume reachable.


def denied(cls, message: str, code: str = ""):
    """An Unauthorized or Forbidden error carrying its WWW-Authenticate challenge."""
    error = cls(message)
    error.challenge = f'{REALM}, error="{code}"' if code else REALM
    return error


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not header:
        return None
    scheme, _, secret = header.strip().partition(" ")
    secret = secret.strip()
    return secret if scheme.lower() == "bearer" and secret else None


def authenticate(tokens: TokenFile | None, header: str | None) -> Token | None:
    """The request's token (None when access control is off); Unauthorized when it has none
    or an unknown one."""
    if tokens is None:
        return None
    secret = bearer(header)
    if secret is None:
        raise denied(Unauthorized, "this daemon needs an Authorization: Bearer token")
    token = find(tokens.current(), secret)
    if token is None:
        raise denied(Unauthorized, "the bearer token is not valid", "invalid_token")
    return token


def check(token: Token | None, scope: str, queues: Iterable[str] | None) -> None:
    """The one access check of every front end (HTTP routes, MessagePack-RPC, SQS): Forbidden
    unless the token (None: access control is off) has `scope` and may use every queue the
    operation touches. queues None: an operation about every queue, which needs a token
    limited to no queues."""
    if token is None:
        return
    if not token.allows(scope):
        raise denied(Forbidden, f"token {token.name!r} lacks the {scope} scope",
                     "insufficient_scope")
    if queues is None:
        if not token.every_queue:
            raise denied(Forbidden, f"token {token.name!r} is limited to some queues; this "
                         "operation needs one for every queue", "insufficient_scope")
        return
    for queue in queues:
        if not token.allows_queue(queue):
            raise denied(Forbidden, f"token {token.name!r} may not use queue {queue!r}",
                         "insufficient_scope")


def allowed(token: Token | None, queues: list[str]) -> list[str]:
    """The queues of the list the token may use (all of them with access control off): what a
    pattern reaches, since the queues a token may not use are, for it, as if they did not
    exist."""
    return queues if token is None else [q for q in queues if token.allows_queue(q)]

