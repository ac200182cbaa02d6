"""Health: the supervisor's health.json, read for GET /_mq/health, GET /health and /metrics."""

import os

import orjson

from mq.errors import Unavailable
from mq.store.root import health_path, standby_health_path
from mq.supervisor import heartbeat

#: The name "down" lists while the root's file system is away (docs/OPERATIONS.md).
ROOT_DOWN = "root"


def read_health(run_dir: str, front: str) -> dict:
    """health.json with "status" ("ok" or "degraded") and "down" (processes not alive, and
    "root" while the root is away) added; Unavailable while the supervisor has not published
    it yet. The front answering (named) is up by definition: health.json's row for it may lag
    a restart. The root's state is the shared memory's, fresher than the file's."""
    lost_since = heartbeat.root_lost_since()
    paths = [health_path(run_dir)]
    if lost_since:
        # With its socket folder under the root, the supervisor writes it there meanwhile (a
        # forked front's parent is the supervisor): read first, so that a root that hangs
        # rather than fails is not opened while the stand-in is there.
        paths.insert(0, standby_health_path(os.getppid()))
    health = None
    for path in paths:
        try:
            with open(path, "rb") as f:
                health = orjson.loads(f.read())
            break
        except (OSError, orjson.JSONDecodeError):
            continue
    if health is None and lost_since:
        # The moment before the supervisor's next write.
        health = {"supervisor_pid": os.getppid(), "children": []}
    if health is None:
        raise Unavailable("health not published yet")
    down = [c["name"] for c in health["children"] if not c["alive"] and c["name"] != front]
    if lost_since:
        down.append(ROOT_DOWN)
        # The supervisor's word on why comes with its next write: until then the error is None.
        health["root_state"] = {"error": None, **health.get("root_state", {}), "state": "lost",
                                "lost_since": lost_since}
    elif "root_state" in health:
        health["root_state"] = {"state": "ok", "lost_since": None, "error": None}
    health["status"] = "degraded" if down else "ok"
    health["down"] = down
    return health
