"""Every front end against the model on a daemon started with --peers=1, as a daemon that
shares its root with mq.local or other daemons runs: the same rules, except that a fetch
takes one of the two oldest ready messages rather than the oldest."""

import pytest
from hypothesis.stateful import run_state_machine_as_test

from model_runs import machine_settings, machine_timeout, start_daemon
from fronts_more import Sqs, boto_client
from group_consumers import groups_across
from support import Daemon, poll_for
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


def start_peer(workdir, name: str):
    """A daemon with --peers=1 on the shared root workdir/root, its own files in workdir/name."""
    (workdir / name).mkdir()
    daemon = Daemon(workdir / "root", workdir / name, workers=2, timeout=60,
                    args=("--no-access-log", "--peers=1"))
    try:
        return daemon.start().wait_ready()
    except BaseException:
        daemon.cleanup()
        raise


@pytest.mark.timeout(120)
def test_two_daemons_on_one_root_hold_each_group_between_them(tmp_path):
    """Consumers of two daemons sharing a root never have one group's messages in flight on
    both at once, and each group is received in the order it was sent."""
    a, b = start_peer(tmp_path, "a"), start_peer(tmp_path, "b")
    try:
        model = groups_across({"a": a, "b": b})
        assert not model.broken, model.broken[:5]
        assert model.received == model.sent
    finally:
        a.cleanup()
        b.cleanup()


@pytest.mark.timeout(90)
def test_a_group_held_by_a_killed_daemon_frees_when_its_timer_runs_out(tmp_path):
    """kill -9 of the daemon whose consumer holds a group: the other daemon hands out none of
    the group while the delivery's timer runs, then the same message again, then the rest."""
    a, b = start_peer(tmp_path, "a"), start_peer(tmp_path, "b")
    try:
        sqs_a, sqs_b = (boto_client(f"http://127.0.0.1:{d.port}") for d in (a, b))
        url = sqs_a.create_queue(QueueName="killed.fifo", Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "true",
            "VisibilityTimeout": "3"})["QueueUrl"]
        for n in range(3):
            sqs_a.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g")
        url_b = sqs_b.get_queue_url(QueueName="killed.fifo")["QueueUrl"]
        held = sqs_a.receive_message(QueueUrl=url)["Messages"]
        assert [m["Body"] for m in held] == ["m0"]
        a.kill_tree()
        assert "Messages" not in sqs_b.receive_message(QueueUrl=url_b)  # Its timer still runs.

        def next_body():
            got = sqs_b.receive_message(QueueUrl=url_b, AttributeNames=["ApproximateReceiveCount"])
            return got["Messages"][0] if got.get("Messages") else None

        again = poll_for(next_body, 30, interval=0.2, what="m0 back after its timer")
        assert (again["Body"], again["Attributes"]["ApproximateReceiveCount"]) == ("m0", "2")
        for body in ("m1", "m2"):
            sqs_b.delete_message(QueueUrl=url_b, ReceiptHandle=again["ReceiptHandle"])
            again = poll_for(next_body, 10, interval=0.1, what=body)
            assert again["Body"] == body
    finally:
        a.cleanup()
        b.cleanup()
