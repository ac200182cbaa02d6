"""Fan-out adds: one request that adds the same message to several queues in one batch.

The save actor expands an `add_fanout` into one `add` per queue (children answered to no one),
so every copy goes through the same write, flush and rename as any add and in the same batch:
one flush makes them durable together, before the one reply. The request's answer is then
collected from its children: every copy's id, or, when a copy failed for another reason than
its queue having gone, that error, with the copies already delivered taken back before the
flush (actors/settlement.py): as for a batch add, all or none.
"""

from dataclasses import dataclass

from mq.actors.batch import Request
from mq.actors.commands import SaveCommandActor
from mq.errors import MqError, NotFound
from mq.operations import AddFanout, accumulated_of

#: The payload of a fan-out's copy: an add, already decoded (Request.decoded).
COPY = {"op": "add"}


def add_fanout(actor: SaveCommandActor, batch, request: AddFanout, sender: Request):
    """Command: a fan-out that expand() left whole; one that decodes is always expanded."""
    raise MqError("fan-out add was not expanded")


@dataclass
class Fanout:
    """Where the children of one fan-out request sit in the expanded batch."""

    queues: list
    first: int


def expand(requests: list[Request]) -> tuple[list[Request], list[int | Fanout]]:
    """The batch with each valid fan-out replaced by one add per queue, and, per original
    request, its position in the expanded batch (an int) or its Fanout."""
    expanded: list[Request] = []
    places: list[int | Fanout] = []
    for request in requests:
        if request.op == AddFanout.op:
            try:
                fanout = request.decoded = AddFanout.from_payload(request.payload)
            except MqError:
                fanout = None  # Dispatched whole, so that its decoding answers the error.
            if fanout is not None:
                places.append(Fanout(fanout.queues, len(expanded)))
                expanded += [Request(request.peer, b"", COPY, fanout.copy(queue))
                             for queue in fanout.queues]
                continue
        places.append(len(expanded))
        expanded.append(request)
    return expanded, places


def failure(result) -> bool:
    """Whether a copy's outcome fails its whole fan-out: an error other than its queue gone."""
    return isinstance(result, MqError) and not isinstance(result, NotFound)


def collapse(batch, requests: list[Request], places: list[int | Fanout]):
    """Give the batch back its original requests, each fan-out answered from its children
    (the copies of one that failed were taken back by its settlement)."""
    results = []
    for place in places:
        if isinstance(place, int):
            results.append(batch.results[place])
            continue
        copies = list(zip(place.queues, batch.results[place.first:place.first + len(place.queues)]))
        made = [(queue, r) for queue, r in copies if isinstance(r, dict)]
        failed = [r for _, r in copies if failure(r)]
        if failed:
            results.append(failed[0])
        elif not made:
            results.append(NotFound("none of the matching queues exists any more"))
        else:
            results.append({"messages": [{"queue": queue, "id": r["id"], "due": r.get("due"),
                                          "accumulated": accumulated_of(r)}
                                         for queue, r in made]})
    batch.requests, batch.results = requests, results
    return batch
