"""What each add of a save batch came to, and each batch request's result made of them.

A single add's outcome is its place in the batch's results; each message of an add_batch
request has one in `parts` until `assemble` makes the request's result of them: every id in
order, or the request's first error. An outcome is None while pending, a result dict or an
MqError.
"""

from mq.actors.batch import Batch
from mq.actors.written import Written
from mq.errors import MqError
from mq.operations import accumulated_of


class Outcomes:
    """The outcomes of a save batch's adds: a single add's in the batch's results, each
    message of an add_batch request in `parts` (by the request's position in the batch)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        #: add_batch position -> the outcome of each of its messages (dict, MqError or None).
        self.parts: dict[int, list] = {}

    def of(self, item: Written) -> object:
        """What an item has come to so far: None (pending), a result dict or an MqError."""
        return self.batch.results[item.pos] if item.slot is None else self.parts[item.pos][item.slot]

    def record(self, item: Written, value: object) -> None:
        """Record what an item came to (a single add's result, or a part of its batch)."""
        if item.slot is None:
            self.batch.results[item.pos] = value
        else:
            self.parts[item.pos][item.slot] = value

    def assemble(self) -> None:
        """Each add_batch request's result: the id of every message in order, or its error."""
        for pos, parts in self.parts.items():
            error = first_error(parts)
            if error is not None:
                self.batch.results[pos] = error
            elif any(part is None for part in parts):
                self.batch.results[pos] = MqError(
                    "internal error in save actor: a message was not settled")
            else:
                self.batch.results[pos] = {
                    "queue": parts[0]["queue"],
                    "messages": [{"id": p["id"], "due": p.get("due"),
                                  "accumulated": accumulated_of(p),
                                  **({"duplicate": True} if p.get("duplicate") else {})}
                                 for p in parts]}

    def fail_successes(self, error: MqError) -> None:
        """Turn every success of the batch into the error of a flush that failed, which no
        success of the batch outlives."""
        self.batch.results = [error if isinstance(r, dict) else r for r in self.batch.results]


def first_error(parts: list) -> MqError | None:
    """The first failed part of a batch request, or None."""
    return next((part for part in parts if isinstance(part, MqError)), None)
