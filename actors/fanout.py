"""Fan-out adds: one request that adds the same message to several queues in one batch.

The save actor expands an `add_fanout` into one `add` per queue (children answered to no one),
so every copy goes through the same write, flush and rename as any add and in the same batch:
one flush makes them durable together, before the one reply. The request's answer is then
collected from its children: every copy's id, or, when a copy failed for another reason than
its queue having gone, that error, with the copies already made taken back.
"""

from dataclasses import dataclass

from mq import store as fmt
from mq.actors.batch import Request
from mq.errors import Invalid, MqError, NotFound

#: Most queues one fan-out may add to (each copy is a file written and flushed).
MAX_FANOUT_QUEUES = 1000


def check(payload: dict) -> list[str]:
    """The queues of a fan-out request; raise Invalid saying what is wrong with it."""
    queues = payload.get("queues")
    if not isinstance(queues, list) or not queues:
        raise Invalid("queues must be a non-empty list of queue names")
    if len(queues) > MAX_FANOUT_QUEUES:
        raise Invalid(f"a fan-out may add to at most {MAX_FANOUT_QUEUES} queues, "
                      f"not {len(queues)}")
    for queue in queues:
        fmt.validate_queue(queue)
    if len(set(queues)) != len(queues):
        raise Invalid("queues of a fan-out must not repeat")
    if payload.get("dedup_id"):
        raise Invalid("dedup_id is not supported on a fan-out add")
    return queues


def add_fanout(actor, batch, request: Request):
    """Command: reached only by a fan-out that expand() left whole, i.e. an invalid one."""
    check(request.payload)
    raise MqError("fan-out add was not expanded")


@dataclass
class Fanout:
    """Where the children of one fan-out request sit in the expanded batch."""

    queues: list
    first: int


def expand(requests: list[Request]) -> tuple[list[Request], list]:
    """The batch with each valid fan-out replaced by one add per queue, and, per original
    request, its position in the expanded batch (an int) or its Fanout."""
    expanded, places = [], []
    for request in requests:
        if request.op == "add_fanout":
            try:
                queues = check(request.payload)
            except MqError:
                queues = None  # Dispatched whole, so that add_fanout answers the error.
            if queues:
                fields = {key: request.payload.get(key)
                          for key in ("body", "content_type", "due", "attributes")}
                places.append(Fanout(queues, len(expanded)))
                expanded += [Request(request.peer, b"", {"op": "add", "queue": queue,
                                                          "must_exist": True, **fields})
                             for queue in queues]
                continue
        places.append(len(expanded))
        expanded.append(request)
    return expanded, places


def collapse(actor, batch, requests: list[Request], places: list):
    """Give the batch back its original requests, each fan-out answered from its children."""
    results, taken_back = [], []
    for place in places:
        if isinstance(place, int):
            results.append(batch.results[place])
            continue
        copies = list(zip(place.queues, batch.results[place.first:place.first + len(place.queues)]))
        made = [(queue, r) for queue, r in copies if isinstance(r, dict)]
        failed = [r for _, r in copies if isinstance(r, MqError) and not isinstance(r, NotFound)]
        if failed:
            taken_back += made
            results.append(failed[0])
        elif not made:
            results.append(NotFound("none of the matching queues exists any more"))
        else:
            results.append({"messages": [{"queue": queue, "id": r["id"], "due": r.get("due")}
                                         for queue, r in made]})
    if taken_back:
        take_back(actor, taken_back)
    batch.requests, batch.results = requests, results
    return batch


def take_back(actor, made: list) -> None:
    """Remove the copies of a fan-out that failed as a whole: its client is told it failed
    and retries, so the copies it was not told about would be duplicates."""
    dirs = {actor.store.folder("remove")}
    for queue, result in made:
        try:
            left = actor.store.remove(queue, result["id"])
            if left:
                dirs.add(left)
        except OSError as err:
            actor.log.error("save.fanout_take_back_failed", queue=queue, id=result["id"],
                            error=str(err))
    try:
        actor.store.flush(dirs)
    except OSError as err:
        actor.log.error("save.fanout_take_back_failed", error=str(err))
    actor.log.warning("save.fanout_taken_back", count=len(made))
