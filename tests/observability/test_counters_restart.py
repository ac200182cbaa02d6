"""The per-queue counters of /metrics and GET /_mq/stats never go down while the daemon runs:
an actor killed and restarted by the supervisor carries on from the totals it last showed (its
counters file in the run folder), and a file another daemon left there is not taken."""

import json
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mq.actors.counters import Counters, counters_file, daemon_identity
from support import poll_for, ready_daemon


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with one actor of each kind, so that every count of a queue is one actor's."""
    yield from ready_daemon(tmp_path_factory.mktemp("restart"), workers=1, timeout=30)


def counters(daemon, queue: str) -> dict:
    """{metric: value} of the queue's counters in one GET /metrics."""
    resp = daemon.request("GET", "/metrics")
    assert resp.status == 200
    return {s.name: s.value for family in text_string_to_metric_families(resp.body.decode())
            for s in family.samples
            if s.name.endswith("_total") and s.labels.get("queue") == queue}


def test_a_restarted_actor_carries_on_from_the_totals_it_showed(daemon):
    daemon.request("PUT", "/kept/properties", json.dumps({"retry": 0, "timeout": 0.2}).encode())
    for n in range(3):
        assert daemon.request("POST", "/kept/messages", b"m%d" % n).status == 201
    acked = daemon.fetch("kept")
    assert daemon.delete("kept", acked.header("X-Message-Id")).status == 204
    assert daemon.fetch("kept").status == 200  # Times out: the mover dead-letters it.
    want = {"mq_adds_total": 3, "mq_fetches_total": 2, "mq_acks_total": 1,
            "mq_dead_letters_total": 1}
    shown = poll_for(lambda: (c := counters(daemon, "kept")) and all(
        c[name] == n for name, n in want.items()) and c, 10, what=f"counters to be {want}")
    for actor in ("save-0", "fetch-0", "mover-0"):
        old = daemon.kill_child(actor)
        daemon.wait_for_new_pid(actor, old)
    poll_for(lambda: daemon.request("GET", "/_mq/stats").json()["complete"], 20,
             what="every actor to answer again")
    assert counters(daemon, "kept") == shown
    assert daemon.request("POST", "/kept/messages", b"after").status == 201
    assert counters(daemon, "kept")["mq_adds_total"] == 4


def test_counters_file_of_another_daemon_is_not_taken(tmp_path):
    path = counters_file(str(tmp_path), "save-0")
    with open(path, "w") as f:
        json.dump({"daemon": f"{os.getppid()}:before", "totals": {"q": {"adds": 5}}}, f)
    assert Counters(path=path).snapshot() == {}
    with open(path, "w") as f:
        json.dump({"daemon": daemon_identity(), "totals": {"q": {"adds": 5}}}, f)
    assert Counters(path=path).snapshot()["q"]["totals"] == {"adds": 5}


def test_a_forgotten_queue_leaves_the_counters_file(tmp_path):
    path = counters_file(str(tmp_path), "fetch-0")
    kept = Counters(path=path)
    kept.count("gone", "fetches")
    kept.count("stays", "acks", 2)
    kept.report()
    kept.forget("gone")
    assert set(kept.report()) == {"stays"}
    assert Counters(path=path).snapshot() == {"stays": {"totals": {"acks": 2},
                                                        "rates": {"acks": 0.0}}}
