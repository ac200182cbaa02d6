"""Fan-out adds: one request that adds the same message to several queues in one batch.

The save actor expands an `add_fanout` into one `add` per queue (children answered to no one),
so every copy goes through the same write, flush and rename as any add and in the same batch:
one flush makes them durable together, before the one reply. The request's answer is then
collected from its children: every copy's id, or, when a copy failed for another reason than
its queue having gone, that error, with the copies already delivered taken back before the
flush (roll_back): as for a batch add, all or none.
"""

from dataclasses import dataclass

from mq.actors import accumulation
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


def roll_back(actor: SaveCommandActor, batch, delivered: list, fanouts: list[Fanout]) -> list:
    """Before the flush: take back every delivered copy of a fan-out that failed; return the
    delivered adds that stay.

    Its client is told it failed and retries, so a copy it was not told about would be a
    duplicate. Taken back here, before the flush and the notes, a copy was never announced to
    a fetch actor, and a part leaves its window before the mover can close it into a compound
    (a part is no message of its own: no removal by id finds it).
    """
    doomed: dict[int, MqError] = {}
    for place in fanouts:
        positions = range(place.first, place.first + len(place.queues))
        error = next((batch.results[p] for p in positions if failure(batch.results[p])), None)
        if error is not None:
            doomed.update(dict.fromkeys(positions, error))
    kept, taken = [], 0
    for item in delivered:
        error = doomed.get(item.pos) if item.slot is None else None
        if error is None:
            kept.append(item)
            continue
        try:
            accumulation.take_back(actor.store, item)
            taken += 1
        except OSError as err:
            actor.log.error("save.fanout_take_back_failed", queue=item.add.queue, id=item.id,
                            error=str(err))
        batch.set_outcome(item, error)
    if taken:
        actor.log.warning("save.fanout_taken_back", count=taken)
    return kept


def collapse(batch, requests: list[Request], places: list[int | Fanout]):
    """Give the batch back its original requests, each fan-out answered from its children
    (the copies of one that failed were taken back by roll_back)."""
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
