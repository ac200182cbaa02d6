"""An add a save batch wrote into new/ (`Written`), and the renames that move its file.

Its file is written into new/ (`write_new`), renamed into its queue, delay/ or, as a part, its
queue's open window (`deliver`); if its group fails before the flush it is unlinked from there
(`take_back`), if the flush fails it is moved to remove/ (`undeliver`), and either way the
de-duplication key it recorded is dropped (`forget`). The Settlement (actors/settlement.py)
decides which of them happen, and when.
"""

from dataclasses import dataclass

from mq import store as fmt
from mq.adds import CheckedAdd
from mq.ids import new_id
from mq.store import Changes, Store


@dataclass
class Written:
    """An add whose file is in new/, waiting for the batch's flush and rename."""

    pos: int
    add: CheckedAdd
    id: str
    window: float
    slot: int | None = None  # Its place in an add_batch request; None for a single add.
    accum: float = 0.0  # the queue's accumulation window; > 0: the add is a part
    joined: tuple[str, bool] | None = None  # (window name, opened) once a part is in its window
    size: int | None = None  # the bytes of its file
    data: bytes | None = None  # its file's bytes while the write waits for write_pending

    def accumulated(self) -> str:
        """The add reply's `accumulated`: "new" (opened a window), "yes" (joined one) or "no"."""
        if not self.joined:
            return "no"
        return "new" if self.joined[1] else "yes"

    def closes(self) -> float:
        """When a part's window closes (Unix seconds): its compound is ready from then on."""
        assert self.joined is not None, "only a part in its window closes"
        return int(self.joined[0]) / 1000

    def deliver(self, store: Store, changes: Changes) -> str | None:
        """Rename the file out of new/: into its queue (or delay/), or, as a part, into its
        queue's open window; the change set records the folders to flush. Return the window
        a part opened (the mover times it), else None."""
        queue = self.add.queue
        if self.accum <= 0:
            store.states.deliver_new(queue, self.id, self.add.due is not None, changes)
            return None
        window, opened = store.accumulation.add_part(queue, self.id, self.accum, changes)
        self.joined = (window, opened)
        return window if opened else None

    def take_back(self, store: Store) -> None:
        """Unlink the delivered file, its group failed before the flush: a part from its
        window, so that the compound never holds it, any other add from its queue or delay/.
        An OSError is the caller's to log."""
        if self.joined:
            store.accumulation.unlink_part(self.add.queue, self.joined[0], self.id)
        else:
            store.states.undeliver_new(self.add.queue, self.id, self.add.due is not None)

    def undeliver(self, store: Store) -> None:
        """Move the delivered file, whose flush failed, to remove/: it was never acknowledged."""
        if self.joined:
            store.accumulation.remove_part(self.add.queue, self.joined[0], self.id)
        else:
            store.states.remove(self.add.queue, self.id)

    def forget(self, store: Store) -> None:
        """Drop the key the add recorded, unacknowledged, so the client's retry is stored."""
        if self.add.dedup_id:
            store.dedup.forget(self.add.queue, fmt.dedup_digest(self.add.dedup_id), self.id)


def write_new(store: Store, pos: int, add: CheckedAdd, writer: str, window: float, accum: float,
              now: float, slot: int | None = None, defer: bool = False) -> Written:
    """Write one add's file into new/ (a failed write leaves nothing); defer: keep its bytes
    on the Written instead, for a write several at once (actors/overlapped.py)."""
    message_id = new_id(int(now * 1000))
    data = fmt.encode_message(add.body, add.content_type, int(now * 1000), message_id,
                              add.dedup_id, writer, group=add.group, attributes=add.attributes)
    if defer:
        return Written(pos, add, message_id, window, slot, accum=accum, size=len(data), data=data)
    store.write_new(add.queue, message_id, data, add.due)
    return Written(pos, add, message_id, window, slot, accum=accum, size=len(data))
