"""Helpers for the reliable-delivery tests (docs/DELIVERY.md), on top of support.py's real daemon.

`shared_mq` is one daemon per test module (each test uses its own queue names), so that the
many short tests do not each pay for a start; tests that kill or reconfigure the daemon start
their own with `start_mq` from conftest.py.
"""

import itertools
import json
import os
import time
from urllib.parse import quote, urlencode

import pytest

from support import Daemon, Response, files_in, poll_for, ready_daemon

_names = itertools.count(1)


def fresh_queue(prefix: str = "q") -> str:
    """A queue name no other test in this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture(scope="module")
def shared_mq(tmp_path_factory):
    """A ready daemon with two worker pairs and a one-second redelivery timer, for one module."""
    yield from ready_daemon(tmp_path_factory.mktemp("shared"), workers=2, timeout=1)


@pytest.fixture
def start_killed(start_mq):
    """start_mq whose daemons end by kill -9 of the tree (faster than a drain; still a valid end)."""
    started = []

    def start(**kwargs) -> Daemon:
        daemon = start_mq(**kwargs)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        if daemon.running():
            daemon.kill_tree()


def path(queue: str, suffix: str = "", **query) -> str:
    """/{queue}{suffix}?query, with the query's values URL-encoded."""
    query = {k: v for k, v in query.items() if v is not None}
    return f"/{queue}{suffix}" + (f"?{urlencode(query, quote_via=quote)}" if query else "")


def add(mq: Daemon, queue: str, body: bytes = b"x", headers: dict | None = None,
        **query) -> Response:
    """POST /{queue}/messages with optional query parameters (delay, at, dedup_id)."""
    return mq.request("POST", path(queue, "/messages", **query), body, headers)


def added(mq: Daemon, queue: str, body: bytes = b"x", headers: dict | None = None,
          **query) -> str:
    """Add and assert 201; return the message id."""
    resp = add(mq, queue, body, headers, **query)
    assert resp.status == 201, (resp.status, resp.body)
    return resp.header("X-Message-Id")


def fetch(mq: Daemon, queue: str, wait: float | None = None, timeout: float = 30.0) -> Response:
    """GET /{queue}/messages[?wait=N]."""
    return mq.request("GET", path(queue, "/messages", wait=wait), timeout=timeout)


def fetched(mq: Daemon, queue: str) -> Response:
    """Fetch and assert a message came (200)."""
    resp = fetch(mq, queue)
    assert resp.status == 200, (resp.status, resp.body)
    return resp


#: How long before a due time given to fetch_when_ready its fetches start.
EARLY_POLLS = 0.5


def fetch_when_ready(mq: Daemon, queue: str, timeout: float = 30.0,
                     due: float | None = None) -> tuple[Response, float]:
    """Poll until a fetch returns a message; return it and the wall-clock time it came back.

    With the due time (wall clock) of what is awaited, the fetches start EARLY_POLLS before
    it: a message released any earlier is still there then and is fetched before its due
    time all the same, and the seconds before cost no fetch (each one some milliseconds of
    the daemon's CPU, fifty a second)."""
    deadline = time.monotonic() + timeout
    if due is not None:
        wait_until(due - EARLY_POLLS, "shortly before the due time")

    def step():
        resp = fetch(mq, queue)
        assert resp.status in (200, 204), (resp.status, resp.body)
        return (resp, time.time()) if resp.status == 200 else None

    return poll_for(step, max(0.0, deadline - time.monotonic()), interval=0.02,
                    what=f"a message in {queue}")


def reply(mq: Daemon, queue: str, message_id: str, what: str, receipt: str | None = None,
          seconds: float | None = None, headers: dict | None = None) -> Response:
    """POST /{queue}/messages/{id}?reply=ack|nack|ext[&receipt=R][&seconds=N]."""
    return mq.request("POST", path(queue, f"/messages/{message_id}", reply=what, receipt=receipt,
                                   seconds=seconds), b"", headers)


def set_props(mq: Daemon, queue: str, props: dict, method: str = "PATCH") -> dict:
    """Change a queue's own properties; assert 200 and return the reply."""
    resp = mq.request(method, f"/{queue}/properties", json.dumps(props).encode())
    assert resp.status == 200, (resp.status, resp.body)
    return resp.json()


def restart(mq: Daemon) -> Daemon:
    """kill -9 of the whole tree, then start it again on the same root and port."""
    mq.kill_tree()
    return mq.start().wait_ready()


def wait_until(moment: float, what: str = "") -> None:
    """Wait for the wall clock to pass a moment (a wait, not an assertion)."""
    poll_for(lambda: time.time() > moment, max(1.0, moment - time.time() + 5), what=what or "time")


def assert_json_error(resp: Response, status: int, kind: str, mentions: str = "") -> str:
    """An error reply: the status, a JSON body {"error": kind, "message": ...}; return the message."""
    assert resp.status == status, (resp.status, resp.body)
    assert (resp.header("Content-Type") or "").startswith("application/json")
    value = resp.json()
    assert value["error"] == kind, value
    assert mentions in value["message"], value
    return value["message"]


def names_of(mq: Daemon, message_id: str) -> list[str]:
    """Every name a message has in queues/*/, delay/ and new/ (where it lives, if anywhere)."""
    found = []
    for queue in files_in(mq.root / "queues"):
        found += [f"queues/{queue}/{n}" for n in files_in(mq.root / "queues" / queue)
                  if n.split(".")[0] == message_id]
    for folder in ("delay", "new"):
        found += [f"{folder}/{n}" for n in files_in(mq.root / folder) if message_id in n]
    return found
