"""What the command functions use of their actor: one Protocol per actor kind.

A command is function(actor, batch, request, sender) (actors/base.py, `COMMANDS`); the
functions live in modules of their own (replies.py, queue_admin.py, fetch_any.py,
fetch_batch.py; fanout.py, save_batch.py), which the actor's module imports, so they name
their actor by these Protocols rather than by its class: mypy checks each use in their
bodies, and tests/project/test_types.py that FetchActor and SaveActor are what they say.

A command function may also name the ops it serves (`@serves(ops.Move)`): it is then in the
COMMANDS of the actor each op declares (`served(kind)`), with no entry written there.
"""

from collections.abc import Callable
from typing import Any, Protocol

import zmq

from mq.actors.batch import Batch
from mq.actors.counters import Counters
from mq.actors.deliveries import Deliveries
from mq.actors.long_polls import Waiters
from mq.actors.queue_index import ReadyIndexes
from mq.config import Options
from mq.operations import Fetched, Operation
from mq.properties import PropertyFiles
from mq.store import Store


class Watching(Protocol):
    """The pull-any watches a fetch actor keeps (fetch_any.Watches), as its commands use them."""

    def park(self, watcher: Any, /) -> None:
        """Keep a watch until one of its queues has a ready message or its time is up."""


class CommandActor(Protocol):
    """What every actor's command functions use: its settings, store, log and notes."""

    options: Options
    index: int
    store: Store
    props: PropertyFiles
    counters: Counters
    #: structlog's bound logger (mq.logs.get).
    log: Any
    mover: zmq.Socket | None

    def send(self, sock: zmq.Socket | None, note: Operation) -> None:
        """A one-way message to another actor of the daemon."""


class FetchCommandActor(CommandActor, Protocol):
    """What the fetch actor's command functions use of it (actors/fetch.py, FetchActor)."""

    indexes: ReadyIndexes
    deliveries: Deliveries
    waiters: Waiters
    @property
    def watches(self) -> Watching:
        """The pull-any watches."""

    def take(self, batch: Batch, queue: str, holder: str | None = None,
             max_bytes: int | None = None) -> Fetched | None:
        """Claim the next ready message of the queue, or None."""

    def head(self, queue: str, batch: Batch | None = None) -> str | None:
        """The id a fetch of the queue would take next, or None."""

    def serves_only_owner(self, batch: Batch, queue: str) -> bool:
        """Whether a fetch of another actor's queue is refused here (a fifo queue)."""

    def forget_queue(self, queue: str) -> None:
        """Drop a queue from the indexes and the groups."""

    def drop_expired(self, batch: Batch, queue: str) -> None:
        """Remove the queue's ready messages past its retention."""

    def reply(self, peer: bytes, rid: bytes, result: Any) -> None:
        """Send one reply (a result dict or an MqError)."""


class SaveCommandActor(CommandActor, Protocol):
    """What the save actor's command functions use of it (actors/save.py, SaveActor)."""

    def writer(self) -> str:
        """The 'w' header of the files this actor writes."""


#: op class -> the command function that serves it, for the functions that name their ops
#: (`serves`); each actor's COMMANDS takes those of the ops it serves (`served`).
SERVED: dict[type[Operation], Callable[..., object]] = {}


def serves(*ops: type[Operation]):
    """Decorator of a command function: it serves these ops, in the COMMANDS of the actor each
    op declares (Operation.actor); TypeError when an op already has a function."""
    def register(function):
        for op in ops:
            if op in SERVED:
                raise TypeError(f"op {op.op!r} is served twice")
            SERVED[op] = function
        return function
    return register


def served(actor: str) -> dict[type[Operation], Callable[..., object]]:
    """The commands `serves` names for the ops that actor kind serves (SAVE, FETCH, ...)."""
    return {op: function for op, function in SERVED.items() if op.actor == actor}


def by_fields(function):
    """Decorator of a command function taking its op's checked fields (after actor, batch and
    sender, in the op's declaration order) instead of the decoded op: the command it returns
    serves a decoded op, and the actor's loop calls the function itself with the fields as
    the op's declared checks give them (Operation.checked), building no op per request."""
    def command(actor, batch, request, sender):
        return function(actor, batch, sender, *request.values(request))
    command.by_fields = function  # type: ignore[attr-defined]
    command.__doc__, command.__name__ = function.__doc__, function.__name__
    return command

