"""The front's own tables behind the dashboard: the ring of the last hour's samples
(http/history.py) and the clients seen fetching from each queue (http/clients.py)."""

from mq.http import clients as clients_module
from mq.http.clients import Clients
from mq.http.figures import GAUGES, RATES
from mq.http.history import HISTORY_SECONDS, SPAN_SECONDS, History
from support import poll_for


def sums(adds: int, fetches: int = 0, queues: int = 1) -> dict:
    """Sums over every queue as the statistics give them, with these totals."""
    return {**dict.fromkeys(GAUGES, 0), "queues": queues,
            "totals": {**dict.fromkeys(RATES, 0), "adds": adds, "fetches": fetches}}


def test_a_sample_gives_the_rates_since_the_one_before(tmp_path):
    history = History(None, str(tmp_path))
    history.add(1000.0, sums(adds=5))
    history.add(1010.0, sums(adds=25, fetches=10))
    first, second = history.samples
    assert (first["adds"], first["fetches"]) == (0.0, 0.0)  # Nothing before it to count from.
    assert (second["adds"], second["fetches"]) == (2.0, 1.0)
    assert second["root_free_bytes"] > 0 and second["root_free_inodes"] >= 0
    # A total that went down (an actor restarted, a queue was deleted) is no negative rate.
    history.add(1020.0, sums(adds=3, fetches=10))
    assert history.samples[-1]["adds"] == 0.0


def test_the_ring_keeps_an_hour_of_samples(tmp_path):
    history = History(None, str(tmp_path))
    kept = int(SPAN_SECONDS / HISTORY_SECONDS)
    for n in range(kept + 10):
        history.add(1000.0 + n * HISTORY_SECONDS, sums(adds=n))
    assert len(history.samples) == kept
    assert history.samples[0]["time"] == 1000.0 + 10 * HISTORY_SECONDS


def test_the_root_away_is_no_free_space_but_none(tmp_path):
    history = History(None, str(tmp_path / "away"))
    history.add(1000.0, sums(adds=0))
    assert history.samples[-1]["root_free_bytes"] is None


def test_clients_are_distinct_connections_seen_in_the_window(monkeypatch):
    seen = Clients()
    for client in ("10.0.0.1:5000", "10.0.0.1:5001", "10.0.0.1:5000"):
        seen.seen("orders", client)
    seen.seen("billing", "10.0.0.2:6000")
    assert seen.counts() == {"orders": 2, "billing": 1}
    seen.forget_queues({"billing"})
    assert set(seen.queue_tables()["clients"]) == {"orders"}
    monkeypatch.setattr(clients_module, "WINDOW_SECONDS", 0.05)
    poll_for(lambda: seen.counts() == {}, 10, what="the clients to age out")
    assert set(seen.queue_tables()["clients"]) == set()
