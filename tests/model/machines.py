"""The rules of features not every front has: accumulation windows, fifo message groups,
redrive, and the batch forms' own refusals; and machine_for(), which names the front."""

import math
import time

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

import root_view
from fronts_more import Sqs
from machine import LONG, FrontMachine
from queue_model import PART, READY
from support import poll_for

#: The accumulating queue's window, in seconds.
ACCUM = 0.5
#: Its body limit: a batch with one longer body is refused as a whole.
ACCUM_BODY_LIMIT = 64
GROUPS = ("ga", "gb")


def window_of(t: float, accum: float) -> float:
    """The close time of the window an add at time t joins (docs/DELIVERY.md, "Windows")."""
    return (math.floor(t / accum) + 1) * accum


class FeatureMachine(FrontMachine):
    """FrontMachine with the accumulating and fifo queues where the front has them."""

    def __init__(self):
        super().__init__()
        self.acc, self.fifo = f"{self.run}-a", f"{self.run}-f.fifo"
        self.sqs = None

    def queue_named(self, which: str) -> str:
        """The run's queue by role."""
        return {"main": self.main, "dead": self.dead, "acc": self.acc, "fifo": self.fifo}[which]

    # -- accumulation ---------------------------------------------------------------------

    @initialize()
    def create_accumulating_queue(self):
        """A queue with a short accumulation window (mq.local adds normal messages to it);
        the REST fronts and mq.local only."""
        if self.front.name not in ("rest", "rest-batch", "local"):
            return
        props = {"timeout": LONG, "accum": ACCUM, "max_body_bytes": ACCUM_BODY_LIMIT}
        self.front.create_queue(self.acc, props)
        self.model.create(self.acc, **props)

    @precondition(lambda self: self.acc in self.model.queues)
    @rule()
    def add_part(self):
        """An add to the accumulating queue: a part of the window it falls in, `new` when it
        opens it, `yes` when it joins it; through mq.local, a normal message."""
        key, t0 = self.body(), time.time()
        added = self.front.add(self.acc, key)
        t1 = time.time()
        open_windows = self.model.open_windows(self.acc)
        m = self.model.add(self.acc, key, t1, accumulate=self.front.accumulates)
        m.id = added.id
        if not self.front.accumulates:
            assert m.state == READY and added.accumulated in (None, "no"), added
            return
        assert m.state == PART
        # The daemon read its clock between t0 and t1, an instant the test cannot see.
        assert window_of(t0, ACCUM) - 1e-3 <= added.due <= window_of(t1, ACCUM) + 1e-3, added
        # A batch add's records say it as a single add does (docs/FRONTENDS.md).
        assert added.accumulated == ("yes" if added.due in open_windows else "new"), added
        m.window = added.due

    @precondition(lambda self: self.acc in self.model.queues)
    @rule()
    def windows_close(self):
        """Wait for the open windows to close: each becomes one ready compound of its parts,
        in add order, and no part is left."""
        if not self.model.open_windows(self.acc):
            return
        self.close_windows()

    def close_windows(self):
        """Wait for every open window to be combined, and name its compound in the model."""
        windows = sorted(self.model.open_windows(self.acc))
        self.wait_until(windows[-1] + 0.1)

        def combined():
            """No part left, and a new compound for each window."""
            files = root_view.files(self.daemon.root, self.acc)
            parts = [i for i, (state, _) in files.items() if state == "part"]
            return not parts and len(self.unknown_ids(self.acc)) == len(windows)

        poll_for(combined, 15, interval=0.05, what="every window to be combined")
        for window, compound_id in zip(windows, sorted(self.unknown_ids(self.acc))):
            self.model.close_window(self.acc, window, f"compound-{compound_id}").id = compound_id
        self.until_served("the compounds", self.acc)

    @precondition(lambda self: self.front.name == "rest-batch" and self.acc in self.model.queues)
    @rule()
    def refused_batch_leaves_no_part(self):
        """A batch with one body over the queue's limit is refused whole: no part stays."""
        lines = b'{"body": "fits"}\n{"body": "%s"}' % (b"x" * (ACCUM_BODY_LIMIT + 1))
        resp = self.front.http("POST", f"/{self.acc}/messages", lines,
                               {"Content-Type": "application/x-ndjson"})
        assert resp.status == 413, (resp.status, resp.body)
        files = root_view.files(self.daemon.root, self.acc)
        # An unknown ready id is a compound of a window the clock closed; a part must be known.
        assert not [i for i in self.unknown_ids(self.acc) if files.get(i, ("",))[0] == PART]

    @precondition(lambda self: self.front.name == "rest-batch")
    @rule(n=st.sampled_from([0, 101, 10 ** 30]))
    def batch_fetch_out_of_range(self, n):
        """?max= outside 1 to 100 is 400 and claims nothing."""
        resp = self.front.http("GET", f"/{self.main}/messages?max={n}")
        assert resp.status == 400, (resp.status, resp.body)

    # -- fifo message groups --------------------------------------------------------------

    @initialize()
    def create_fifo_queue(self):
        """A fifo queue made through the SQS API (the only front that sets groups); the
        front under test fetches and answers its messages."""
        self.sqs = self.front if isinstance(self.front, Sqs) else Sqs(self.daemon)
        self.sqs.create_queue(self.fifo, {"timeout": LONG, "retry": -1})
        self.model.create(self.fifo, timeout=LONG, retry=-1, fifo=True)

    @precondition(lambda self: self.sqs is not None)
    @rule(group=st.sampled_from(GROUPS), dedup=st.none() | st.sampled_from(("d0", "d1")))
    def add_to_group(self, group, dedup):
        """SendMessage with a group; a repeated de-duplication id answers the first id."""
        key = self.body()
        dedup = dedup or f"k-{key}"
        added = self.sqs.add(self.fifo, key, dedup=dedup, group=group)
        m = self.model.add(self.fifo, key, time.time(), dedup=dedup, group=group)
        if m.key == key:
            m.id = added.id
        assert added.id == m.id, (added, m)

    @precondition(lambda self: self.sqs is not None)
    @rule(n=st.integers(1, 10))
    def fetch_groups(self, n):
        """A fetch from the fifo queue: no message of a group whose older message is in
        flight; one SQS receive takes more of a group it holds."""
        n = min(n, self.front.batch)
        self.check_fetch(self.fifo, self.front.fetch(self.fifo, n), n, self.front.name == "sqs")

    @precondition(lambda self: self.acc in self.model.queues)
    @rule()
    def fetch_compound(self):
        """A fetch from the accumulating queue (a compound's parts as they were added),
        once every window is combined: the daemon closes them by the clock."""
        if self.front.accumulates and self.model.open_windows(self.acc):
            self.close_windows()
        n = self.front.batch
        self.check_fetch(self.acc, self.front.fetch(self.acc, n), n)

    # -- redrive --------------------------------------------------------------------------

    @precondition(lambda self: self.front.name == "rest")
    @rule()
    def redrive(self):
        """POST /{q}/redrive: every ready dead letter back to the queue, its count at 0."""
        resp = self.front.http("POST", f"/{self.main}/redrive")
        assert resp.status == 200, (resp.status, resp.body)
        assert resp.json()["moved"] == self.model.redrive(self.main)


def machine_for(daemon, front_class, loose_order: bool = False) -> type:
    """A machine class that drives front_class against daemon (a new front per example)."""

    class Machine(FeatureMachine):
        """FeatureMachine on this daemon and front."""

        def __init__(self):
            if front_class.__name__ == "Rpc":
                type(self).front = front_class(daemon, daemon.rpc_port)
            else:
                type(self).front = front_class(daemon)
            super().__init__()

    Machine.__name__ = f"{front_class.__name__}Machine"
    Machine.daemon, Machine.loose_order = daemon, loose_order
    return Machine
