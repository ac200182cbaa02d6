"""A real daemon per module for the model's state machines, and how long they run.

MQ_MODEL_EXAMPLES and MQ_MODEL_STEPS set the examples per machine and the steps per example
(bench/model_soak.py raises them); without them each machine runs the examples its test gives
(test_model_fronts.EXAMPLES), 5 to 15 s a machine in make test.
"""

import os
import socket

from hypothesis import HealthCheck, Phase, Verbosity, settings

from support import Daemon, free_port, poll_for

#: Seconds a delivery stays hidden unless a rule shortens it (machine.LONG, as --timeout).
TIMEOUT = 600


#: Most steps of one example unless MQ_MODEL_STEPS says.
STEPS = 30


def examples(default: int) -> int:
    """Examples per machine: MQ_MODEL_EXAMPLES (a soak), else the machine's own default."""
    return int(os.environ.get("MQ_MODEL_EXAMPLES", default))


def machine_settings(default_examples: int) -> settings:
    """The hypothesis settings of a machine: few examples in make test, more in a soak."""
    return settings(max_examples=examples(default_examples),
                    stateful_step_count=int(os.environ.get("MQ_MODEL_STEPS", STEPS)),
                    deadline=None, database=None,
                    verbosity=Verbosity.verbose if os.environ.get("MQ_MODEL_VERBOSE") else Verbosity.normal,
                    # Shrinking replays steps on a live daemon for minutes: a soak asks for it.
                    phases=[Phase.explicit, Phase.reuse, Phase.generate]
                    + ([Phase.shrink] if os.environ.get("MQ_MODEL_SHRINK") else []),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def machine_timeout(default_examples: int) -> int:
    """pytest-timeout's limit for one machine: MQ_MODEL_TIMEOUT, else room for its examples."""
    default = 120 + 40 * examples(default_examples)
    return int(os.environ.get("MQ_MODEL_TIMEOUT", default))


def start_daemon(workdir, *args) -> Daemon:
    """A ready daemon on workdir/root with the RPC server on a free port; its rpc_port set."""
    rpc_port = free_port()
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=TIMEOUT,
                    args=("--no-access-log", f"--rpc-port={rpc_port}", *args))
    daemon.rpc_port = rpc_port
    try:
        daemon.start()
        daemon.wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
    except BaseException:
        daemon.cleanup()
        raise
    return daemon
