"""Children forked from the supervisor, which has imported every role's code once beforehand.

A child started as a new interpreter imports and compiles everything again and keeps its own
copy (about 15 MB each, 20 processes with the defaults). Forked from a supervisor that imported
the code once and froze those objects out of the garbage collector's reach, the children share
its pages (copy on write) and only what each one changes becomes its own.

The supervisor must stay fit to fork: one thread, no ZeroMQ context, no event loop; it only
imports. Each child runs mq.supervisor.child.run and leaves with os._exit, never returning into
the supervisor's code (its stack, its `finally` blocks and atexit handlers are the supervisor's).
"""

import ctypes
import gc
import importlib
import os
import signal
import subprocess
import sys
import time
import traceback

from mq import logs
from mq.config import Options
from mq.supervisor import heartbeat

#: What the roles import: the front (Tornado, asyncio ZeroMQ), the actors, and the store.
PRELOADED = ("mq.http.front", "mq.actors.fetch", "mq.actors.save", "mq.actors.mover",
             "mq.actors.reaper", "mq.supervisor.child")

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child: get SIGTERM when the supervisor dies, even by kill -9."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def preload() -> None:
    """Import every role's modules in this process, so that forked children share them."""
    for name in PRELOADED:
        importlib.import_module(name)
    # What is alive now (the modules, mostly) is left alone by the children's collector:
    # scanning it would write to, and so copy, every page they share with this process. Once
    # only, after a collection: what the supervisor makes later stays collectable.
    gc.collect()
    gc.freeze()


class ForkedChild:
    """A forked child process, with the part of subprocess.Popen's interface the tree uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status (minus the signal that killed it) once it has exited, else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # Already collected elsewhere: its status is lost.
                pid, status = self.pid, 255 << 8
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; raise subprocess.TimeoutExpired after timeout seconds."""
        started = time.monotonic()
        while (returncode := self.poll()) is None:
            if timeout is not None and time.monotonic() - started >= timeout:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.005)
        return returncode

    def send_signal(self, signum: int) -> None:
        """Signal the child, unless it has been collected (its pid may be another's now)."""
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


def fork_child(kind: str, index: int, run_dir: str, options: Options,
               slot: heartbeat.Slot | None = None) -> ForkedChild:
    """Fork a child that runs one role (mq.supervisor.child.run), beating into slot; in the
    parent, return it."""
    from mq.supervisor.child import run

    supervisor = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return ForkedChild(pid)
    code = 1
    try:
        die_with_parent()
        if os.getppid() != supervisor:  # It died before the line above took effect.
            os._exit(1)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        logs.forget_inherited()
        heartbeat.attach(slot)
        run(kind, index, run_dir, options)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            logs.flush()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
