"""Passes over every queue of a root look at each shared folder once: queues/ is listed again
only when it changed (and a queue made or removed by another process is seen by the next
listing), props/ is listed once for every queue's properties (each queue's own, a rule's and
the system's, as one queue's look gives them), and notices/ once for every queue's notice."""

import os
import time

import pytest

from mq.properties import PropertyFiles
from mq.store import Store


@pytest.fixture
def store(tmp_path):
    """A root with the queues a, b and c."""
    store = Store(str(tmp_path / "root"))
    store.init()
    for queue in ("a", "b", "c"):
        store.queues.create_queue(queue)
    return store


def settle(path: str) -> None:
    """Date a folder's mtime 10 s back, as a folder that has held still that long."""
    past = time.time() - 10
    os.utime(path, (past, past))


def test_a_kept_listing_of_queues_sees_a_queue_another_process_makes_or_removes(store):
    other = Store(store.root)
    settle(store.folder("queues"))
    assert store.queues.list_queues() == ["a", "b", "c"]
    assert store.queues.list_queues() == ["a", "b", "c"]  # The kept listing.
    other.queues.create_queue("d")
    assert store.queues.list_queues() == ["a", "b", "c", "d"]
    settle(store.folder("queues"))
    assert store.queues.list_queues() == ["a", "b", "c", "d"]
    other.queues.delete_queue("b")
    assert store.queues.list_queues() == ["a", "c", "d"]
    listed = store.queues.list_queues()
    listed.append("not-a-queue")  # A caller's copy: the kept listing is not changed.
    assert store.queues.list_queues() == ["a", "c", "d"]


def test_properties_of_every_queue_at_once_are_each_queues_own_look(store):
    store.write_json(store.props_path("a"), {"retention": 60})
    store.write_json(store.default_props_path(), [["b.*", {"retention": 120}]])
    files = PropertyFiles(store)
    queues = ["a", "b", "c", "e"]
    assert dict(files.effective_each(queues)) == {q: files.effective(q) for q in queues}
    each = dict(PropertyFiles(store).effective_each(queues))
    assert [each[q]["retention"] for q in queues] == [60, 120, 0, 0]
    assert each["c"]["dead_letter_queue"] == "c.dead"
    # A file that appears or goes between two passes is seen by the next one.
    store.write_json(store.props_path("c"), {"dead_letter_queue": "failed"})
    os.unlink(store.props_path("a"))
    each = dict(files.effective_each(queues))
    assert each["c"]["dead_letter_queue"] == "failed" and each["a"]["retention"] == 0


def test_the_queues_with_a_notice_come_from_one_listing_and_read_as_each_ones(store):
    assert store.notices.posted() == set()
    assert store.notices.post("b") and store.notices.post()  # delay/'s notice is no queue's.
    assert store.notices.posted() == {"b"}
    assert store.notices.read("b") and store.notices.read("a") == ""
