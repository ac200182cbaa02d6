"""Every front end against the model on a daemon started with --peers=1, as a daemon that
shares its root with mq.local or other daemons runs: the same rules, except that a fetch
takes one of the two oldest ready messages rather than the oldest."""

import pytest
from hypothesis.stateful import run_state_machine_as_test

from model_runs import machine_settings, machine_timeout, start_daemon
from fronts_more import Sqs
from machines import machine_for
from test_model_fronts import EXAMPLES, FRONTS


@pytest.fixture(scope="module")
def peer_daemon(tmp_path_factory):
    """The module's daemon, with --peers=1."""
    daemon = start_daemon(tmp_path_factory.mktemp("model-peers"), "--peers=1")
    yield daemon
    daemon.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("front", [pytest.param(name, marks=pytest.mark.timeout(machine_timeout(n)))
                                   for name, n in EXAMPLES.items()])
def test_front_answers_as_the_model_says_beside_peers(peer_daemon, front):
    """Every answer of the front, and every file of the root after each step, is the model's
    (fetch order loosened as --peers loosens it)."""
    run_state_machine_as_test(machine_for(peer_daemon, FRONTS[front], loose_order=True),
                              settings=machine_settings(EXAMPLES[front]))


def test_a_group_is_served_in_order_beside_peers(peer_daemon):
    """A fifo queue's group, fetched and acked one message at a time with --peers=1, comes in
    the order it was sent (the fetch's spread must not pass over the group's oldest)."""
    sqs = Sqs(peer_daemon)
    sqs.create_queue("peers-group.fifo", {"timeout": 600, "retry": -1})
    sent = [sqs.add("peers-group.fifo", f"m{n}", group="g").id for n in range(10)]
    received = []
    for _ in sent:
        got = sqs.fetch("peers-group.fifo")
        assert len(got) == 1, received
        received.append(got[0].id)
        assert sqs.reply("peers-group.fifo", got[0].id, got[0].receipt, "ack") == "ok"
    assert received == sent
