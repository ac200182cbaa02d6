"""The save actor's batch: the adds whose files are in new/, and what each came to.

The save actor (actors/save.py) fills it with single adds and add_batch
(actors/save_batch.py) with the messages of one request; settle() delivers them all.
"""

from dataclasses import dataclass, field

from mq.actors.batch import Batch
from mq.adds import Add


@dataclass
class Written:
    """An add whose file is in new/, waiting for the batch's flush and rename."""

    pos: int
    add: Add
    id: str
    window: float
    slot: int | None = None  # Its place in an add_batch request; None for a single add.
    accum: float = 0.0  # the queue's accumulation window; > 0: the add is a part
    joined: tuple | None = None  # (window name, opened) once a part is in its window


@dataclass
class AddBatch(Batch):
    """A batch of adds: the files written into new/, and the adds that follow another's key."""

    written: list = field(default_factory=list)
    followers: list = field(default_factory=list)  # (follower, the key's winner): Written items
    #: add_batch position -> the outcome of each of its messages (dict, MqError or None).
    parts: dict = field(default_factory=dict)
    windows: list = field(default_factory=list)  # (queue, window) opened, for the mover

    def outcome(self, item: "Written"):
        """What an item has come to so far: None (pending), a result dict or an MqError."""
        return self.results[item.pos] if item.slot is None else self.parts[item.pos][item.slot]

    def set_outcome(self, item: "Written", value) -> None:
        """Record what an item came to (a single add's result, or a part of its batch)."""
        if item.slot is None:
            self.results[item.pos] = value
        else:
            self.parts[item.pos][item.slot] = value
