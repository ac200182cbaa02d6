"""Three daemons on one root under producers and consumers while actors and daemons are
killed with kill -9, paused with SIGSTOP and restarted: after a drain through every daemon,
nothing acknowledged is lost, nothing unexpected or corrupted arrives, every duplicate
delivery follows a timer, and no request is answered 500 (bench/total_queue.py; bench/chaos.py
runs the same for longer; tests/cluster/ on GlusterFS and JuiceFS, their servers killed too)."""


import pytest

from repo_support import bench_importable

bench_importable()

from chaos import run  # noqa: E402
from cluster_run import server_errors  # noqa: E402
from total_queue import MUST_BE_ZERO, table  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_cluster_under_kills_and_pauses_loses_nothing_acknowledged(tmp_path):
    # Movers list delay/ every second (--peer-rescan), not 5: the drain waits that long for
    # what a killed daemon had in flight. Faults go on until each kind was made (the nemesis
    # makes every kind once a round, in a random order), five in all, and more adds than
    # asserted were acknowledged, and stop then: the drain checks what they left, and more
    # of them only repeat kinds already checked (bench/chaos.py runs for minutes).
    counts = run(seconds=2, workdir=str(tmp_path), daemons=3, timeout=2.0, fault_interval=1.0,
                 adds_per_second=30, say=lambda line: None, peer_rescan=1.0,
                 every_fault=True, min_faults=5, min_adds=120)
    faults = counts.pop("faults")
    counts.pop("client errors")
    statuses = counts.pop("statuses")
    shown = f"faults {faults}\nanswers {statuses}\n{table(counts)}"
    assert counts.pop("drained"), f"the cluster did not drain\n{shown}"
    assert counts["acknowledged adds"] > 100, shown
    assert sum(faults.values()) >= 5, shown
    assert set(faults) == {"kill actor", "pause process", "pause daemon", "kill daemon"}, shown
    for name in MUST_BE_ZERO:
        assert counts[name] == 0, f"{name}\n{shown}"
    assert server_errors(statuses) == 0, f"answered 500\n{shown}"
