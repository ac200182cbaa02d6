"""SaveActor: writes messages into new/, flushes once per batch, delivers them by rename.

The one command, add, writes the message file; settle() then does the batch's two phases:
flush the data, record de-duplication keys, rename every file into its queue, flush again
(a batch of plain adds skips the first flush: one_flush).
"""

import os
import time

from mq import operations as ops
from mq import properties
from mq import store as fmt
from mq.actors import accumulation, fanout, save_batch
from mq.actors.add_batch import AddBatch, Written
from mq.actors.base import Actor
from mq.actors.batch import DEFERRED, Request
from mq.actors.counters import Counters, counters_file
from mq.actors.pace import deadline
from mq.adds import checked_add, with_properties
from mq.errors import MqError, NotFound, Unavailable, from_os_error
from mq.ids import new_id

#: Longest time, in seconds, an add waits for an earlier add with its de-duplication key that
#: is still being written (by this or another save actor) before it answers 503.
PENDING_KEY_SECONDS = 5.0
#: How often, in milliseconds, such waiting adds look again.
PENDING_KEY_POLL_MS = 2


class SaveActor(Actor[AddBatch]):
    """Durably adds messages; no reply goes out before its own message is on stable media."""

    kind = "save"
    batch_class = AddBatch

    def __init__(self, options, index: int, run_dir: str, store=None):
        super().__init__(options, index, run_dir, store)
        self.props = properties.PropertyFiles(self.store, {"max_body_bytes": options.max_body_bytes})
        self.pending_keys: list = []  # (request, deadline) of adds waiting for their key's add
        self.deadlines: dict = {}
        self.fanouts: list = []  # the fan-outs of the batch being handled (actors/fanout.py)
        self.counters = Counters(path=counters_file(run_dir, f"{self.kind}-{index}"))
        self.writer_name = f"{os.path.basename(self.run_dir)}/save-{self.index}"

    def start(self) -> None:
        """Clean up a crashed predecessor's files, then connect to the mover and fetch actors."""
        self.clean_predecessor()
        self.connect_mover()
        self.connect_fetchers()

    def clean_predecessor(self) -> int:
        """Move the files a killed predecessor left in new/ to remove/, dropping their keys:
        they were never acknowledged, and a retry of their adds must be stored."""
        cleaned = self.store.clean_new(writer=self.writer())
        if cleaned:
            self.log.info("save.cleaned_new", count=cleaned)
        return cleaned

    def writer(self) -> str:
        """The name this actor writes into every file's header: its daemon's folder and index."""
        return self.writer_name

    def add(self, batch: AddBatch, request: ops.Add, sender: Request):
        """Write an add (checked as it was decoded) into new/ (renamed into view by settle)."""
        now = time.time()
        add = checked_add(request.queue, request.body, request.content_type, request.due,
                          request.dedup_id, now, request.group, request.attributes)
        props = batch.properties(add.queue, self.props)
        accumulation.refuse_schedule(add, props)
        with_properties(add, props, self.options.max_body_bytes, now,
                        default_delay=request.due is None)
        if props["accum"] > 0:
            add.due = None  # A part waits for its window, not for the delay property.
        if not self.store.auto_create and not self.store.queue_exists(add.queue):
            raise NotFound(f"queue {add.queue!r} does not exist (auto-create is off)")
        if request.must_exist and not self.store.queue_exists(add.queue):
            raise NotFound(f"queue {add.queue!r} does not exist")
        if add.dedup_id:
            earlier = self.store.dedup.lookup(add.queue, add.dedup_id, props["dedup_window"], now)
            if earlier:
                return self.duplicate(batch, sender, add.queue, earlier)
        message_id = new_id(int(now * 1000))
        data = fmt.encode_message(add.body, add.content_type, int(now * 1000), message_id,
                                  add.dedup_id, self.writer_name, group=add.group,
                                  attributes=add.attributes)
        self.store.write_new(add.queue, message_id, data, add.due)
        batch.written.append(Written(len(batch.results), add, message_id, props["dedup_window"],
                                     accum=props["accum"]))
        return None  # Answered by settle().

    def duplicate(self, batch: AddBatch, request: Request, queue: str, earlier: str):
        """The answer to an add whose key names an earlier message, once that one is durable.

        An earlier add still in new/ is in progress (or its writer died, and its successor
        cleans it up): answering with its id now could name a message that is never stored,
        so this add waits (DEFERRED) and is tried again until that one is delivered or gone.
        The batch flushes the folders the earlier message may have entered (store.dedup.pending
        records them), so the reply never leaves before the earlier add's rename is durable.
        """
        if self.store.dedup.pending(queue, earlier, batch.changes):
            return self.defer(request)
        return {"id": earlier, "queue": queue, "duplicate": True}

    def defer(self, request: Request):
        """Wait for the add holding this request's key; 503 once PENDING_KEY_SECONDS passed."""
        deadline = self.deadlines.get(id(request), time.monotonic() + PENDING_KEY_SECONDS)
        if time.monotonic() > deadline:
            raise Unavailable("an add with this de-duplication key is still in progress; retry")
        self.pending_keys.append((request, deadline))
        return DEFERRED

    def stats(self, batch: AddBatch, request: ops.Stats, sender: Request) -> dict:
        """The adds this actor stored, per queue: totals and rates over the last minute."""
        return {"actor": f"{self.kind}-{self.index}", "queues": self.counters.report(),
                "flush": self.store.flush_times.snapshot(), "tables": self.gone.sizes()}

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

    COMMANDS = {"add": (ops.Add, add), "add_batch": (ops.AddBatch, save_batch.add_batch),
                "add_fanout": (ops.AddFanout, fanout.add_fanout), "stats": (ops.Stats, stats)}

    def handle(self, requests: list[Request]) -> AddBatch:
        """Apply a batch, each fan-out as one add per queue (actors/fanout.py)."""
        expanded, places = fanout.expand(requests)
        if expanded == requests:
            return super().handle(requests)
        # Read by settle(), which rolls back a failed fan-out's copies before the flush.
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

    def settle(self, batch: AddBatch) -> None:
        """Flush the data, record keys, rename each file into view, flush, fill in the results."""
        written = batch.written
        if not written:
            save_batch.assemble(batch)
            return super().settle(batch)
        if not self.one_flush(written):
            try:
                self.store.flush_data()
            except OSError as err:
                return self.fail(batch, written, from_os_error(err, "cannot flush messages"))
        written = self.expire(batch, written)
        written = self.record_keys(batch, written)
        delivered = []
        for item in written:
            if batch.outcome(item) is not None:
                continue  # Its add_batch already failed: the file is gone from new/.
            try:
                accumulation.deliver(self.store, batch, item)
                delivered.append(item)
            except (MqError, OSError) as err:
                self.forget(item)
                self.store.discard_new(item.add.queue, item.id, batch.changes)
                batch.set_outcome(item, err if isinstance(err, MqError) else
                                  from_os_error(err, "cannot deliver message"))
                self.log.error("save.deliver_failed", queue=item.add.queue, id=item.id,
                               error=str(err))
                save_batch.drop_rest(self, batch, item, written, delivered)
        delivered = save_batch.roll_back_failed(self, batch, delivered)
        delivered = fanout.roll_back(self, batch, delivered, self.fanouts)
        try:
            self.store.flush(batch.changes)
        except OSError as err:
            error = from_os_error(err, "cannot flush message folders")
            for item in delivered:
                accumulation.undeliver(self.store, item)  # Not acknowledged, so not kept.
                self.forget(item)
            self.fail(batch, delivered, error, unlink=False)
            batch.results = [error if isinstance(r, dict) else r for r in batch.results]
            return
        for item in delivered:
            due = item.add.due
            result = {"id": item.id, "queue": item.add.queue, "due": due,
                      "accumulated": accumulation.outcome(item)}
            batch.set_outcome(item, result)
            self.counters.count(item.add.queue, "adds")
            if item.joined:
                result["due"] = accumulation.closes(item)
            elif due is None:
                batch.add_ready(item.add.queue, item.id)
            else:
                batch.hidden.append((item.add.queue, item.id, 0, due))
        self.answer_followers(batch)
        save_batch.assemble(batch)

    def one_flush(self, written: list[Written]) -> bool:
        """Whether one syncfs after the renames can make a batch durable, instead of one
        before them as well (docs/FORMAT.md, "Add").

        A crash between the renames and that syncfs can leave a message's name in its queue
        without its bytes: an add never acknowledged, whose file every reader refuses (the
        length and CRC-32 in its header, the id in its name). That holds for plain adds only:
        a de-duplication key must not name a message before its data is durable, a part joins
        a window another batch may close, a fan-out's copies are all or none, a delayed
        message's due time is its file's mtime; and a daemon of an older version sharing the
        root (--peers) does not check the length or the CRC.
        """
        return (self.store.disk.sync == "fs" and not self.options.peers and not self.fanouts
                and all(not item.add.dedup_id and not item.accum and item.add.due is None
                        for item in written))

    def send_notes(self, batch: AddBatch) -> None:
        """After the flush: also tell the mover the windows this batch opened."""
        super().send_notes(batch)
        for queue, window in batch.windows:
            self.send(self.mover, ops.Window(queue=queue, window=window))

    def expire(self, batch: AddBatch, written: list[Written]) -> list[Written]:
        """Before the renames into view: discard the files of every request that cannot be
        answered before its deadline (its front answers 503 then, so it must store nothing:
        actors/pace.py); return the items that stay."""
        ends = time.monotonic() + self.pace.commit_seconds(len(written))
        late = {item.pos for item in written
                if (due := deadline(batch.requests[item.pos].payload)) is not None and ends > due}
        if not late:
            return written
        refusal = self.pace.refusal(len(written))
        for item in written:
            if item.pos in late:
                self.store.discard_new(item.add.queue, item.id, batch.changes)
                batch.set_outcome(item, refusal)
        self.log.warning("save.expired", requests=len(late))
        return [item for item in written if item.pos not in late]

    def record_keys(self, batch: AddBatch, written: list[Written]) -> list[Written]:
        """Record de-duplication keys (after the data is durable, before delivery).

        An add that loses the race for its key discards its file. Its answer is the winner's:
        a duplicate of an earlier add, or, when the winner is in this batch, that add's own
        outcome (answer_followers), so a duplicate never names a message that failed.
        """
        now, kept, mine = time.time(), [], {}
        for item in written:
            if not item.add.dedup_id:
                kept.append(item)
                continue
            try:
                earlier = self.store.dedup.record(item.add.queue, item.add.dedup_id, item.id,
                                                  item.window, now, batch.changes)
            except (OSError, MqError) as err:
                earlier = None
                batch.set_outcome(item, err if isinstance(err, MqError) else
                                  from_os_error(err, "cannot record de-duplication key"))
            if earlier is None and batch.outcome(item) is None:
                mine[(item.add.queue, item.id)] = item
                kept.append(item)
                continue
            self.store.discard_new(item.add.queue, item.id, batch.changes)
            if earlier is not None:
                winner = mine.get((item.add.queue, earlier))
                if winner is not None:
                    batch.followers.append((item, winner))
                elif item.slot is not None:
                    batch.set_outcome(item, save_batch.duplicate_part(self, batch, item.add.queue,
                                                                      earlier))
                else:
                    try:
                        batch.results[item.pos] = self.duplicate(
                            batch, batch.requests[item.pos], item.add.queue, earlier)
                    except MqError as err:
                        batch.results[item.pos] = err
        return kept

    def answer_followers(self, batch: AddBatch) -> None:
        """Answer each add that lost its key to an add of this batch with that add's outcome."""
        for item, winner in batch.followers:
            result = batch.outcome(winner)
            batch.set_outcome(item, dict(result, duplicate=True) if isinstance(result, dict)
                              else result)

    def forget(self, item: Written) -> None:
        """Drop the key an unacknowledged add recorded, so the client's retry is stored."""
        if item.add.dedup_id:
            self.store.dedup.forget(item.add.queue, fmt.dedup_digest(item.add.dedup_id), item.id)

    def fail(self, batch: AddBatch, written: list[Written], error: MqError, unlink: bool = True) -> None:
        """Answer every written add with the error; their files are dropped (never acknowledged)."""
        for item in written:
            if unlink:
                self.store.discard_new(item.add.queue, item.id, batch.changes)
            batch.set_outcome(item, error)
        self.answer_followers(batch)
        save_batch.assemble(batch)
        self.log.error("save.flush_failed", error=error.message, count=len(written))
