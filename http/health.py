"""Health: the supervisor's health.json, read for GET /_mq/health, GET /health and /metrics."""

import orjson

from mq.errors import Unavailable
from mq.store.root import health_path


def read_health(run_dir: str, front: str) -> dict:
    """health.json with "status" ("ok" or "degraded") and "down" (processes not alive) added;
    Unavailable while the supervisor has not published it yet. The front answering (named)
    is up by definition: health.json's row for it may lag a restart."""
    try:
        with open(health_path(run_dir), "rb") as f:
            health = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        raise Unavailable("health not published yet") from None
    down = [c["name"] for c in health["children"] if not c["alive"] and c["name"] != front]
    health["status"] = "degraded" if down else "ok"
    health["down"] = down
    return health
