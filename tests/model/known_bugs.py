"""Disagreements between the model and the daemon whose fixes are under way elsewhere.

Each flag turns off the one check that shows its behaviour, in the state machines and in
test_known_bugs.py (xfail while the flag is set). The model keeps the rule: once the fix is
merged, set the flag to False and the check runs again.
"""

#: mq.local's get hands out a message older than its queue's `retention` (only the daemon's
#: reaper removes such messages).
LOCAL_IGNORES_RETENTION = False
#: mq.local's get hands out a younger message of a group whose older message is in flight
#: on a `fifo` queue.
LOCAL_IGNORES_FIFO_GROUPS = False
#: With --peers=1 a fetch may hand out a younger message of a group that is in flight.
FIFO_GROUPS_BREAK_WITH_PEERS = False
#: Pull-any over a `fifo` queue whose ready messages are all held back spins instead of
#: answering 204.
PULL_ANY_SPINS_ON_FIFO = False
#: A batch fetch (?max=N) of a compound does not say X-Message-Kind: compound.
BATCH_FETCH_LACKS_COMPOUND_HEADERS = False
#: A batch add to an accumulating queue that fails on the disk leaves the parts it wrote
#: before the failure in their window. The machines cannot fail a disk: they check the
#: refusal before anything is written (machines.refused_batch_leaves_no_part), which holds.
FAILED_BATCH_ADD_LEAVES_PARTS = False
#: GET /{q}/messages?max= with a huge number answers 500 instead of 400.
HUGE_MAX_IS_500 = False

# Found by these machines and reported, not fixed here (a fix changes the mover's cost):

#: A daemon's mover misses an mq.local extend that makes a timer it already knows shorter:
#: on a notice it times only the delay/ entries it does not know (MoverActor.rescan with
#: only_new), so the message stays hidden until the old due time (--peers=0), or until the
#: next full rescan, up to 5 s late (--peers=1).
LOCAL_SHORTER_EXTEND_UNSEEN_BY_MOVER = False

# Seen once, not flagged: the machines wait for the fetch actor's index (machine.until_served),
# which hides it. When the mover returns a fifo message whose timer ran out, the group is free
# from its rename (the in-flight name is gone) but the fetch actor learns the message is ready
# only from the mover's notification after its flush: a fetch in between hands out the group's
# next, younger message, and the older one can then be handed out while the younger is in flight.
