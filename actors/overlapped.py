"""The save batch's file calls several at once: its writes into new/ and its renames out of
it on the save actor's thread pool, chosen when the actor measures that its file calls wait
on the file system (actors/overlap.py). Part of the Settlement, which owns what they change."""

from concurrent.futures import Executor
from typing import Any

from mq.actors.batch import Batch
from mq.actors.outcomes import Outcomes
from mq.actors.overlap import run_all
from mq.actors.written import Written
from mq.errors import MqError, from_os_error
from mq.store import Store


class OverlappedFileCalls:
    """The Settlement's phases that run on its pool (`pool` set): write_pending after the
    commands, rename_overlapped in place of one rename after another."""

    store: Store
    log: Any
    batch: Batch
    pool: Executor | None
    waiting: int
    written: list[Written]
    delivered: list[Written]
    outcomes: Outcomes

    def deliver(self, item: Written) -> None:
        """Rename one written add out of new/ (the Settlement's)."""
        raise NotImplementedError

    def not_delivered(self, item: Written, err: BaseException) -> None:
        """Answer an add whose rename failed (the Settlement's)."""
        raise NotImplementedError

    def write_pending(self) -> None:
        """With a pool, after the commands: write the batch's files into new/ several at once.
        A request with a file that could not be written answers its error, and its other
        files are unlinked, as when its command's own write fails."""
        pending = [item for item in self.written if item.data is not None]
        self.waiting = 0
        if not pending:
            return
        assert self.pool is not None, "files wait for a write only with a pool"
        store = self.store

        def write(item: Written) -> None:
            assert item.data is not None
            store.write_new(item.add.queue, item.id, item.data, item.add.due)
        outcomes = run_all(self.pool, write, pending)
        failed: dict[int, MqError] = {}
        for item, outcome in zip(pending, outcomes):
            item.data = None
            if isinstance(outcome, BaseException) and item.pos not in failed:
                failed[item.pos] = self.write_error(item, outcome)
        if not failed:
            return
        for item, outcome in zip(pending, outcomes):
            if item.pos in failed and not isinstance(outcome, BaseException):
                self.store.discard_new(item.add.queue, item.id, self.batch.changes)
        for pos, error in failed.items():
            self.batch.results[pos] = error
            self.outcomes.parts.pop(pos, None)
        self.written = [item for item in self.written if item.pos not in failed]

    def write_error(self, item: Written, err: BaseException) -> MqError:
        """The answer to a request one of whose files could not be written, logged."""
        op = self.batch.requests[item.pos].op
        if isinstance(err, MqError):
            return err
        if isinstance(err, OSError):
            error = from_os_error(err, f"cannot {op}")
            self.log.error("actor.disk_error", op=op, queue=item.add.queue, id=item.id,
                           error=error.message, kind=error.kind)
            return error
        self.log.error("actor.error", op=op, queue=item.add.queue, id=item.id,
                       exception=repr(err))
        return MqError("internal error in save actor")

    def rename_overlapped(self) -> None:
        """Phase 3 on the pool: the renames several at once, those of one message group in
        their order (a peer listing the folder meanwhile never sees a group's later message
        without the earlier). A part, and the first add into a queue not yet admitted (which
        may create its folder), are renamed first, one at a time."""
        pending = [item for item in self.written if self.outcomes.of(item) is None]
        admitted, first = self.store.states.admitted, set[str]()
        chains: dict[object, list[Written]] = {}
        outcomes: dict[int, BaseException | None] = {}
        for item in pending:
            queue = item.add.queue
            if item.accum > 0 or (queue not in admitted and queue not in first):
                first.add(queue)
                try:
                    self.deliver(item)
                    outcomes[id(item)] = None
                except (MqError, OSError) as err:
                    outcomes[id(item)] = err
                continue
            chains.setdefault((queue, item.add.group) if item.add.group else id(item),
                              []).append(item)

        def renamed(chain: list[Written]) -> list:
            done: list = []
            for item in chain:
                try:
                    self.deliver(item)
                    done.append(None)
                except BaseException as err:  # noqa: BLE001 - answered as its add's error
                    done.append(err)
            return done
        assert self.pool is not None, "renames overlap only with a pool"
        for chain, done in zip(chains.values(), run_all(self.pool, renamed, chains.values())):
            for item, outcome in zip(chain, done):
                outcomes[id(item)] = outcome
        for item in pending:
            if outcomes[id(item)] is None:
                self.delivered.append(item)
        for item in pending:
            if (failure := outcomes[id(item)]) is not None and self.outcomes.of(item) is None:
                self.not_delivered(item, failure)
