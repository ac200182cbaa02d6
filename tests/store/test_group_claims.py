"""Group claims on a real root, as two daemons sharing it see them: taken by an exclusive
rename, taken over only once a delivery ended, and read right after a crash in the middle of
a take-over (docs/FORMAT.md, "Group claims")."""

import os

from mq.ids import new_id
from mq.store import Disk, Store
from mq.store.group_claims import GroupClaims


def two_daemons(tmp_path) -> tuple[Store, GroupClaims, GroupClaims]:
    """A root, and the claims as each of two daemons (own Store, own Disk) reads them."""
    root = str(tmp_path / "root")
    store = Store(root, "fs", disk=Disk("fs"))
    store.init()
    other = Store(root, "fs", disk=Disk("fs"))
    return store, GroupClaims(store, store.disk), GroupClaims(other, other.disk)


def in_flight(store: Store, message_id: str, delivery: int) -> None:
    """A message file in delay/ as delivery n (what a claim's rename leaves)."""
    with open(store.delay_path("q", message_id, delivery), "wb") as f:
        f.write(b"x")


def test_a_group_is_taken_by_one_daemon_until_its_delivery_ends(tmp_path):
    store, a, b = two_daemons(tmp_path)
    first, second = new_id(), new_id()
    assert a.take("q", "g", first, 0)
    in_flight(store, first, 1)
    assert not b.free_for("q", "g", second, 0) and not b.take("q", "g", second, 0)
    assert b.free_for("q", "g", first, 0)  # The very message: the rename decides.
    os.unlink(store.delay_path("q", first, 1))  # Acked: the delivery ended.
    assert b.free_for("q", "g", second, 0) and b.take("q", "g", second, 0)
    assert a.holder("q", "g")[1] == [f"{second}.1"]
    assert os.listdir(store.folder("groups")) == [os.path.basename(a.claim_path("q", "g"))]


def test_a_slow_daemon_that_saw_the_ended_delivery_does_not_take_over_twice(tmp_path):
    store, a, b = two_daemons(tmp_path)
    first, second, third = new_id(), new_id(), new_id()
    assert a.take("q", "g", first, 0)  # first.1 never appears: ended (its message is gone).
    base = a.claim_path("q", "g")
    assert a.take("q", "g", second, 0)  # The take-over, done and folded into the claim.
    in_flight(store, second, 1)
    # b read the claim before that, saw first.1 ended, and creates its link only now.
    assert b.publish(f"{base}.{first}.1", [f"{third}.1"])
    assert not b.holds("q", "g", f"{base}.{first}.1")
    assert b.holder("q", "g") == (base, [f"{second}.1"])


def test_a_take_over_left_half_done_by_a_crash_is_read_through_its_link(tmp_path):
    store, a, b = two_daemons(tmp_path)
    first, second, third = new_id(), new_id(), new_id()
    assert a.take("q", "g", first, 0)
    base = a.claim_path("q", "g")
    # Killed after its link was made, before the rename that folds it into the claim.
    assert a.publish(f"{base}.{first}.1", [f"{second}.1"])
    in_flight(store, second, 1)
    assert b.holder("q", "g") == (f"{base}.{first}.1", [f"{second}.1"])
    assert not b.take("q", "g", third, 0)
    os.unlink(store.delay_path("q", second, 1))
    assert b.take("q", "g", third, 0)
    assert b.holder("q", "g") == (base, [f"{third}.1"])


def test_a_holder_adds_its_deliveries_and_holds_while_any_is_in_flight(tmp_path):
    store, a, b = two_daemons(tmp_path)
    first, second, third, other = new_id(), new_id(), new_id(), new_id()
    assert a.take("q", "g", first, 0)
    in_flight(store, first, 1)
    assert a.take("q", "g", second, 0, mine={f"{first}.1"})
    in_flight(store, second, 1)
    assert a.take("q", "g", third, 0, mine={f"{first}.1", f"{second}.1"})
    in_flight(store, third, 1)
    base = a.claim_path("q", "g")
    assert b.holder("q", "g") == (base, [f"{first}.1", f"{second}.1", f"{third}.1"])
    # A daemon that read the claim when it named first.1 alone, and found it ended, makes
    # its link late: the claim's contents since then lead elsewhere.
    os.unlink(store.delay_path("q", first, 1))
    assert b.publish(f"{base}.{first}.1", [f"{other}.1"])
    assert not b.holds("q", "g", f"{base}.{first}.1")
    os.unlink(f"{base}.{first}.1")
    os.unlink(store.delay_path("q", second, 1))
    assert not b.take("q", "g", other, 0)  # third.1 still holds the group.
