"""The replica layout of a GlusterFS root, parsed from the glusterfs.pathinfo values a
GlusterFS 10.3 client answered on volumes built by bench/cluster_fs.py (docs/CLUSTER.md,
"Deploying on GlusterFS"); a real volume is tested in tests/cluster/test_replica_check.py."""

from mq.store.replicas import Layout, ReplicaSet, parse_pathinfo, replica_layout

REPLICA_2 = ("(<REPLICATE:mq5007x44129-replicate-0> "
             "<POSIX(/tmp/r2/brick-1):vm:/tmp/r2/brick-1/> "
             "<POSIX(/tmp/r2/brick-0):vm:/tmp/r2/brick-0/>)\x00")
REPLICA_3 = ("(<REPLICATE:mq5007x54119-replicate-0> "
             "<POSIX(/tmp/r3/brick-2):vm:/tmp/r3/brick-2/> "
             "<POSIX(/tmp/r3/brick-1):vm:/tmp/r3/brick-1/> "
             "<POSIX(/tmp/r3/brick-0):vm:/tmp/r3/brick-0/>)\x00")
#: `replica 3 arbiter 1`: the arbiter is listed like the two full copies.
ARBITER = ("(<REPLICATE:mq5007x54809-replicate-0> "
           "<POSIX(/tmp/arb/brick-2):vm:/tmp/arb/brick-2/> "
           "<POSIX(/tmp/arb/brick-1):vm:/tmp/arb/brick-1/> "
           "<POSIX(/tmp/arb/brick-0):vm:/tmp/arb/brick-0/>)\x00")
#: Distributed-replicated, 2 x 2: two replica sets under DISTRIBUTE, then the hash layout.
DISTRIBUTED_REPLICA_2 = (
    "((<DISTRIBUTE:mq5007x59863-dht> (<REPLICATE:mq5007x59863-replicate-0> "
    "<POSIX(/tmp/dr2/brick-1):vm:/tmp/dr2/brick-1/> <POSIX(/tmp/dr2/brick-0):vm:/tmp/dr2/brick-0/>) "
    "(<REPLICATE:mq5007x59863-replicate-1> <POSIX(/tmp/dr2/brick-3):vm:/tmp/dr2/brick-3/> "
    "<POSIX(/tmp/dr2/brick-2):vm:/tmp/dr2/brick-2/>)) (mq5007x59863-dht-layout "
    "(mq5007x59863-replicate-0 0 2147483646) (mq5007x59863-replicate-1 2147483647 4294967295)))\x00")
#: Plain distributed, two bricks: each file has one copy.
DISTRIBUTED = (
    "((<DISTRIBUTE:mq5007x39493-dht> <POSIX(/tmp/dist/brick-0):vm:/tmp/dist/brick-0/> "
    "<POSIX(/tmp/dist/brick-1):vm:/tmp/dist/brick-1/>) (mq5007x39493-dht-layout "
    "(mq5007x39493-client-0 0 2147483646) (mq5007x39493-client-1 2147483647 4294967295)))\x00")


def test_replica_2_is_one_set_of_two_copies_and_weak():
    sets = parse_pathinfo(REPLICA_2)
    assert sets == (ReplicaSet("replicate", "mq5007x44129-replicate-0",
                               ("vm:/tmp/r2/brick-1", "vm:/tmp/r2/brick-0")),)
    assert Layout(sets).weak() == sets


def test_replica_3_and_an_arbiter_have_three_copies_and_are_not_weak():
    for text in (REPLICA_3, ARBITER):
        sets = parse_pathinfo(text)
        assert [(s.kind, len(s.bricks)) for s in sets] == [("replicate", 3)]
        assert Layout(sets).weak() == ()


def test_each_set_of_a_distributed_replicated_volume_is_judged():
    sets = parse_pathinfo(DISTRIBUTED_REPLICA_2)
    assert sorted((s.name, len(s.bricks)) for s in sets) == [
        ("mq5007x59863-replicate-0", 2), ("mq5007x59863-replicate-1", 2)]
    assert len(Layout(sets).weak()) == 2


def test_a_brick_of_a_plain_distributed_volume_is_a_set_of_one_copy():
    sets = parse_pathinfo(DISTRIBUTED)
    assert sets == (ReplicaSet("brick", "", ("vm:/tmp/dist/brick-0",)),
                    ReplicaSet("brick", "", ("vm:/tmp/dist/brick-1",)))
    assert Layout(sets).weak() == sets


def test_a_value_without_bricks_gives_no_set():
    assert parse_pathinfo("") == ()
    assert parse_pathinfo("(something else)") == ()


def test_a_root_off_glusterfs_has_no_layout(tmp_path):
    assert replica_layout(str(tmp_path)) is None
