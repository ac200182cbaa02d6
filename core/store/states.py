"""Message states and the renames between them: new, ready, delayed, in flight, removed.

Every change of state is one rename (docs/FORMAT.md, States and transitions). Each method
records the folders its renames touched on the Changes it is given (core/store/changes.py),
which the caller flushes whole before it answers anyone.
"""

import os
from collections.abc import Container, Iterator

from mq.errors import Unavailable, lost_race
from mq.store.changes import Changes, tracked
from mq.store.disk import Disk
from mq.store.names import parse_entry, probe_counts, split_name
from mq.store.queues import Queues
from mq.store.reads import may_exist, read_all
from mq.store.root import Root

#: Seconds a file in delay/ must have been left alone before the mover releases it: a claim
#: sets its due time right after its rename, so a release must not act on the mtime between.
SETTLE_SECONDS = 0.05
#: Most queue names MessageStates.admitted holds (a set of names, emptied when full).
ADMITTED_MAX = 10_000
#: Times an add renames into its queue when a deletion takes the folder meanwhile.
ADMIT_TRIES = 5


class MessageStates:
    """The renames of a message between the root's folders: a member of Store (store.states),
    given the root's paths, its Disk and its queues (a message entering a missing queue)."""

    def __init__(self, paths: Root, disk: Disk, queues: Queues):
        self.paths = paths
        self.disk = disk
        self.queues = queues
        #: Queues a message was delivered into lately: the next one is renamed in without a
        #: stat of the folder first (admit), and admitted only if that rename finds no folder
        #: (the queue deleted since, by any process). Forgotten whole past ADMITTED_MAX.
        self.admitted: set[str] = set()

    def deliver_new(self, queue: str, message_id: str, delayed: bool,
                    changes: Changes | None = None) -> str:
        """Rename a written message from new/ into its queue (or delay/); return the folder.

        The queue is created first if it is missing (auto-create), also for a delayed
        message, so that it has a queue to become ready in.
        """
        source = self.paths.new_path(queue, message_id)
        target = (self.paths.delay_path(queue, message_id) if delayed
                  else self.paths.ready_path(queue, message_id))
        if delayed or queue not in self.admitted:
            self.rename_into_view(queue, source, target)
            if not delayed:
                if len(self.admitted) >= ADMITTED_MAX:
                    self.admitted.clear()
                self.admitted.add(queue)
        else:
            try:
                self.disk.rename(source, target)
            except (FileNotFoundError, NotADirectoryError):
                self.admitted.discard(queue)
                self.rename_into_view(queue, source, target)
        tracked(changes).renamed(source, target)
        return target[:target.rindex("/")]  # a root's path: cut as Changes cuts it

    def rename_into_view(self, queue: str, source: str, target: str) -> None:
        """Rename a written message from new/ into its queue, admitted first; again when a
        deletion or purge took the folder in between. Its file gone from new/ (a deletion, or a
        replicated file system answering from a copy that was away) is 503: never stored."""
        for _ in range(ADMIT_TRIES):
            self.queues.admit(queue, source)
            try:
                return self.disk.rename(source, target)
            except (FileNotFoundError, NotADirectoryError):
                if not os.path.lexists(source):
                    raise Unavailable(f"message file {os.path.basename(source)} is gone from new/: "
                                      "a deletion of its queue or the file system lost it") from None
        raise Unavailable(f"queue {queue!r} was deleted again and again during an add; retry")

    def undeliver_new(self, queue: str, message_id: str, delayed: bool,
                      changes: Changes | None = None) -> str:
        """Unlink a message deliver_new renamed into view whose add was not acknowledged (its
        batch failed before the flush); return the folder. An unlink, not a rename to remove/,
        so that a disk refusing renames can still take it back."""
        path = (self.paths.delay_path(queue, message_id) if delayed
                else self.paths.ready_path(queue, message_id))
        self.disk.unlink(path)
        tracked(changes).changed(path)
        return os.path.dirname(path)

    def claim(self, queue: str, message_id: str, due: float, attempts: int = 0,
              changes: Changes | None = None) -> bytes | None:
        """Move a ready message to delay/ as delivery attempts+1, due at `due`; return its bytes.

        None when the message is gone (fetched by a peer, removed): the caller tries the next.
        The rename comes first, so the due time is only ever set on a file this claim owns (a
        peer that won the rename keeps its own); the mover leaves a just-renamed file alone
        for SETTLE_SECONDS. The rename never replaces (Disk.rename): of two clients of a
        network file system renaming the file to the same name at once, the loser gets EEXIST,
        never a success. Any lost_race errno at the open, read or rename, or at the due time
        of a file that is gone by then, is a lost race. Any other OSError means the message
        is where it was (or, if the undo failed too, in delay/ for the mover to return).
        """
        source = self.paths.ready_path(queue, message_id, attempts)
        target = self.paths.delay_path(queue, message_id, attempts + 1)
        try:
            fd = os.open(source, os.O_RDONLY)
        except OSError as err:
            if lost_race(err):
                return None
            raise
        try:
            try:
                data = read_all(fd)
                self.disk.rename(source, target)
                tracked(changes).renamed(source, target)
            except OSError as err:
                if lost_race(err):
                    return None  # ESTALE at the read: removed and unlinked since the open.
                raise
            try:
                self.disk.set_mtime(fd, due)
            except OSError as err:
                if lost_race(err) and not os.path.exists(target):
                    return None  # Removed (a DELETE by id) right after the rename.
                try:
                    self.disk.rename(target, source)
                except OSError as undo_err:
                    if lost_race(undo_err) and not os.path.exists(target):
                        return None
                raise
        finally:
            os.close(fd)
        return data

    def candidates(self, queue: str, message_id: str, max_attempts: int,
                   near: int | None = None) -> Iterator[tuple[str, int, str]]:
        """Every (state, deliveries, path) a message may have, in the order it moves through
        them: new/, then per delivery count n: delay/ (delayed or in flight), then queues/.

        Probing in this order finds a message that moves meanwhile: each move (claim n ->
        delay n+1, release delay n -> ready n) goes to a name probed later. `near`: probe_counts.
        """
        yield "new", 0, self.paths.new_path(queue, message_id)
        for attempts in probe_counts(max_attempts, near):
            yield "delayed" if attempts == 0 else "in_flight", attempts, \
                self.paths.delay_path(queue, message_id, attempts)
            yield "ready", attempts, self.paths.ready_path(queue, message_id, attempts)

    def locate(self, queue: str, message_id: str, max_attempts: int,
               near: int | None = None) -> tuple[str, int] | None:
        """(state, deliveries) of a message, probing its possible names (no folder listing).

        A second pass covers a message that moved against the probe order (a release undone
        by an extend) while the first one ran.
        """
        for _ in range(2):
            for state, attempts, path in self.candidates(queue, message_id, max_attempts, near):
                if os.path.exists(path):
                    return state, attempts
        return None

    def remove(self, queue: str, message_id: str, max_attempts: int = 0,
               known: tuple[str, int] | None = None, changes: Changes | None = None,
               near: int | None = None) -> str | None:
        """Move a message from any state to remove/; return the folder it left, None if absent.

        `known` is the caller's (state, deliveries) guess, tried first; then every name the
        message may have up to max_attempts deliveries is tried in turn, twice (see locate).
        """
        found = self.remove_entry(queue, message_id, max_attempts, known, changes, near)
        return None if found is None else os.path.dirname(self.state_path(queue, message_id, *found))

    def remove_entry(self, queue: str, message_id: str, max_attempts: int = 0,
                     known: tuple[str, int] | None = None, changes: Changes | None = None,
                     near: int | None = None) -> tuple[str, int] | None:
        """As remove, but return the (state, deliveries) the message was removed from: a fetch
        actor tells the mover which delivery's timer to drop, not every one it might have."""
        target = self.paths.remove_path(queue, message_id)
        if known:
            # Tried alone first: the list of every name (two hundred with the full retry
            # range) is built only when the guess is wrong.
            source = self.state_path(queue, message_id, *known)
            try:
                self.disk.rename(source, target)
                tracked(changes).renamed(source, target)
                return known
            except FileExistsError:
                return None  # A peer removed it at the same moment.
            except OSError as err:
                if not lost_race(err):
                    raise
        entries = list(self.candidates(queue, message_id, max_attempts, near))
        for state, attempts, source in entries + entries:
            try:
                self.disk.rename(source, target)
                tracked(changes).renamed(source, target)
                return state, attempts
            except FileExistsError:
                return None
            except OSError as err:
                if not lost_race(err):
                    raise
        return None

    def state_path(self, queue: str, message_id: str, state: str, attempts: int) -> str:
        """The path of a message in a given state after a given number of deliveries."""
        if state == "new":
            return self.paths.new_path(queue, message_id)
        if state == "ready":
            return self.paths.ready_path(queue, message_id, attempts)
        return self.paths.delay_path(queue, message_id, attempts)

    def ack(self, queue: str, message_id: str, attempts: int,
            changes: Changes | None = None) -> bool:
        """Remove delivery `attempts` of an in-flight message; False when that delivery is over
        (returned, or removed by another ack of it: EEXIST, the peer's remove/ name)."""
        source = self.paths.delay_path(queue, message_id, attempts)
        target = self.paths.remove_path(queue, message_id)
        try:
            self.disk.rename(source, target)
        except OSError as err:
            if lost_race(err):
                return False
            raise
        tracked(changes).renamed(source, target)
        return True

    def extend(self, queue: str, message_id: str, attempts: int, due: float,
               changes: Changes | None = None) -> bool:
        """Set a new due time on delivery `attempts`; False when that delivery is over."""
        path = self.paths.delay_path(queue, message_id, attempts)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as err:
            if lost_race(err):
                return False
            raise
        try:
            self.disk.set_mtime(fd, due)
        except OSError as err:
            if lost_race(err) and not os.path.exists(path):
                return False
            raise
        finally:
            os.close(fd)
        tracked(changes).changed(path)
        return True

    def release(self, queue: str, message_id: str, now: float, attempts: int = 0,
                dead_letter: str | None = None, force: bool = False,
                dead_count: int = 0, changes: Changes | None = None) -> tuple[str, float]:
        """Move a message from delay/ back to its queue when due (or now, with force).

        With dead_letter set, the message goes to that queue instead, as a ready message
        delivered `dead_count` times (properties.dead_letter_count).
        Returns (outcome, due): "ready"; "dead" (moved to the dead-letter queue); "not_due"
        with its later due time (it was extended, or was renamed here a moment ago); "gone"
        (removed or moved by a peer); "removed" (its queue no longer exists: to remove/).
        """
        changes = tracked(changes)
        source = self.paths.delay_path(queue, message_id, attempts)
        try:
            info = os.stat(source)
        except OSError as err:
            if lost_race(err):
                return "gone", now
            raise
        due = info.st_mtime
        if not force and (due > now or now - info.st_ctime < SETTLE_SECONDS):
            return "not_due", max(due, info.st_ctime + SETTLE_SECONDS)
        if dead_letter:
            target = self.paths.ready_path(dead_letter, message_id, dead_count)
            outcome = "dead"
            if not self.queues.queue_exists(dead_letter):
                self.queues.create_queue(dead_letter)
        else:
            target = self.paths.ready_path(queue, message_id, attempts)
            outcome = "ready"
        try:
            self.disk.rename(source, target)
        except FileExistsError:
            return "gone", now  # Another mover released it to the same name at once.
        except OSError as err:
            if not lost_race(err):
                raise
        else:
            changes.renamed(source, target)
            return self._unless_extended(source, target, outcome, due, now, force)
        if not os.path.exists(source):
            return "gone", now
        if os.path.isdir(os.path.dirname(target)):
            # The file was away during the rename and is back: another mover's release put it
            # back in delay/ after an extend (_unless_extended). Time it again; never remove it.
            try:
                return "not_due", os.stat(source).st_mtime
            except OSError as err:
                if lost_race(err):
                    return "gone", now
                raise
        try:
            self.disk.rename(source, self.paths.remove_path(queue, message_id))
        except OSError as err:
            if lost_race(err):
                return "gone", now
            raise
        changes.renamed(source, self.paths.remove_path(queue, message_id))
        return "removed", now

    def _unless_extended(self, source: str, target: str, outcome: str, due: float, now: float,
                         force: bool) -> tuple[str, float]:
        """After release's rename: put the message back in delay/ if an extend moved its due
        time between release's stat and its rename.

        The mtime travels with the file, so this stat sees any extend that answered 200; one
        that comes after the rename finds no file in delay/ and is refused.
        """
        try:
            extended = os.stat(target).st_mtime
        except OSError as err:
            if lost_race(err):
                return "gone", now  # Taken by a peer that listed the queue meanwhile.
            raise
        if force or extended <= now:
            return outcome, due
        try:
            self.disk.rename(target, source)
        except OSError as err:
            if lost_race(err):
                return "gone", now  # Taken, or put back by another mover (EEXIST).
            raise
        return "not_due", extended

    def redrive(self, dead_letter: str, queue: str, changes: Changes | None = None) -> list[str]:
        """Move every ready message of a dead-letter queue back to `queue` as new; return ids."""
        moved = []
        if not self.queues.queue_exists(queue):
            self.queues.create_queue(queue)
        for name in os.listdir(self.paths.queue_dir(dead_letter)):
            parsed = parse_entry(name)
            if not parsed:
                continue
            try:
                source = os.path.join(self.paths.queue_dir(dead_letter), name)
                self.disk.rename(source, self.paths.ready_path(queue, parsed[0]))
                tracked(changes).renamed(source, self.paths.ready_path(queue, parsed[0]))
                moved.append(parsed[0])
            except OSError as err:
                if not lost_race(err):
                    raise
        return moved

    def quarantine(self, queue: str, message_id: str, attempts: int,
                   changes: Changes | None = None) -> str:
        """Move a claimed file that is not a message from delay/ to corrupt/; return the folder."""
        source = self.paths.delay_path(queue, message_id, attempts)
        target = self.paths.corrupt_path(queue, message_id, attempts)
        self.disk.rename(source, target)
        tracked(changes).renamed(source, target)
        return self.paths.folder("corrupt")

    def is_ready(self, queue: str, message_id: str, attempts: int) -> bool:
        """Whether a message may wait in its queue's folder after `attempts` deliveries."""
        return may_exist(self.paths.ready_path(queue, message_id, attempts))

    def is_delayed(self, queue: str, message_id: str, attempts: int) -> bool:
        """Whether a message may wait in delay/ as delivery `attempts`."""
        return may_exist(self.paths.delay_path(queue, message_id, attempts))

    def list_ready(self, queue: str, known: Container[str] = ()) -> list[tuple[str, int]]:
        """(id, deliveries) of a queue's ready messages (to rebuild an index, never per fetch).

        Names in `known` (ids of never-delivered messages the caller has: such an entry's name
        is its id) are skipped unparsed, which halves a re-listing of a deep queue.
        """
        try:
            names = os.listdir(self.paths.queue_dir(queue))
        except FileNotFoundError:
            return []
        return [parsed for name in names if name not in known and (parsed := parse_entry(name))]

    def list_delayed(self, known: Container[tuple[str, str, int]] = ()
                     ) -> list[tuple[float, str, str, int]]:
        """(due, queue, id, deliveries) of every message in delay/ (at start and to self-heal).

        Entries whose (queue, id, deliveries) is in `known` are skipped without a stat: the
        mover already times them, and re-reads the due time before it moves one anyway.
        """
        entries: list[tuple[float, str, str, int]] = []
        with os.scandir(self.paths.folder("delay")) as it:
            for entry in it:
                parts = split_name(entry.name)
                if not parts or parts in known:
                    continue
                try:
                    entries.append((entry.stat().st_mtime, *parts))
                except OSError as err:
                    if not lost_race(err):
                        raise
        return entries
