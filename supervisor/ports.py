"""The daemon's listening ports: each checked free, and held, before any front starts.

The fronts bind their ports with SO_REUSEPORT when there are several of them (and the RPC
server always may), so that the kernel spreads connections over them; but SO_REUSEPORT also
lets a socket join a port another program of the same user listens on with it, such as a
second mq daemon on another root, which would then take part of the first one's requests.
So the supervisor, before it starts a front, does two things for every port of
`Options.listeners`:

- It binds the port without SO_REUSEPORT (with SO_REUSEADDR, so a connection of an earlier
  daemon in TIME_WAIT does not count): that fails when anything at all listens there, mq or
  not, with or without SO_REUSEPORT.
- It binds an abstract Unix socket named after the address (Linux; it vanishes with the
  process, so a crash leaves nothing to clean) and keeps it for its life, alone: its forked
  children close their copies. Two daemons started at once could both find a port free,
  then both join it; the name can be bound by one of them only. A lock file would do the
  same, but where it lives would have to be agreed by every daemon of the host (TMPDIR
  differs between users and services), and the name's scope is exactly that of the ports:
  the network namespace.

The supervisor's own fronts never touch these sockets, so they go on sharing their ports.
"""

import errno
import os
import socket
import sys

from mq import logs
from mq.config import Options
from mq.errors import Invalid

#: The abstract socket name of a listening address (the leading NUL makes it abstract).
LOCK_NAME = "\0mq-listen-{address}-{port}"


class Locked(OSError):
    """The lock of a port is another daemon's."""


class Held:
    """The lock sockets of this daemon's ports, kept open for the supervisor's life."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        # Not in the forked children (the fronts, the actors): a child outliving a killed
        # supervisor, stuck in a file call that no signal ends (a FUSE request its file
        # system has taken), would hold them and refuse the daemon's restart until the call
        # returned. The fronts' own listening sockets keep a port from a second daemon.
        os.register_at_fork(after_in_child=self.close)

    def close(self) -> None:
        """Let the ports go (tests; the supervisor's exit does it too)."""
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def addresses(host: str, port: int) -> list[tuple]:
    """(family, type, proto, address) of every address host:port listens on."""
    return [(family, kind, proto, address) for family, kind, proto, _, address in
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)]


def lock(address: str, port: int) -> socket.socket | None:
    """Bind the abstract name of address:port; None where there are no abstract names."""
    if not sys.platform.startswith("linux"):
        return None  # Elsewhere the probe alone guards the port.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(LOCK_NAME.format(address=address, port=port))
    except OSError:
        sock.close()
        raise
    return sock


def probe(family: int, kind: int, proto: int, address: tuple) -> None:
    """Bind address without SO_REUSEPORT and let it go: OSError when anything holds it."""
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)


def hold_ports(options: Options, held: Held | None = None) -> Held:
    """Check every port of options.listeners() free and hold it (see above); log
    supervisor.port_in_use and raise Invalid naming the flag and the port of the first that
    is not."""
    held = held or Held()
    for flag, port in options.listeners():
        try:
            hold_port(options.host, port, held)
        except OSError as err:
            held.close()
            taken = err.errno == errno.EADDRINUSE
            why = ("another mq daemon holds it" if isinstance(err, Locked) else
                   "another program listens on it" if taken else err.strerror or str(err))
            logs.get().error("supervisor.port_in_use" if taken else "supervisor.port_refused",
                             flag=flag, host=options.host, port=port, error=why)
            raise Invalid(f"port {port} on {options.host} is in use ({flag}): {why}" if taken
                          else f"cannot listen on {options.host}:{port} ({flag}): {why}") from None
    return held


def hold_port(host: str, port: int, held: Held) -> None:
    """Lock then probe every address of host:port; Locked or OSError when it is taken."""
    for family, kind, proto, address in addresses(host, port):
        try:
            sock = lock(address[0], port)
        except OSError as err:
            raise (Locked(err.errno, err.strerror) if err.errno == errno.EADDRINUSE else err) from None
        if sock is not None:
            held.sockets.append(sock)
        probe(family, kind, proto, address)
