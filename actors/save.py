"""SaveActor: writes messages into new/, flushes once per batch, delivers them by rename.

The commands (add, add_batch, add_fanout expanded into adds) check each add and write its file
through the batch's Settlement (actors/settlement.py), which owns what they wrote; settle()
runs its phases: flush the data, record de-duplication keys, rename every file into view, roll
back the groups that failed, flush again, answer (a batch of plain adds skips the first flush).
"""

import os
import time
from concurrent.futures import Executor

from mq import operations as ops
from mq import properties
from mq.actors import accumulation, fanout, save_batch
from mq.actors.base import Actor
from mq.actors.batch import DEFERRED, Request
from mq.actors.commands import by_fields, served
from mq.actors.counters import Counters, counters_file
from mq.actors.overlap import THREADS as OVERLAP_THREADS
from mq.actors.overlap import Overlap
from mq.actors.pace import deadline
from mq.actors.settlement import SaveActorBatch, Settlement
from mq.adds import checked_add, with_properties
from mq.config import Options
from mq.errors import NotFound, Unavailable
from mq.operations.fields import SAVE

#: Longest time, in seconds, an add waits for an earlier add with its de-duplication key that
#: is still being written (by this or another save actor) before it answers 503.
PENDING_KEY_SECONDS = 5.0
#: How often, in milliseconds, such waiting adds look again.
PENDING_KEY_POLL_MS = 2


class SaveActor(Actor[SaveActorBatch]):
    """Durably adds messages; no reply goes out before its own message is on stable media."""

    kind = "save"
    batch_class = SaveActorBatch
    refuses = "late"

    def __init__(self, options: Options, index: int, run_dir: str, store=None):
        super().__init__(options, index, run_dir, store)
        self.props = properties.PropertyFiles(self.store, {"max_body_bytes": options.max_body_bytes})
        self.pending_keys: list = []  # (request, deadline) of adds waiting for their key's add
        self.deadlines: dict = {}
        self.fanouts: list = []  # the fan-outs of the batch being handled (actors/fanout.py)
        self.counters = Counters(path=counters_file(run_dir, f"{self.kind}-{index}"))
        self.writer_name = f"{os.path.basename(self.run_dir)}/save-{self.index}"
        #: One file call at a time, or several once they wait on the file system.
        self.overlap = Overlap()
        self.pool: Executor | None = None  # the batch in hand's (Overlap.begin), for new_batch

    def start(self) -> None:
        """Clean up a crashed predecessor's files, then connect to the mover and fetch actors."""
        self.clean_predecessor()
        self.connect_mover()
        self.connect_fetchers()

    def clean_predecessor(self) -> int:
        """Move the files a killed predecessor left in new/ to remove/, dropping their keys:
        they were never acknowledged, and a retry of their adds must be stored."""
        cleaned = self.store.recovery.clean_new(writer=self.writer())
        if cleaned:
            self.log.info("save.cleaned_new", count=cleaned)
        return cleaned

    def writer(self) -> str:
        """The name this actor writes into every file's header: its daemon's folder and index."""
        return self.writer_name

    def new_batch(self, requests: list[Request]) -> SaveActorBatch:
        """A batch whose Settlement knows the fan-outs handle() expanded."""
        batch = SaveActorBatch(requests)
        batch.settlement = Settlement(self.store, self.log, batch, self.fanouts,
                                      bool(self.options.peers), self.pool)
        return batch

    @by_fields
    def add(self, batch: SaveActorBatch, sender: Request, queue: str, body: bytes,
            content_type: str, due: float | None, dedup_id: str | None, must_exist: bool,
            group: str | None, attributes: dict | None):
        """Write an add (its fields checked as ops.Add declares them) into new/ (renamed into
        view by settle)."""
        now = time.time()
        add = checked_add(queue, body, content_type, due, dedup_id, now, group, attributes)
        props = batch.properties(queue, self.props)
        accumulation.refuse_schedule(add, props)
        with_properties(add, props, self.options.max_body_bytes, now,
                        default_delay=due is None)
        if props["accum"] > 0:
            add.due = None  # A part waits for its window, not for the delay property.
        if not self.store.queues.auto_create and not self.store.queues.queue_exists(queue):
            raise NotFound(f"queue {queue!r} does not exist (auto-create is off)")
        if must_exist and not self.store.queues.queue_exists(queue):
            raise NotFound(f"queue {queue!r} does not exist")
        if add.dedup_id:
            earlier = self.store.dedup.lookup(add.queue, add.dedup_id, props["dedup_window"], now)
            if earlier:
                return batch.settlement.duplicate(sender, add.queue, earlier, self.defer)
        batch.settlement.write(len(batch.results), add, self.writer_name, props["dedup_window"],
                               props["accum"], now)
        return None  # Answered by settle().

    def defer(self, request: Request):
        """Wait for the add holding this request's key; 503 once PENDING_KEY_SECONDS passed."""
        deadline = self.deadlines.get(id(request), time.monotonic() + PENDING_KEY_SECONDS)
        if time.monotonic() > deadline:
            raise Unavailable("an add with this de-duplication key is still in progress; retry")
        self.pending_keys.append((request, deadline))
        return DEFERRED

    def stats(self, batch: SaveActorBatch, request: ops.Stats, sender: Request) -> dict:
        """The adds this actor stored, per queue: totals and rates over the last minute."""
        return {"actor": f"{self.kind}-{self.index}", "queues": self.counters.report(),
                "flush": self.store.flush_times.snapshot(), **self.gone.figures(request.heap)}

    def queue_tables(self) -> dict:
        """The queues counted, those whose properties are cached, those delivered into lately."""
        return {"counters": self.counters.queues(), "properties": self.props.queues(),
                "admitted": self.store.states.admitted}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop the counters and cached properties of queues that are gone."""
        for queue in gone:
            self.counters.forget(queue)
            self.props.forget(queue)
        self.store.states.admitted.difference_update(gone)

    COMMANDS = {ops.Add: add, ops.AddBatch: save_batch.add_batch,
                ops.AddFanout: fanout.add_fanout, ops.Stats: stats,
                **served(SAVE)}  # The commands that name their ops (`@serves`).

    def handle(self, requests: list[Request]) -> SaveActorBatch:
        """Apply a batch, its file calls one at a time or several at once as measured
        (actors/overlap.py)."""
        self.pool = self.overlap.begin()
        flushed = self.store.flush_times.total_s
        try:
            batch = self.handle_expanded(requests)
        finally:
            self.pool = None
        was = self.overlap.on
        self.overlap.end(batch.settlement.files, self.store.flush_times.total_s - flushed)
        if self.overlap.on != was:
            self.log.info("save.file_calls", overlap=self.overlap.on,
                          wait_per_file_ms=round(self.overlap.wait_per_file() * 1000, 3))
        return batch

    def handle_expanded(self, requests: list[Request]) -> SaveActorBatch:
        """Apply a batch, each fan-out as one add per queue (actors/fanout.py)."""
        expanded, places = fanout.expand(requests)
        if expanded == requests:
            return super().handle(requests)
        # Read by new_batch(): the settlement rolls back a failed fan-out's copies.
        self.fanouts = [place for place in places if isinstance(place, fanout.Fanout)]
        try:
            return fanout.collapse(super().handle(expanded), requests, places)
        finally:
            self.fanouts = []

    def tick(self) -> None:
        """Try again the adds waiting for an earlier add with their key."""
        if not self.pending_keys:
            return
        waiting, self.pending_keys = self.pending_keys, []
        self.deadlines = {id(request): deadline for request, deadline in waiting}
        requests = [request for request, _ in waiting]
        batch = self.handle(requests)
        self.deadlines = {}
        self.reply_all((request.peer, request.rid, result)
                       for request, result in zip(requests, batch.results) if result is not DEFERRED)

    def poll_timeout_ms(self) -> int:
        """Look again soon while adds wait for a key's earlier add."""
        return PENDING_KEY_POLL_MS if self.pending_keys else 500

    def dispatch(self, batch: SaveActorBatch, request: Request):
        """With a pool, first write the files the requests before left for it once they fill
        its threads: time passes as it does one call at a time, and a request whose deadline
        it passed is refused before its handler (actors/pace.py)."""
        if batch.settlement.pending() >= OVERLAP_THREADS:
            batch.settlement.write_pending()
        return super().dispatch(batch, request)

    def dispatch_all(self, batch: SaveActorBatch, requests: list[Request]) -> None:
        """With a pool, each request through dispatch(), which first writes what is pending."""
        if batch.settlement.pool is None:
            return super().dispatch_all(batch, requests)
        for request in requests:
            batch.results.append(self.dispatch(batch, request))
        return None

    def before_flush(self, batch: SaveActorBatch) -> None:
        """With a pool, write the files the commands left for it (several at once)."""
        batch.settlement.write_pending()

    def settle(self, batch: SaveActorBatch) -> None:
        """Run the settlement's phases (actors/settlement.py); count the adds stored."""
        settlement = batch.settlement
        if not settlement.written:
            settlement.answer()
            return super().settle(batch)
        if settlement.flush_data():
            self.expire(batch)
            settlement.record_keys(self.defer)
            self.deliver_ready(settlement)
            settlement.rename_into_view()
            settlement.roll_back()
            settlement.sync()
        stored: dict[str, int] = {}
        for item in settlement.answer():
            stored[item.add.queue] = stored.get(item.add.queue, 0) + 1
        for queue, count in stored.items():  # Counted once per queue and batch.
            self.counters.count(queue, "adds", count)

    def deliver_ready(self, settlement: Settlement) -> None:
        """Phase 3 for the single adds ready now, one queue at a time (Store.deliver_ready:
        the renames the settlement would make, without a layer per file); the settlement's
        rename_into_view then delivers the others (batch adds' messages, delayed ones,
        parts), and with a pool every one."""
        if settlement.pool is not None:
            return
        by_queue: dict[str, list] = {}
        rest = []
        for item in settlement.written:
            if (item.slot is None and item.accum <= 0 and item.add.due is None
                    and settlement.outcomes.of(item) is None):
                by_queue.setdefault(item.add.queue, []).append(item)
            else:
                rest.append(item)
        if not by_queue:
            return
        settlement.written = rest
        changes = settlement.batch.changes
        for queue, items in by_queue.items():
            outcomes = self.store.deliver_ready(queue, [item.id for item in items], changes)
            for item, error in zip(items, outcomes):
                if error is None:
                    settlement.delivered.append(item)
                else:
                    settlement.not_delivered(item, error)

    def send_notes(self, batch: SaveActorBatch) -> None:
        """After the flush: also tell the mover the windows this batch opened."""
        super().send_notes(batch)
        for queue, window in batch.settlement.windows:
            self.send(self.mover, ops.Window(queue=queue, window=window))

    def expire(self, batch: SaveActorBatch) -> None:
        """Before the renames into view: refuse every request that cannot be answered before
        its deadline, its files discarded (its front answers 503 then, so it must store
        nothing: actors/pace.py)."""
        settlement = batch.settlement
        ends = time.monotonic() + self.pace.commit_batch_seconds()
        late = {item.pos for item in settlement.written
                if (due := deadline(batch.requests[item.pos].payload)) is not None and ends > due}
        if late:
            settlement.refuse(late, self.pace.refusal(len(settlement.written)))
            self.log.warning("save.expired", requests=len(late))
