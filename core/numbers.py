"""Numbers from text a user gave (a query parameter, a data source option), checked once."""

import math

from mq.errors import Invalid

#: The largest whole number that travels to an actor: a frame carries 64-bit integers at most
#: (msgpack), so a bigger one must be refused here, not fail to encode after the check.
MAX_WHOLE = (1 << 63) - 1


def parse_number(label: str, raw, default, kind=float, low: float = 0, high: float | None = None):
    """raw as a finite `kind` from `low` to `high`, `default` when raw is None; else Invalid
    naming `label` (e.g. "wait", "option numPartitions") and what was given.

    A whole number is never above MAX_WHOLE, whatever `high` says.
    """
    if raw is None:
        return default
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise Invalid(f"{label}: expected a {'number' if kind is float else 'whole number'}, "
                      f"got {shown(raw)}") from None
    if kind is int:
        high = MAX_WHOLE if high is None else min(high, MAX_WHOLE)
    if not math.isfinite(value) or value < low:
        raise Invalid(f"{label}: must be a number of at least {low:g}, got {shown(raw)}")
    if high is not None and value > high:
        noun = "whole number" if kind is int else "number"
        top = high if isinstance(high, int) else format(high, "g")
        raise Invalid(f"{label}: must be a {noun} from {low:g} to {top}, got {shown(raw)}")
    return value


def shown(raw) -> str:
    """What a user gave, quoted for an error message: at most 80 characters of it."""
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."
