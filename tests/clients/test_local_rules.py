"""mq.local applies the daemon's delivery rules (mq.delivery): a queue's retention, and the
message groups of a `fifo` queue, on real roots; the race between consumers in real processes.

Messages with an old id or a group are written the way a save actor writes them (Store's
write, flush, rename): an add over HTTP or through LocalClient.put is stamped with now.
"""

import os
import secrets
import subprocess
import sys
import time

import pytest

from repo_support import script_env
from support import poll_for

from mq.client.errors import ConflictError, NotFoundError
from mq.delivery import group_in_file
from mq.ids import new_id
from mq.local import LocalClient
from mq.store import Store, encode_message


def stored(root, queue: str, body: bytes, group: str = "", age: float = 0.0,
           due: float | None = None) -> str:
    """Write a message as a save actor does, created `age` seconds ago; return its id."""
    store = Store(str(root), "fs")
    store.init()
    created_ms = int((time.time() - age) * 1000)
    message_id = id_made_at(created_ms) if age else new_id()
    store.write_new(queue, message_id, encode_message(body, "text/plain", created_ms,
                                                      message_id, group=group), due)
    store.flush_data()
    folder = store.states.deliver_new(queue, message_id, due is not None)
    store.flush({folder, store.folder("new")})
    return message_id


def id_made_at(ms: int) -> str:
    """A v7 id of a message added at Unix milliseconds `ms` (new_id never goes back in time)."""
    rand, t = secrets.token_hex(10), f"{ms:012x}"
    return f"{t[:8]}-{t[8:]}-7{rand[:3]}-{'89ab'[int(rand[3], 16) % 4]}{rand[4:7]}-{rand[7:19]}"


def in_queue(root, queue: str) -> set[str]:
    """Ids of the queue's ready messages, by their names."""
    return {name.split(".")[0] for name in os.listdir(root / "queues" / queue)}


# -- retention ------------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_a_message_older_than_its_queue_s_retention_is_never_handed_out_and_is_removed(tmp_path):
    root = tmp_path / "root"
    client = LocalClient(root, create_root=True)
    client.set_properties("q", retention=3600)
    expired = stored(root, "q", b"added two hours ago", age=7200)
    expired_delayed = stored(root, "q", b"delayed two hours ago", age=7200, due=time.time() - 1)
    fresh = stored(root, "q", b"added now")
    # The daemon's rule: not counted, not shown, not claimed (GET /q, peek and fetch).
    assert client.stat("q")["ready"] == 1
    assert [m.id for m in client.peek("q")] == [fresh]
    message = client.get("q")
    assert (message.id, message.body) == (fresh, b"added now")
    assert client.get("q") is None
    assert expired not in in_queue(root, "q") and f"q:{expired}" in os.listdir(root / "remove")
    assert not [n for n in os.listdir(root / "delay") if expired_delayed in n]
    client.ack(message)
    # Retention 0 (the default) keeps a message however old.
    kept = stored(root, "keep", b"added two hours ago", age=7200)
    assert client.get("keep").id == kept


@pytest.mark.timeout(60)
def test_a_receipt_of_a_message_that_expired_in_flight_acks_nothing(tmp_path):
    root = tmp_path / "root"
    client = LocalClient(root, create_root=True)
    old = stored(root, "q", b"added long ago", age=50)
    message = client.get("q")
    assert message.id == old
    # Its retention is lowered while it is in flight: the next look at the queue removes it.
    client.set_properties("q", retention=10)
    poll_for(lambda: client.get("q") is None and not os.listdir(root / "delay"), 10,
             what="the expired in-flight message removed")
    with pytest.raises(NotFoundError):
        client.ack(message)


# -- message groups -------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_a_fifo_queue_hands_out_one_message_of_a_group_at_a_time_in_order(tmp_path):
    root = tmp_path / "root"
    one, two = LocalClient(root, create_root=True), LocalClient(root)
    one.set_properties("f", fifo=True)
    a1, a2 = stored(root, "f", b"a1", "a"), stored(root, "f", b"a2", "a")
    b1, plain = stored(root, "f", b"b1", "b"), stored(root, "f", b"no group")
    first = one.get("f")
    assert first.id == a1
    # Group a has a1 in flight (with another client too): a2 waits, in its place.
    assert two.get("f").id == b1
    assert one.get("f").id == plain
    assert two.get("f") is None and one.get("f") is None
    assert a2 in in_queue(root, "f")
    # a1 comes back (nacked): it goes again before a2, and a2 waits for it once more.
    one.nack(first)
    again = two.get("f")
    assert (again.id, again.attempts) == (a1, 2)
    assert one.get("f") is None
    with pytest.raises(ConflictError):
        one.ack(first)  # Delivery 1 is over.
    two.ack(again)
    assert one.get("f").id == a2


@pytest.mark.timeout(60)
def test_a_queue_without_fifo_does_not_hold_groups_back(tmp_path):
    root = tmp_path / "root"
    client = LocalClient(root, create_root=True)
    a1, a2 = stored(root, "q", b"a1", "a"), stored(root, "q", b"a2", "a")
    assert [client.get("q").id, client.get("q").id] == [a1, a2]


@pytest.mark.timeout(90)
def test_a_daemon_and_local_consumers_on_one_root_apply_the_same_rules(start_mq):
    # --peers=0: the daemon takes its oldest message, not one of the oldest few at random.
    daemon = start_mq(workers=1, timeout=60, args=("--peers=0",))
    root, client = daemon.root, LocalClient(daemon.root)
    client.set_properties("f", fifo=True, retention=3600)
    stored(root, "f", b"added two hours ago", age=7200)
    a1, a2 = stored(root, "f", b"a1", "a"), stored(root, "f", b"a2", "a")
    b1 = stored(root, "f", b"b1", "b")
    # The daemon removes the expired message instead of handing it out, and claims a1.
    resp = daemon.fetch("f")
    assert (resp.status, resp.header("X-Message-Id")) == (200, a1)
    # Local consumers see a1 in flight with the daemon: a2 waits, b1 goes.
    assert client.get("f").id == b1
    assert client.get("f") is None
    assert daemon.fetch("f").status == 204  # a2 waits for a1 there too; b1 is taken.
    assert daemon.delete("f", a1).status == 204
    assert client.get("f").id == a2


def consume_groups(root: str, log: str, stop: str) -> None:
    """Worker: get from fifo queue 'f' until stop exists; for each message append 'got G N',
    'overlap G N' if another message of group G is in flight meanwhile, 'done G N', then ack.

    Every consumer appends to one log (O_APPEND: each line lands whole, in the order written).
    """
    client = LocalClient(root)
    store = Store(root, "fs")
    with open(log, "a", buffering=1) as out:
        while not os.path.exists(stop):
            message = client.get("f", wait=0.1)
            if message is None:
                continue
            group, number = message.body.decode().split()
            out.write(f"got {group} {number}\n")
            for other, delivery in store.queues.list_in_flight("f"):
                if other != message.id and group_in_file(
                        store.delay_path("f", other, delivery), "f", other) == group:
                    out.write(f"overlap {group} {number}\n")
            out.write(f"done {group} {number}\n")
            client.ack(message)


GROUPS, PER_GROUP, CONSUMERS = 3, 20, 4


@pytest.mark.timeout(180)
def test_consumers_in_several_processes_never_hold_two_messages_of_a_group(tmp_path):
    root = tmp_path / "root"
    LocalClient(root, create_root=True).set_properties("f", fifo=True)
    for number in range(PER_GROUP):
        for group in range(GROUPS):
            stored(root, "f", f"{group} {number}".encode(), group=str(group))
    stop, log = tmp_path / "stop", tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, __file__, str(root), str(log), str(stop)],
                              env=script_env())
             for _ in range(CONSUMERS)]
    try:
        poll_for(lambda: log.exists() and log.read_text().count("done") == GROUPS * PER_GROUP,
                 150, what="every message consumed")
    finally:
        stop.touch()
        for proc in procs:
            proc.wait(30)
    assert [p.returncode for p in procs] == [0] * CONSUMERS
    lines = log.read_text().splitlines()
    assert not [line for line in lines if line.startswith("overlap")]
    for group in map(str, range(GROUPS)):
        # One at a time, in order: got 0, done 0, got 1, done 1, ...
        seen = [line for line in lines if line.split()[1] == group]
        assert seen == [f"{step} {group} {n}" for n in range(PER_GROUP)
                        for step in ("got", "done")], seen


if __name__ == "__main__":
    consume_groups(*sys.argv[1:])
