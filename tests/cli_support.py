"""mq's commands run without paying their start: mqctl's main() in this process (run_ctl), and
a command's main() in a child forked from this process (run_forked).

Starting `mqctl` or `mq` costs the better part of a CPU second in imports alone, paid again at
every run; a main() called here pays them once. What the program reads from outside is passed
the same way a start would pass it: argv, stdin, the environment (`env` is the whole of
os.environ for the call, as subprocess's env= would be), and its exit status is main()'s
return or SystemExit's code (argparse's usage errors, --help, --version). Tests that need the
program itself (the console script, a pipe its reader closes, Ctrl-C, a terminal) start it as
a process: `MQCTL`.
"""

import io
import os
import select
import signal
import subprocess
import sys
import tempfile
import traceback

import mq.ctl.main

#: mqctl as a process, started with the interpreter running the tests (so PYTHONPATH applies).
MQCTL = [sys.executable, "-m", "mq.ctl.main"]


def exit_status(exit: SystemExit) -> int:
    """The status a process ends with for this SystemExit (a message goes to stderr, status 1)."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=sys.stderr)
    return 1


def run_ctl(argv: list, input: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    """mqctl's main(argv) in this process, with `input` on stdin (never a terminal) and `env`
    (default: this process's environment) as os.environ; the exit status and the bytes of
    stdout and stderr. A failure main() does not catch (a traceback in a real run) propagates."""
    argv = [str(arg) for arg in argv]
    stdin = io.TextIOWrapper(io.BytesIO(input), encoding="utf-8")
    # The encodings and error handlers of a process started with a UTF-8 locale.
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_environ = dict(os.environ)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        try:
            status = mq.ctl.main.main(argv)
        except SystemExit as exit:
            status = exit_status(exit)
        stdout.flush()
        stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_environ)
    return subprocess.CompletedProcess(argv, status, stdout.buffer.getvalue(),
                                       stderr.buffer.getvalue())


def run_forked(main, argv: list, env: dict, timeout: float = 30, cwd=None,
               merged: bool = False) -> subprocess.CompletedProcess:
    """main(argv) in a child forked from this process, with stdin from /dev/null, `env` as its
    whole environment, and stdout and stderr read back as text: what subprocess.run(...,
    capture_output=True, text=True) of the command gives, without its imports (merged: both
    into stdout, as stderr=subprocess.STDOUT; cwd: the child's working directory). A child that
    outlives the timeout is killed (subprocess.TimeoutExpired), as one that went on to start
    what it should have refused would be."""
    argv = [str(arg) for arg in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # The child: never back into pytest, whatever happens.
            status = 1
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno() if merged else err.fileno(), 2)
                if cwd is not None:
                    os.chdir(cwd)
                sys.stdin = io.TextIOWrapper(io.FileIO(0, closefd=False), encoding="utf-8")
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                              errors="backslashreplace", line_buffering=True)
                os.environ.clear()
                os.environ.update(env)
                try:
                    status = exit_status(SystemExit(main(argv)))  # As sys.exit(main()) ends.
                except SystemExit as exit:
                    status = exit_status(exit)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(status)
        exited = os.pidfd_open(pid)
        try:
            if not select.select([exited], [], [], timeout)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise subprocess.TimeoutExpired(argv, timeout)
        finally:
            os.close(exited)
        _, wait_status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(wait_status),
                                           out.read().decode(), err.read().decode())
