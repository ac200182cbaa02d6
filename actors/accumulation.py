"""Accumulation in the actors: the save actor refuses a part a schedule, the mover closes windows.

The windows themselves, and every rename of them, are mq.store's (core/store/accumulation.py,
docs/FORMAT.md "Accumulation"); a save batch's settlement puts its parts into them
(actors/settlement.py); here is only what the save actor checks and what the mover does.
"""

from collections import defaultdict

from mq import logs
from mq.errors import Invalid
from mq.operations import Window
from mq.store.windows import window_due, window_stage

#: With --peers, seconds a window must have stayed in a later stage (closing, combined) before
#: this mover finishes it: a younger one may be another daemon's close in progress.
PEER_STALE_SECONDS = 60.0

# -- the save actor -----------------------------------------------------------------------------


def refuse_schedule(add, props: dict) -> None:
    """An accumulating queue's messages wait for their window: a delay or time is refused."""
    if props["accum"] > 0 and add.due is not None:
        raise Invalid(f"queue {add.queue!r} accumulates messages (accum {props['accum']:g} s): "
                      "delay and at are not accepted")


# -- the mover ----------------------------------------------------------------------------------


def time_windows(store, timers, peers: bool = False) -> None:
    """Time every window in accum/ (at the mover's start and rescans). One found closing or
    combined was left so by a crash, unless another daemon (peers) is closing it right now."""
    for queue, name in store.accumulation.list_windows():
        changed = store.accumulation.window_changed_at(queue, name) + PEER_STALE_SECONDS if peers else 0.0
        timers.add(window_due(name, changed), queue, name)


def window_note(mover, batch, request: Window, sender) -> dict:
    """Notification from a save actor: it opened a window; time its close."""
    name = request.window
    if window_stage(name):
        mover.windows.add(window_due(name), request.queue, name)
    return {}


def close_due_windows(store, timers, now: float) -> dict[str, list]:
    """Settle every window due by now; return the compounds made ready, [id, 0] per queue."""
    ready: dict[str, list] = defaultdict(list)
    for queue, name, _ in timers.pop_due(now):
        try:
            settled = store.accumulation.settle_window(queue, name)
        except OSError as err:
            logs.get().error("accum.close_failed", queue=queue, window=name, error=str(err))
            timers.add(now + 1, queue, name)
            continue
        if settled:
            compound_id, parts = settled
            logs.get().info("accum.closed", queue=queue, id=compound_id, parts=parts, window=name)
            ready[queue].append([compound_id, 0])
    return dict(ready)
