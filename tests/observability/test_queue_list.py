"""GET /_mq/queues against a real daemon: its pages and the history's samples share one gather
of every actor's statistics while it is younger than STATS_AGE_S (QueueService.recent_stats),
and a queue added or deleted still shows once it is older. The daemon runs with
--log-level=debug: its mover logs "mover.stats" for each gather it answers."""

import threading

import pytest

from mq.http.service import STATS_AGE_S
from support import poll_for, ready_daemon

#: Pages asked at once.
CLIENTS = 12


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon that logs each gather of the statistics its mover answers."""
    yield from ready_daemon(tmp_path_factory.mktemp("queue-list"), workers=2, timeout=30,
                            args=("--log-level=debug",))


def gathers(daemon) -> int:
    """The gathers of the statistics the mover answered so far."""
    return len(daemon.events("mover.stats"))


def page(daemon, query: str = "") -> dict:
    """One answer of GET /_mq/queues."""
    resp = daemon.request("GET", f"/_mq/queues?{query}", timeout=60)
    assert resp.status == 200, resp.body
    return resp.json()


def test_pages_asked_at_once_share_one_gather(daemon):
    assert daemon.request("PUT", "/listed").status in (200, 201)
    poll_for(lambda: page(daemon, "name=listed")["matched"] == 1, STATS_AGE_S + 60,
             what="the queue listed")
    before = gathers(daemon)
    start = threading.Barrier(CLIENTS)
    answers: list = []

    def ask() -> None:
        start.wait()
        answers.append(page(daemon))

    threads = [threading.Thread(target=ask) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert len(answers) == CLIENTS
    assert all(a["complete"] and a["count"] >= 1 and "listed" in [q["name"] for q in a["queues"]]
               for a in answers)
    # One gather serves them (two or three if the machine spread them over STATS_AGE_S, or
    # the history's sample began one just before): never one each.
    assert gathers(daemon) - before <= 3


def test_the_statistics_route_gathers_for_each_request(daemon):
    before = gathers(daemon)
    for _ in range(3):
        assert daemon.request("GET", "/_mq/stats").status == 200
    assert gathers(daemon) - before >= 3


def test_a_queue_added_or_deleted_shows_once_the_figures_are_older(daemon):
    count = page(daemon)["count"]
    assert daemon.request("PUT", "/appears").status in (200, 201)
    answer = poll_for(lambda: (a := page(daemon, "name=appears"))["matched"] == 1 and a,
                      STATS_AGE_S + 60, what="the added queue listed")
    assert answer["count"] == count + 1 and answer["queues"][0]["name"] == "appears"
    assert answer["sums"]["queues"] == count + 1
    assert daemon.request("DELETE", "/appears").status in (200, 204)
    answer = poll_for(lambda: (a := page(daemon, "name=appears"))["matched"] == 0 and a,
                      STATS_AGE_S + 60, what="the deleted queue gone from the list")
    assert answer["count"] == count and answer["queues"] == []
