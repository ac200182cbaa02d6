"""mqctl run in this process: its entry point called with a command line, standard input,
output and error as bytes, and the environment it would be started with.

Starting `mqctl` costs the better part of a CPU second in imports alone, paid again at every
run; its main() called here pays them once. What the program reads from outside is passed
the same way a start would pass it: argv, stdin (never a terminal), the MQ_* variables (the
environment is swapped for the call, so the test run's own MQ_URL or MQ_TOKEN reach it only
when passed on), and its exit status is main()'s return or SystemExit's code (argparse's usage
errors, --help, --version). A failure main() does not catch (a traceback in a real run)
propagates, so the test fails with it. Tests that need the program itself (the console
script, a pipe its reader closes, Ctrl-C, a terminal) start it as a process: `MQCTL`.
"""

import io
import os
import subprocess
import sys

import mq.ctl.main

#: mqctl as a process, started with the interpreter running the tests (so PYTHONPATH applies).
MQCTL = [sys.executable, "-m", "mq.ctl.main"]


def run_ctl(argv: list, input: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    """mqctl's main(argv) in this process, with `input` on stdin and `env` (default: this
    process's environment) as os.environ; the exit status and the bytes of stdout and stderr."""
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
        except SystemExit as exit:  # argparse: a usage error, --help, --version.
            code = exit.code
            status = code if isinstance(code, int) else 0 if code is None else 1
            if isinstance(code, str):
                print(code, file=sys.stderr)
        stdout.flush()
        stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_environ)
    return subprocess.CompletedProcess(["mqctl", *argv], status, stdout.buffer.getvalue(),
                                       stderr.buffer.getvalue())
