"""Telling at once a client that does not speak HTTP: another protocol's client pointed at the
HTTP port by mistake (a TLS ClientHello, a Redis `PING`, a beanstalk `put`).

Tornado reads a request's line and headers until a blank line, which such a client never
sends: the connection would wait out the idle timeout. The first read of each connection
also stops at a first byte no request line starts with, or at a whole first line that is not
one (`METHOD target HTTP/1.x`); Tornado then fails to parse it and answers 400 and closes,
and the connection is logged once (front.not_http, with the peer and its first bytes).
"""

import re

from mq import logs

#: What a request's line and headers end with (Tornado's own pattern).
HEADERS_END = b"\r?\n\r?\n"
#: A token character (RFC 9110): every method is made of them.
TOKEN = rb"!#$%&'*+\-.^_`|~0-9A-Za-z"
#: The start of what no HTTP/1 client sends: after any empty lines, a byte no method starts
#: with, or a whole first line that is not a request line. A partial first line never matches.
NOT_A_REQUEST = re.compile(
    rb"\A[\r\n]*(?:[^\r\n" + TOKEN + rb"][\s\S]*|(?![" + TOKEN + rb"]+ \S+ HTTP/1\.\d\r?\n)"
    rb"[^\r\n][^\n]*\n)")
FIRST_READ = re.compile(NOT_A_REQUEST.pattern + rb"|" + HEADERS_END)
#: How many of its first bytes the log shows, in hex.
SHOWN_BYTES = 16


def guard(stream, address) -> None:
    """Make the connection's first read of a request's head also stop at what is not HTTP."""
    read_until_regex = stream.read_until_regex

    def first_read(regex, max_bytes=None):
        """The first head: read with FIRST_READ; later ones with Tornado's pattern again."""
        del stream.read_until_regex  # Back to the class's method for the next requests.
        if regex != HEADERS_END:
            return read_until_regex(regex, max_bytes=max_bytes)
        future = read_until_regex(FIRST_READ, max_bytes=max_bytes)
        future.add_done_callback(lambda done: log_if_not_http(done, address))
        return future

    stream.read_until_regex = first_read


def log_if_not_http(done, address) -> None:
    """Log the connection when its first read ended at what is not HTTP."""
    if done.cancelled() or done.exception() is not None:
        return
    data = done.result()
    if NOT_A_REQUEST.match(data):
        logs.get().info("front.not_http", peer=peer_name(address),
                        first_bytes=bytes(data[:SHOWN_BYTES]).hex())


def peer_name(address) -> str:
    """host:port of a peer ([host]:port for IPv6), or what the server was given."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)
