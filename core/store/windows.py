"""The names of accumulation windows: accum/{queue}/{name}, the name saying the window's stage.

`{close_ms}` (open until that Unix millisecond), `{cid}.closing` (closed, being combined into
compound `cid`), `{cid}.done` (combined) (docs/FORMAT.md, "Accumulation").
"""

from mq.ids import is_id

#: Seconds after a window's close time before the mover closes it, so that an add which chose
#: the window a moment before its close has done its rename (a later one only starts another).
CLOSE_GRACE_SECONDS = 0.1
CLOSING, DONE = ".closing", ".done"


def window_name(accum: float, now: float) -> str:
    """The open window an add at `now` joins: named by its close time, the end of the current
    multiple of `accum` seconds on the Unix clock, so every actor agrees without asking."""
    span_ms = max(1, round(accum * 1000))
    return str((int(now * 1000) // span_ms + 1) * span_ms)


def window_stage(name: str) -> tuple[str, str] | None:
    """("open", close_ms), ("closing", cid) or ("done", cid) of a window's name; None if none."""
    if name.isdigit():
        return "open", name
    for suffix, stage in ((CLOSING, "closing"), (DONE, "done")):
        if name.endswith(suffix) and is_id(name[:-len(suffix)]):
            return stage, name[:-len(suffix)]
    return None


def window_due(name: str, changed: float = 0.0) -> float:
    """When the mover settles a window: an open one after its close time (and the grace), a
    closing or combined one (left by a crash) at `changed` (0: at once)."""
    stage = window_stage(name)
    return int(stage[1]) / 1000 + CLOSE_GRACE_SECONDS if stage and stage[0] == "open" else changed
