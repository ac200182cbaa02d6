"""Every front end against the model on a daemon started with --peers=1, as a daemon that
shares its root with mq.local or other daemons runs: the same rules, except that a fetch
takes one of the two oldest ready messages rather than the oldest."""

import pytest
from hypothesis.stateful import run_state_machine_as_test

from conftest import machine_settings, machine_timeout, start_daemon
from machines import machine_for
from test_model_fronts import FRONTS


@pytest.fixture(scope="module")
def peer_daemon(tmp_path_factory):
    """The module's daemon, with --peers=1."""
    daemon = start_daemon(tmp_path_factory.mktemp("model-peers"), "--peers=1")
    yield daemon
    daemon.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(machine_timeout())
@pytest.mark.parametrize("front", list(FRONTS))
def test_front_answers_as_the_model_says_beside_peers(peer_daemon, front):
    """Every answer of the front, and every file of the root after each step, is the model's
    (fetch order loosened as --peers loosens it)."""
    run_state_machine_as_test(machine_for(peer_daemon, FRONTS[front], loose_order=True),
                              settings=machine_settings())
