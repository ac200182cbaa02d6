"""The state machine that drives one front end against the model (hypothesis stateful testing).

Each example works on queues of its own (a fresh name prefix), so examples share the daemon
but no state. After every step the root's folders must say what the model says of every
message (root_view.py); every answer of the front must be the one the model predicts. Timers
are long (LONG) unless a rule makes one short on purpose: it then waits until the model says
it is due and polls the root, with a deadline, until the daemon has acted on it.
"""

import os
import time
import uuid
from collections import Counter

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import root_view
from queue_model import CONFLICT, DELAYED, IN_FLIGHT, PART, READY, Model
from support import lines_logging, poll_for

#: Seconds a delivery stays hidden and a delayed add waits unless a rule shortens them.
LONG = 600.0
#: Delay of a "later" add: never due within a run.
LATER = 900
#: A short timer: how long a rule makes a delivery or a delay last, in the front's units.
#: Each rule that sets one waits it out, so it is short; an answer still comes back well
#: within it on a quiet machine, so add_due_soon's check that nothing is released early has
#: a window to see.
SHORT = 0.1
#: Most add_due_soon steps of one example on a front whose delayed adds are slow to fall due
#: (Front.slow_delays: SQS's whole seconds; mq.local's, which the daemon's mover hears of at
#: its notice cadence, up to 0.5 s): hypothesis draws that rule often, up to half the steps,
#: and past a few another one checks nothing the others did not (what is the front's own,
#: its delay option, the first one and every delayed add check); the steps go to other rules.
SLOW_DELAYS = 3
#: Seconds a message may leave delay/ before the due time the test computed (clock reads).
EARLY = 0.005
#: Deadline, in seconds, for the daemon to act on a timer the model says is due.
ACT_WITHIN = 15.0
KEYS = ("k0", "k1", "k2")
#: Log events that mean the daemon failed a request.
ERROR_EVENTS = ("front.error", "sqs.error")


class FrontMachine(RuleBasedStateMachine):
    """Rules every front shares; a subclass made by machine_for() names the front.

    Preconditions name only what the front can do. A rule that needs state the daemon's
    answers or the clock decide (a delivery in hand, an open window) returns early without
    it: hypothesis must see the same rules offered for the same draws, or it stops the run
    as flaky (FlakyStrategyDefinition).
    """

    daemon = None
    front = None
    loose_order = False  # --peers: a fetch takes one of the oldest few, not the oldest
    log_read = 0  # how far the daemon's log was read

    def __init__(self):
        super().__init__()
        self.model = Model(default_timeout=LONG)
        self.run = "m" + uuid.uuid4().hex[:10]
        self.main, self.dead = f"{self.run}-m", f"{self.run}-d"
        self.bodies = 0
        self.handed: list = []  # (queue, Got) of every delivery handed out
        self.steps = 0
        self.due_soon = 0  # add_due_soon steps of this example

    def teardown(self):
        """Close the front's connection, if it keeps one; with MQ_MODEL_TRACE, say what the
        example did."""
        if os.environ.get("MQ_MODEL_TRACE"):
            states = Counter(m.state for m in self.model.msgs.values())
            print(f"{self.front.name}: {self.steps} steps, {len(self.handed)} deliveries, "
                  f"{dict(states)}, queues {sorted(self.model.queues)}")
        sock = getattr(self.front, "sock", None)
        if sock is not None:
            sock.close()

    # -- helpers --------------------------------------------------------------------------

    def body(self) -> str:
        """A body no other message of the run has: the model's name for the message."""
        self.bodies += 1
        return f"{self.run}-b{self.bodies}"

    def unknown_ids(self, queue: str) -> set[str]:
        """Ids in the root the model has not named yet."""
        known = {m.id for m in self.model.msgs.values()}
        return set(root_view.files(self.daemon.root, queue)) - known

    def root_agrees(self, *queues) -> bool:
        """True when the root holds exactly what the model says for these queues (for an
        accumulating queue, its messages: parts and new compounds are the windows' rules')."""
        for queue in queues:
            seen, want = root_view.files(self.daemon.root, queue), self.model.files(queue)
            if self.model.queues[queue].props.accum > 0 and self.front.accumulates:
                want = {i: v for i, v in want.items() if v[0] != PART}
                seen = {i: v for i, v in seen.items() if i in want}
            if seen != want:
                return False
        return True

    def until_root_agrees(self, what: str, *queues) -> None:
        """Poll the root, with a deadline, until it says what the model says."""
        poll_for(lambda: self.root_agrees(*queues), ACT_WITHIN, interval=0.05,
                 what=f"the root to show {what}: model {[self.model.files(q) for q in queues]}")

    def peeked(self, queue: str) -> set[str]:
        """Ids of the ready messages the queue's fetch actor knows (GET /{q}/peek)."""
        resp = self.daemon.request("GET", f"/{queue}/peek?max=1000")
        assert resp.status in (200, 404), (resp.status, resp.body)
        return {m["id"] for m in resp.json()["messages"]} if resp.status == 200 else set()

    def until_served(self, what: str, *queues) -> None:
        """until_root_agrees, then until each queue's fetch actor knows its ready messages:
        the mover renames a message back before it tells the fetch actor, and a fetch in
        between does not see it yet."""
        # (A fifo group stays held meanwhile: test_model_regressions.py holds that rule.)
        self.until_root_agrees(what, *queues)
        for queue in queues:
            ready = {m.id for m in self.model.messages(queue, READY)}
            poll_for(lambda: ready <= self.peeked(queue), ACT_WITHIN, interval=0.05,
                     what=f"the fetch actor of {queue} to know {what}")

    @staticmethod
    def wait_until(when: float) -> None:
        """Wait for a timer the model says is due at `when` (then poll for its effect)."""
        while (left := when - time.time()) > 0:
            time.sleep(min(left, 0.05))

    def short(self) -> float:
        """A short timer in the front's units."""
        return max(SHORT, self.front.delay_unit)

    # -- set-up ---------------------------------------------------------------------------

    @initialize(retry=st.sampled_from([-1, 0, 1, 2]), dedup_window=st.sampled_from([300.0, 1.5]))
    def create_queues(self, retry, dedup_window):
        """The run's main queue with its retry and key window, and its dead-letter queue."""
        props = {"timeout": LONG, "retry": retry, "dead_letter_queue": self.dead,
                 "dedup_window": dedup_window}
        if self.front.name == "sqs":
            props.pop("dedup_window")  # a standard SQS queue takes no de-duplication ids
            self.model.create(self.dead, timeout=LONG, retry=-1)
        else:
            self.front.create_queue(self.dead, {"timeout": LONG, "retry": 2})
            self.model.create(self.dead, timeout=LONG, retry=2)
        self.front.create_queue(self.main, props)
        self.model.create(self.main, **props)
        self.retry = retry

    # -- adds -----------------------------------------------------------------------------

    def check_add(self, queue, key, added, delay, dedup, now, group=""):
        """Compare one add's answer with the model, then record it there."""
        duplicate = None
        if dedup is not None:
            state, earlier = self.model.key_state(queue, dedup, now)
            if state == "either":  # at the end of the key's window: the daemon decides
                duplicate = (added.id == earlier.id) if added.id else not self.unknown_ids(queue)
        m = self.model.add(queue, key, now, delay, dedup, group, self.front.accumulates,
                           duplicate)
        if m.key != key:
            assert added.id in (None, m.id), (added, m)
            assert added.duplicate in (None, True), added
            return m
        assert added.duplicate in (None, False), added
        if added.id is None:
            (added.id,) = self.unknown_ids(queue)  # the one id the push made
        m.id = added.id
        return m

    @rule(later=st.booleans(), dedup=st.none() | st.sampled_from(KEYS))
    def add(self, later, dedup):
        """One add, now or much later, with or without a de-duplication key."""
        if self.front.name == "sqs":
            dedup = None
        key, delay = self.body(), (LATER if later else 0)
        added = self.front.add(self.main, key, delay, dedup)
        self.check_add(self.main, key, added, delay, dedup, time.time())

    @precondition(lambda self: hasattr(self.front, "add_many"))
    @rule(items=st.lists(st.tuples(st.booleans(), st.none() | st.sampled_from(KEYS)),
                         min_size=2, max_size=5))
    def add_batch(self, items):
        """One batch add; each message as the single add would answer it, in order."""
        if self.front.name == "sqs":
            items = [(later, None) for later, _ in items]
        batch = [(self.body(), LATER if later else 0, dedup) for later, dedup in items]
        answers = self.front.add_many(self.main, batch)
        now = time.time()
        for (key, delay, dedup), added in zip(batch, answers):
            self.check_add(self.main, key, added, delay, dedup, now)

    @precondition(lambda self: not self.front.slow_delays or self.due_soon < SLOW_DELAYS)
    @rule()
    def add_due_soon(self):
        """An add with a short delay: invisible until its due time, then ready."""
        self.due_soon += 1
        key, delay = self.body(), self.short()
        sent = time.time()
        added = self.front.add(self.main, key, delay)
        m = self.check_add(self.main, key, added, delay, None, time.time())
        assert m.state == DELAYED
        # Watched until the model's due time: the daemon's is at least sent + delay, so a
        # listing that finds the message ready must have ended after that.
        while time.time() < m.due:
            state = root_view.files(self.daemon.root, self.main).get(m.id, ("",))[0]
            listed = time.time()
            assert state != READY or listed >= sent + delay - EARLY, (m.id, listed - sent, delay)
            time.sleep(0.02)
        self.model.fall_due(m)
        self.until_served(f"{m.id} due", self.main)

    # -- fetches --------------------------------------------------------------------------

    def check_fetch(self, queue, got, n, holder=False):
        """Compare what a fetch handed out with the model, then claim it there."""
        expected = self.model.expected_fetch(queue, n, holder)
        now = time.time()
        if self.loose_order:
            # Each claim takes one of the two oldest ready messages left that no group holds
            # back (docs/DELIVERY.md, "How FIFO holds").
            assert len(got) == len(expected), (got, expected)
            assert len({g.id for g in got}) == len(got)
            taken = self.model.loose_fetch(queue, [g.id for g in got], holder)
            assert taken is not None, (got, self.model.fetchable(queue))
            by_id = {m.id: m for m in taken}
            claimed = [by_id[g.id] for g in got]
        else:
            assert [g.id for g in got] == [m.id for m in expected], (got, expected)
            claimed = expected
        for g, m in zip(got, claimed):
            assert g.attempts == m.deliveries + 1, (g, m)
            assert g.receipt == f"{m.id}.{g.attempts}", g
            if m.parts:
                assert g.parts == m.parts and g.kind in (None, "compound"), (g, m)
            else:
                assert g.body == m.key and not g.parts and g.kind in (None, "normal"), (g, m)
            self.model.claim(m, now)
            self.handed.append((queue, g))

    @rule(n=st.integers(1, 10), dead=st.booleans())
    def fetch(self, n, dead):
        """A fetch of up to n (the front's most) from the main or the dead-letter queue."""
        queue, n = (self.dead if dead else self.main), min(n, self.front.batch)
        if queue not in self.model.queues or (dead and self.retry == -1 and self.front.name == "sqs"):
            return
        self.check_fetch(queue, self.front.fetch(queue, n), n, self.front.name == "sqs")

    @rule(op=st.sampled_from(["ack", "nack", "extend"]))
    def fetch_then_answer(self, op):
        """Fetch one message of the main queue and answer it at once by its receipt."""
        handed = len(self.handed)
        self.check_fetch(self.main, self.front.fetch(self.main, 1), 1, self.front.name == "sqs")
        if len(self.handed) > handed:
            queue, got = self.handed[-1]
            self.answer(queue, got.id, got.attempts, got.receipt, op,
                        LONG if op == "extend" else None)

    @precondition(lambda self: hasattr(self.front, "pull_any"))
    @rule()
    def pull_any(self):
        """Pull-any over the main and dead-letter queues: the oldest ready message of both
        (pull-any over a fifo queue whose groups are held: test_model_regressions.py)."""
        pattern = f"{self.run}-[md]"
        got = self.front.pull_any(pattern)
        ready = sorted(self.model.fetchable(self.main) + self.model.fetchable(self.dead),
                       key=lambda m: m.seq)
        assert len(got) == min(1, len(ready)), (got, ready)
        if got:
            m = next(m for m in ready if m.id == got[0].id) if self.loose_order else ready[0]
            self.check_fetch(m.queue, got, 1)

    # -- replies --------------------------------------------------------------------------

    def answer(self, queue, message_id, delivery, receipt, op, seconds=None):
        """One reply through the front, compared with the model's outcome."""
        m = self.model.find(queue, message_id)
        before = (m.state, m.deliveries, self.model.queues[queue].props.fifo) if m else None
        outcome = self.model.reply(queue, message_id, delivery, op, time.time(), seconds)
        expected = self.front.expected(op, outcome, before, delivery)
        seen = self.front.reply(queue, message_id, receipt, op, seconds)
        assert seen == expected, (op, queue, receipt, before, outcome, seen)
        if (self.front.deletes_expired and op == "ack" and outcome == CONFLICT and before
                and before[0] == READY and before[1] == delivery and not before[2]):
            self.model.reply(queue, message_id, None, "delete")  # As SQS, standard queues.

    @rule(pick=st.integers(0, 1 << 16), op=st.sampled_from(["ack", "nack", "extend"]),
          with_receipt=st.booleans())
    def reply(self, pick, op, with_receipt):
        """ack, nack or extend a delivery handed out earlier (current or stale), by its
        receipt or, where the front can, without one."""
        if not self.handed:
            return
        queue, got = self.handed[pick % len(self.handed)]
        if not with_receipt and self.front.name != "sqs":
            self.answer(queue, got.id, None, None, op, LONG if op == "extend" else None)
        else:
            self.answer(queue, got.id, got.attempts, got.receipt, op,
                        LONG if op == "extend" else None)

    @precondition(lambda self: self.front.delete_by_id)
    @rule(pick=st.integers(0, 1 << 16), own=st.booleans())
    def delete(self, pick, own):
        """Remove a message by id from whatever state, in its own queue or the main queue
        (or find it gone)."""
        known = [m for m in self.model.msgs.values() if m.id and m.state != PART]
        if known:
            m = known[pick % len(known)]
            self.answer(m.queue if own else self.main, m.id, None, None, "delete")

    @precondition(lambda self: hasattr(self.front, "ack_many"))
    @rule(picks=st.lists(st.integers(0, 1 << 16), min_size=1, max_size=5))
    def ack_batch(self, picks):
        """A batch ack of the main queue's deliveries: each receipt's own outcome, in order."""
        mine = [g for q, g in self.handed if q == self.main]
        if not mine:
            return
        chosen = [mine[p % len(mine)] for p in picks]
        expected = [self.model.reply(self.main, g.id, g.attempts, "ack") for g in chosen]
        assert self.front.ack_many(self.main, [g.receipt for g in chosen]) == expected

    @rule(pick=st.integers(0, 1 << 16))
    def timer_runs_out(self, pick):
        """Shorten an in-flight delivery's timer, wait until it is due: the message is ready
        again, or a dead letter after its last allowed delivery."""
        current = {(q, g.id): g for q, g in self.handed}
        flying = [m for q in self.model.queues for m in self.model.messages(q, IN_FLIGHT)
                  if (m.queue, m.id) in current]
        if not flying:
            return
        m = flying[pick % len(flying)]
        got = current[(m.queue, m.id)]
        assert got.attempts == m.deliveries
        queue, seconds = m.queue, self.short()
        assert self.front.extend_soon(queue, got, seconds) == "ok"
        self.wait_until(time.time() + seconds)
        self.model.expire(m)
        self.until_served(f"{m.id}'s timer run out", queue, m.queue)

    # -- queues ---------------------------------------------------------------------------

    @precondition(lambda self: not getattr(self, "purged", False))
    @rule()
    def purge(self):
        """Purge the main queue (once a run: SQS allows one a minute)."""
        self.purged = True
        count = self.front.purge(self.main)
        expected = self.model.purge(self.main, self.front.purge_forgets_keys)
        assert count in (None, expected), (count, expected)

    @rule()
    def retention_removes(self):
        """A retention of 1 s removes every message older than that, in every state; a
        receipt of one acks nothing after. (Set through mq's API: SQS allows 60 s at least.)"""
        if not self.model.messages(self.main, READY, DELAYED, IN_FLIGHT):
            return
        self.front.patch(self.main, {"retention": 1})
        cutoff = time.time()
        youngest = max(m.added for m in self.model.messages(self.main, READY, DELAYED, IN_FLIGHT))
        self.wait_until(youngest + 1.0)
        self.model.retain_after(self.main, cutoff)
        self.until_root_agrees("the queue emptied by retention", self.main)
        self.front.patch(self.main, {"retention": 0})

    # -- what must hold after every step --------------------------------------------------

    @invariant()
    def root_matches_model(self):
        """Every message is where the model says, with the delivery count it says."""
        self.steps += 1
        for queue in list(self.model.queues):
            assert self.root_agrees(queue), (queue, root_view.files(self.daemon.root, queue),
                                             self.model.files(queue))

    @invariant()
    def no_server_errors(self):
        """No front.error or sqs.error line in the daemon's log (read from where it was
        read last)."""
        bad, type(self).log_read = lines_logging(self.daemon.log_path, type(self).log_read,
                                                 ERROR_EVENTS)
        assert not bad, bad

