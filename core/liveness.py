"""Whether the process behind a name is still running: a daemon's supervisor, or the writer of
a file left in new/ (the 'w' header key). Only this host's processes can be judged."""

import os
import socket

import psutil


def supervisor_running_here(pid: int) -> bool:
    """Whether an mq supervisor of this host runs under pid.

    A zombie (killed, not yet reaped) does not count, nor another program that got the pid of
    a supervisor gone with a reboot: its run folder would otherwise block the root for good.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        words = proc.cmdline()
    except psutil.AccessDenied:
        return True  # Someone else's process (hidepid): cannot tell, so keep its folder.
    except psutil.Error:
        return False
    # Its title once started ("mq: supervisor [root] host:port"), or its command line before.
    return (" ".join(words).startswith("mq: supervisor") or "mq.supervisor.main" in words
            or any(os.path.basename(word) == "mq" for word in words[:2]))


def process_running(pid: int) -> bool:
    """Whether any process (not a zombie) runs under pid; True when it cannot be told."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False


def writer_is_dead(writer: str) -> bool:
    """True when the writer a file in new/ names is known to be gone: a broker-less process
    ('local/{host}-{pid}') or a daemon ('{host}-{pid}/save-{i}') of this host that no longer
    runs. Writers of other hosts, and files without a writer, are never judged dead."""
    local = writer.startswith("local/")
    owner = writer[len("local/"):] if local else writer.partition("/")[0]
    host, _, pid = owner.rpartition("-")
    if not writer or host != socket.gethostname() or not pid.isdigit():
        return False
    return not (process_running(int(pid)) if local else supervisor_running_here(int(pid)))
