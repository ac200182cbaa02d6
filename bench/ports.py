"""Ports for the daemons a benchmark or a test starts, chosen so nothing takes them meanwhile.

A port the kernel picks with bind(0) is free when picked, but it comes from the ephemeral
range that every outgoing connection draws from too: between the pick and the daemon's own
bind, any client socket of any process (a parallel test making requests) may get it, and the
daemon then refuses to start ("port in use"). Ports below that range are never given to a
client, so each process takes them from its own block there, one after the other, and checks
that nothing listens on each before handing it out.
"""

import functools
import itertools
import os
import random
from collections.abc import Iterator

from mq.supervisor.ports import Held, hold_port

#: The lowest port handed out: above the registered ports most local services use and above
#: every port browsers refuse to open (Chromium's and Firefox's highest is 10080), so the
#: dashboard's tests can browse any daemon.
FIRST_PORT = 10_100
#: How many ports each process has to itself.
BLOCK = 400
#: Blocks for pytest-xdist workers (gw0, gw1, ...), by number; other processes hash their pid
#: onto the blocks above them.
WORKER_BLOCKS = 16


def ephemeral_start() -> int:
    """The first port of the kernel's range for outgoing connections (32768 by default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def own_block() -> range:
    """This process's ports: its xdist worker's block, or one its pid picks among the rest."""
    blocks = (ephemeral_start() - FIRST_PORT) // BLOCK
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit() and blocks > WORKER_BLOCKS:
        index = int(worker[2:]) % WORKER_BLOCKS
    elif blocks > WORKER_BLOCKS:
        index = WORKER_BLOCKS + os.getpid() % (blocks - WORKER_BLOCKS)
    else:
        index = os.getpid() % max(blocks, 1)
    start = FIRST_PORT + index * BLOCK
    return range(start, start + BLOCK)


def listenable(port: int) -> bool:
    """True when a daemon could listen on 127.0.0.1:port now, by the daemon's own check (no
    daemon holds it; SO_REUSEADDR: a connection of an earlier daemon waiting out TIME_WAIT
    does not count)."""
    held = Held()
    try:
        hold_port("127.0.0.1", port, held)
    except OSError:
        return False
    finally:
        held.close()
    return True


@functools.cache
def cursor() -> tuple[range, Iterator[int]]:
    """This process's block and the count that walks it (from a random place, so two processes
    whose pids pick one block rarely meet)."""
    block = own_block()
    return block, itertools.count(random.randrange(len(block)))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no client connection can take."""
    block, count = cursor()
    for _ in range(len(block)):
        port = block[next(count) % len(block)]
        if listenable(port):
            return port
    raise OSError(f"no free port in {block.start}-{block.stop - 1}")
