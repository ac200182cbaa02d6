"""Three daemons on a real distributed file system, each on its own mount (its own client, as
another host would have): GlusterFS (replica 2, two bricks on this host) and JuiceFS (Redis
metadata, a local folder as its object store). Producers and consumers talk to any daemon
while actors and daemons are killed with kill -9; after a drain, nothing acknowledged is lost,
nothing unexpected or corrupted arrives, no message goes to two consumers within its timer,
and no request is answered 500 (bench/cluster_run.py runs the same for longer).

Needs root and the packages `make test-packages` installs; skipped with one line otherwise.
"""

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, os.path.abspath(BENCH))

from cluster_fs import VOLUMES  # noqa: E402
from cluster_run import run, server_errors  # noqa: E402
from total_queue import MUST_BE_ZERO, table  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")  # One glusterd per host: one test at a time.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(VOLUMES))
def test_three_daemons_on_three_mounts_hand_each_message_to_one_consumer_at_a_time(tmp_path, kind):
    volume_class = VOLUMES[kind]
    if (why := volume_class.missing()):
        pytest.skip(why)
    with volume_class(str(tmp_path)) as volume:
        counts = run(volume, seconds=30, workdir=str(tmp_path), timeout=3.0, fault_interval=3.0,
                     adds_per_second=20, say=lambda line: None)
    faults, statuses = counts.pop("faults"), counts.pop("statuses")
    counts.pop("client errors")
    errors = "\n".join(counts.pop("error lines"))
    shown = f"faults {faults}\nanswers {statuses}\n{table(counts)}\n{errors}"
    assert counts.pop("drained"), f"the cluster did not drain\n{shown}"
    assert counts["acknowledged adds"] > 100, shown
    assert sum(faults.values()) >= 3, shown
    for name in MUST_BE_ZERO:
        assert counts[name] == 0, f"{name}\n{shown}"
    assert server_errors(statuses) == 0, f"answered 500\n{shown}"
