"""Every front end against the model, on one daemon alone on its root (--peers=0: strict
FIFO): mq's REST API one by one and in batches, MessagePack-RPC, the SQS API through boto3,
and mq.local on the daemon's root."""

import pytest
from hypothesis.stateful import run_state_machine_as_test

from model_runs import machine_settings, machine_timeout, start_daemon
from fronts import RestBatch, RestSingle, Rpc
from fronts_more import Local, Sqs
from machines import machine_for

FRONTS = {"rest": RestSingle, "rest_batch": RestBatch, "rpc": Rpc, "sqs": Sqs, "local": Local}
#: Examples per front in make test, each of up to model_runs.STEPS steps: 5 to 15 s a machine
#: on a busy 2-core machine, and every rule the front has runs in each run. An RPC or mq.local
#: step costs more than a REST one; SQS's timers are whole seconds (ten times the others' 0.1 s),
#: so its examples spend most of their time waiting. bench/model_soak.py runs many more.
EXAMPLES = {"rest": 8, "rest_batch": 8, "rpc": 6, "sqs": 3, "local": 6}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """The module's daemon."""
    daemon = start_daemon(tmp_path_factory.mktemp("model"))
    yield daemon
    daemon.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("front", [pytest.param(name, marks=pytest.mark.timeout(machine_timeout(n)))
                                   for name, n in EXAMPLES.items()])
def test_front_answers_as_the_model_says(daemon, front):
    """Every answer of the front, and every file of the root after each step, is the model's."""
    run_state_machine_as_test(machine_for(daemon, FRONTS[front]),
                              settings=machine_settings(EXAMPLES[front]))
