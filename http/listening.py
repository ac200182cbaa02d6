"""The line a person reads when mq has started: where it listens, its dashboard, its root and
how many processes it runs.

It is a structlog event like every other (front.listening, its text in `message`), so the log
stays JSON lines; when standard error is a terminal (mq started by hand) the text is also
written there, plain.
"""

import sys

from mq import logs
from mq.config import Options


def base_url(options: Options) -> str:
    """http(s)://host:port of the HTTP port, IPv6 hosts in brackets."""
    host = f"[{options.host}]" if ":" in options.host else options.host
    return f"{'https' if options.tls_cert else 'http'}://{host}:{options.port}"


def processes(options: Options) -> int:
    """The processes the supervisor runs: the mover, the reaper, W fetch and W save actors,
    the fronts."""
    return 2 + 2 * options.workers + options.fronts


def announce(options: Options) -> None:
    """Log front.listening (and write its text to standard error when that is a terminal)."""
    url = base_url(options)
    count = processes(options)
    message = (f"mq listening on {url}/ (dashboard {url}/_mq/dashboard), root {options.root}, "
               f"{count} processes")
    logs.get().info("front.listening", message=message, url=f"{url}/",
                    dashboard=f"{url}/_mq/dashboard", root=options.root, processes=count)
    if sys.stderr.isatty():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
