"""A daemon started on a GlusterFS root reads the volume's replica layout from its client and
warns when a replica set has fewer than three copies (docs/CLUSTER.md, "Deploying on
GlusterFS"): in its log (supervisor.replica_check) and, sharing the root (--peers), in
health.json's "warnings". A replica 3 volume gets no warning. The replica 3 volume is the
session's (conftest.py); the replica 2 one is made here, by the session's glusterd.

Needs root and the packages `make test-packages` installs; skipped with one line otherwise.
"""

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from repo_support import bench_importable

bench_importable()

from cluster import Node  # noqa: E402
from cluster_fs import GlusterVolume  # noqa: E402
from workload import call  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("distributed-fs")  # One glusterd per host: one test at a time.
@pytest.mark.timeout(240)
@pytest.mark.parametrize("replica", [2, 3])
def test_a_root_with_fewer_than_three_copies_is_warned_about_at_start(tmp_path, replica,
                                                                      shared_volumes):
    shared = shared_volumes.get("glusterfs")
    with contextlib.ExitStack() as stack:
        volume = shared if shared.replica == replica else stack.enter_context(
            GlusterVolume(str(tmp_path), mounts=1, replica=replica))
        root = os.path.join(volume.mounts[0], tmp_path.name)
        node = Node("daemon", root, str(tmp_path), peers=1, timeout=3.0,
                    extra=(f"--run-dir={tmp_path / 'run'}",))
        made = subprocess.run([*node.argv, "--create-root"], capture_output=True, text=True,
                              timeout=60)
        assert made.returncode == 0, made.stderr
        node.start()
        try:
            node.wait_answering(60)
            health: dict = {}
            deadline = time.monotonic() + 30
            while "warnings" not in health:  # Until the supervisor's first health.json.
                assert time.monotonic() < deadline, f"no health.json served: {health}"
                time.sleep(0.2)
                _, _, body = call(node.port, "GET", "/_mq/health")
                health = json.loads(body) if body else {}
        finally:
            node.stop()
    events = [json.loads(line) for line in Path(node.log_path).read_text().splitlines()
              if "supervisor.replica_check" in line]
    assert len(events) == 1, events
    event, warnings = events[0], health["warnings"]
    assert event["layout"] != "unknown", event
    assert len(event["layout"]) == 1 and f": {replica} copies (" in event["layout"][0], event
    assert event["copies"] == replica, event
    if replica < 3:
        assert event["level"] == "warning" and "two consumers" in event["risk"], event
        assert len(warnings) == 1 and "2 copies" in warnings[0], warnings
    else:
        assert event["level"] == "info" and "risk" not in event, event
        assert warnings == [], warnings
