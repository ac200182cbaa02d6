"""The settlement of a save batch: its adds written into new/, made durable and answered together.

A `Settlement` owns what one batch of the save actor wrote: each add whose file is in new/
(`Written`, actors/written.py, with the renames of its file), the all-or-none groups they
belong to (a single add alone, the messages of one add_batch request, the copies of one
fan-out) and what each came to (`Outcomes`, actors/outcomes.py). The save actor's commands
write through it (`write`, `write_batch`); `SaveActor.settle` then runs its phases in order:

1. `flush_data`: make the files in new/ durable (a batch of plain adds skips it: `one_flush`);
2. `record_keys`: record de-duplication keys; an add that lost its key drops its file;
3. `rename_into_view`: rename each file into its queue, delay/ or its queue's open window;
4. `roll_back`: before the flush, take back every message of a group that failed;
5. `sync`: flush the batch's changes (when that fails, move what was renamed to remove/);
6. `answer`: each add's result, the ready ids and due times, each batch request's result.

A storage error on any message of a batch request, or a message whose key loses to an add
that fails, fails the whole request; a copy of a fan-out that fails for another reason than its
queue having gone fails the fan-out: the files still in new/ are unlinked, the ones already
renamed (or, as parts, put in a window) are unlinked from there before the flush, their keys
dropped, and the group answers the error. None of its messages is ever acknowledged, handed to
a fetch actor or combined into a compound.
"""

import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from mq.actors.batch import Batch, Request
from mq.actors.fanout import Fanout, failure
from mq.actors.outcomes import Outcomes, first_error
from mq.actors.overlapped import OverlappedFileCalls
from mq.actors.written import Written, write_new
from mq.adds import CheckedAdd
from mq.errors import MqError, Unavailable, from_os_error
from mq.store import Store


class Settlement(OverlappedFileCalls):
    """The adds one save batch wrote, their all-or-none groups and outcomes, settled in phases.

    store: where the files are; log: the actor's; batch: whose results (a single add's
    outcome) and changes (the folders to flush) it fills; fanouts: where the copies of each
    fan-out sit in the batch; peers: whether daemons of other versions share the root.
    """

    def __init__(self, store: Store, log, batch: Batch, fanouts: list[Fanout],
                 peers: bool = False, pool: Executor | None = None) -> None:
        self.store = store
        #: Where the file calls of the batch run several at once (actors/overlap.py); None:
        #: one at a time, each write as its command runs.
        self.pool = pool
        #: The files the batch wrote (or, with a pool, will write) into new/.
        self.files = 0
        #: With a pool, those left for write_pending.
        self.waiting = 0
        self.log = log
        self.batch = batch
        self.fanouts = fanouts
        self.peers = peers
        #: The adds whose files are in new/ (after record_keys: those that kept their key).
        self.written: list[Written] = []
        #: (follower, the key's winner): an add that lost its key to an add of this batch.
        self.followers: list[tuple[Written, Written]] = []
        #: What each add came to, and each add_batch request's result (actors/outcomes.py).
        self.outcomes = Outcomes(batch)
        #: (queue, window) opened by this batch's parts, for the mover.
        self.windows: list[tuple[str, str]] = []
        #: The adds renamed into view and not taken back (after sync: the ones stored).
        self.delivered: list[Written] = []
        #: The error of the batch's last flush, which no success of the batch outlives.
        self.flush_error: MqError | None = None

    def refuse(self, positions: set[int], error: MqError) -> None:
        """Discard the written files of the requests at these positions, each answered with
        the error (before any key is recorded or any name made visible)."""
        for item in self.written:
            if item.pos in positions:
                self.store.discard_new(item.add.queue, item.id, self.batch.changes)
                self.outcomes.record(item, error)
        self.written = [item for item in self.written if item.pos not in positions]

    # -- writing (the commands) -------------------------------------------------------------

    def write(self, pos: int, add: CheckedAdd, writer: str, window: float, accum: float,
              now: float) -> None:
        """Write a single add's file into new/; its outcome is pending until the phases run."""
        self.written.append(self.new_file(pos, add, writer, window, accum, now))

    def new_file(self, pos: int, add: CheckedAdd, writer: str, window: float, accum: float,
                 now: float, slot: int | None = None) -> Written:
        """One add's file written into new/, or with a pool kept for write_pending."""
        self.files += 1
        if self.pool is not None:
            self.waiting += 1
        return write_new(self.store, pos, add, writer, window, accum, now, slot,
                         defer=self.pool is not None)

    def pending(self) -> int:
        """The files left for write_pending."""
        return self.waiting

    def write_batch(self, pos: int, queue: str, adds: list[CheckedAdd], writer: str,
                    window: float, accum: float, now: float) -> None:
        """Write the messages of one add_batch request into new/, all or none: a message whose
        key names an earlier message is answered with it; on any failure the files written
        are unlinked and the error raised."""
        parts: list = [None] * len(adds)
        items: list[Written] = []
        try:
            for slot, add in enumerate(adds):
                if add.dedup_id:
                    earlier = self.store.dedup.lookup(queue, add.dedup_id, window, now)
                    if earlier:
                        part = parts[slot] = self.duplicate_part(queue, earlier)
                        if isinstance(part, MqError):
                            raise part
                        continue
                items.append(self.new_file(pos, add, writer, window, accum, now, slot))
        except BaseException:
            for item in items:
                self.store.discard_new(queue, item.id, self.batch.changes)
            raise
        self.outcomes.parts[pos] = parts
        self.written.extend(items)

    def earlier(self, queue: str, earlier: str) -> dict | None:
        """The answer naming an earlier message with an add's key, once that one is durable;
        None while it is still in new/ (the batch then flushes the folders it may have
        entered, which store.dedup.pending records, so the answer never outruns its rename)."""
        if self.store.dedup.pending(queue, earlier, self.batch.changes):
            return None
        return {"id": earlier, "queue": queue, "duplicate": True}

    def duplicate(self, request: Request, queue: str, earlier: str,
                  defer: Callable[[Request], object]) -> object:
        """A single add whose key names an earlier message: that id once it is durable.

        An earlier add still in new/ is in progress (or its writer died, and its successor
        cleans it up): answering with its id now could name a message that is never stored,
        so this add waits (defer: the actor tries it again until that one is delivered or
        gone).
        """
        return self.earlier(queue, earlier) or defer(request)

    def duplicate_part(self, queue: str, earlier: str) -> object:
        """A batch's message whose key names an earlier message: that id once it is durable.

        A single add waits for an earlier add still in new/; a batch does not hold the other
        messages of its request for it, and answers 503 (the client retries the whole batch).
        """
        return self.earlier(queue, earlier) or Unavailable(
            "a message of this batch has a de-duplication key whose add is still in progress; "
            "retry")

    # -- the phases -------------------------------------------------------------------------

    def one_flush(self) -> bool:
        """Whether one syncfs after the renames can make the batch durable, instead of one
        before them as well (docs/FORMAT.md, "Add").

        A crash between the renames and that syncfs can leave a message's name in its queue
        without its bytes: an add never acknowledged, whose file every reader refuses (the
        length and CRC-32 in its header, the id in its name). That holds for plain adds only:
        a de-duplication key must not name a message before its data is durable, a part joins
        a window another batch may close, a fan-out's copies are all or none, a delayed
        message's due time is its file's mtime; and a daemon of an older version sharing the
        root (--peers) does not check the length or the CRC.
        """
        return (self.store.disk.sync == "fs" and not self.peers and not self.fanouts
                and all(not item.add.dedup_id and not item.accum and item.add.due is None
                        for item in self.written))

    def flush_data(self) -> bool:
        """Phase 1: make the written files durable before a key names them or a rename shows
        them (unless one_flush); False when that failed and every add answers the error."""
        if self.one_flush():
            return True
        try:
            self.store.flush_data()
        except OSError as err:
            self.fail(self.written, from_os_error(err, "cannot flush messages"))
            return False
        return True

    def record_keys(self, defer: Callable[[Request], object]) -> None:
        """Phase 2: record de-duplication keys (after the data is durable, before delivery).

        An add that loses the race for its key discards its file. Its answer is the winner's:
        a duplicate of an earlier add, or, when the winner is in this batch, that add's own
        outcome (a follower, answered last), so a duplicate never names a message that failed.
        """
        now, kept = time.time(), list[Written]()
        mine: dict[tuple[str, str], Written] = {}
        for item in self.written:
            if not item.add.dedup_id:
                kept.append(item)
                continue
            try:
                earlier = self.store.dedup.record(item.add.queue, item.add.dedup_id, item.id,
                                                  item.window, now, self.batch.changes)
            except (OSError, MqError) as err:
                earlier = None
                self.outcomes.record(item, err if isinstance(err, MqError) else
                                     from_os_error(err, "cannot record de-duplication key"))
            if earlier is None and self.outcomes.of(item) is None:
                mine[(item.add.queue, item.id)] = item
                kept.append(item)
                continue
            self.store.discard_new(item.add.queue, item.id, self.batch.changes)
            if earlier is not None:
                winner = mine.get((item.add.queue, earlier))
                if winner is not None:
                    self.followers.append((item, winner))
                elif item.slot is not None:
                    self.outcomes.record(item, self.duplicate_part(item.add.queue, earlier))
                else:
                    try:
                        self.batch.results[item.pos] = self.duplicate(
                            self.batch.requests[item.pos], item.add.queue, earlier, defer)
                    except MqError as err:
                        self.batch.results[item.pos] = err
        self.written = kept

    def rename_into_view(self) -> None:
        """Phase 3: rename each pending add out of new/; one that cannot be fails, and so does
        the rest of its batch request still in new/ (with a pool: the rest already renamed
        is taken back by roll_back)."""
        if self.pool is not None and len(self.written) > 1:
            return self.rename_overlapped()
        for item in self.written:
            if self.outcomes.of(item) is not None:
                continue  # Its add_batch already failed: the file is gone from new/.
            try:
                self.deliver(item)
                self.delivered.append(item)
            except (MqError, OSError) as err:
                self.not_delivered(item, err)

    def not_delivered(self, item: Written, err: BaseException) -> None:
        """An add whose rename out of new/ failed: dropped, answered the error, logged."""
        item.forget(self.store)
        self.store.discard_new(item.add.queue, item.id, self.batch.changes)
        self.outcomes.record(item, err if isinstance(err, MqError) else
                             from_os_error(err, "cannot deliver message")
                             if isinstance(err, OSError) else MqError("internal error in save actor"))
        self.log.error("save.deliver_failed", queue=item.add.queue, id=item.id, error=str(err))
        self.drop_rest(item)

    def roll_back(self) -> None:
        """Phase 4, before the flush: take back every delivered message of a batch request or
        a fan-out that failed, all or none."""
        self.delivered = self.roll_back_fanouts(self.roll_back_requests(self.delivered))

    def sync(self) -> bool:
        """Phase 5: flush the batch's changes; when that fails, move every delivered add to
        remove/ (never acknowledged, so not kept) and answer it the error."""
        try:
            self.store.flush(self.batch.changes)
        except OSError as err:
            error = from_os_error(err, "cannot flush message folders")
            for item in self.delivered:
                item.undeliver(self.store)
                item.forget(self.store)
            self.fail(self.delivered, error, unlink=False)
            self.flush_error, self.delivered = error, []
            return False
        return True

    def answer(self) -> list[Written]:
        """Phase 6: each stored add's result (its fetch actor or the mover told after the
        flush), each follower its winner's, each batch request its messages'; return the
        adds stored."""
        for item in self.delivered:
            due = item.add.due
            result: dict = {"id": item.id, "queue": item.add.queue, "due": due,
                      "accumulated": item.accumulated()}
            self.outcomes.record(item, result)
            if item.joined:
                result["due"] = item.closes()
            elif due is None:
                self.batch.add_ready(item.add.queue, item.id, size=item.size)
            else:
                self.batch.hidden.append((item.add.queue, item.id, 0, due))
        for follower, winner in self.followers:
            won = self.outcomes.of(winner)
            self.outcomes.record(follower, dict(won, duplicate=True) if isinstance(won, dict)
                                 else won)
        self.outcomes.assemble()
        if self.flush_error is not None:
            self.outcomes.fail_successes(self.flush_error)
        return self.delivered

    def deliver(self, item: Written) -> None:
        """Rename a written add out of new/ (Written.deliver); a window it opened is kept
        for the mover."""
        window = item.deliver(self.store, self.batch.changes)
        if window is not None:
            self.windows.append((item.add.queue, window))

    def fail(self, items: list[Written], error: MqError, unlink: bool = True) -> None:
        """Answer every item with the error; their files are dropped (never acknowledged)."""
        for item in items:
            if unlink:
                self.store.discard_new(item.add.queue, item.id, self.batch.changes)
            self.outcomes.record(item, error)
        self.log.error("save.flush_failed", error=error.message, count=len(items))

    # -- all or none ---------------------------------------------------------------------------

    def drop_rest(self, failed: Written) -> None:
        """A message of a batch request could not be delivered: discard the ones of its request
        still in new/ (the ones already delivered are rolled back by roll_back)."""
        if failed.slot is None:
            return
        error, done = self.outcomes.of(failed), {id(item) for item in self.delivered}
        for item in self.written:
            if item.pos == failed.pos and self.outcomes.of(item) is None and id(item) not in done:
                item.forget(self.store)
                self.store.discard_new(item.add.queue, item.id, self.batch.changes)
                self.outcomes.record(item, error)

    def roll_back_requests(self, delivered: list[Written]) -> list[Written]:
        """Take back every delivered message of a batch request that failed; return the
        delivered messages that stay.

        A request fails with its first failed message; a message that lost its key to a
        message of this batch that failed (a follower) fails with it, which can fail its own
        request.
        """
        failed: dict = {}
        while True:
            for follower, winner in self.followers:
                won = self.outcomes.of(winner)
                if self.outcomes.of(follower) is None and isinstance(won, MqError):
                    self.outcomes.record(follower, won)
            newly = {pos: error for pos, parts in self.outcomes.parts.items()
                     if pos not in failed and (error := first_error(parts)) is not None}
            if not newly:
                break
            failed.update(newly)
            for pos, error in newly.items():
                parts = self.outcomes.parts[pos]
                parts[:] = [error] * len(parts)
        kept = []
        for item in delivered:
            if item.slot is None or item.pos not in failed:
                kept.append(item)
                continue
            item.forget(self.store)
            try:
                item.take_back(self.store)
            except OSError as err:
                self.log.error("save.rollback_failed", queue=item.add.queue, id=item.id,
                               error=str(err))
        if failed:
            self.log.error("save.batch_failed", count=len(failed))
        return kept

    def roll_back_fanouts(self, delivered: list[Written]) -> list[Written]:
        """Take back every delivered copy of a fan-out that failed; return the delivered adds
        that stay.

        Its client is told it failed and retries, so a copy it was not told about would be a
        duplicate. Taken back here, before the flush and the notes, a copy was never announced
        to a fetch actor, and a part leaves its window before the mover can close it into a
        compound (a part is no message of its own: no removal by id finds it).
        """
        results = self.batch.results
        doomed: dict[int, MqError] = {}
        for place in self.fanouts:
            positions = range(place.first, place.first + len(place.queues))
            error = next((results[p] for p in positions if failure(results[p])), None)
            if error is not None:
                doomed.update(dict.fromkeys(positions, error))
        kept, taken = [], 0
        for item in delivered:
            error = doomed.get(item.pos) if item.slot is None else None
            if error is None:
                kept.append(item)
                continue
            try:
                item.take_back(self.store)
                taken += 1
            except OSError as err:
                self.log.error("save.fanout_take_back_failed", queue=item.add.queue, id=item.id,
                               error=str(err))
            self.outcomes.record(item, error)
        if taken:
            self.log.warning("save.fanout_taken_back", count=taken)
        return kept

@dataclass
class SaveActorBatch(Batch):
    """A save actor's batch: its requests' effects (Batch) and the settlement of its adds."""

    settlement: Settlement = field(init=False)
