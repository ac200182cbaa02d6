"""Numbers from text a user gave (a query parameter, a data source option), checked once."""

import math

from mq.errors import Invalid


def parse_number(label: str, raw, default, kind=float, low: float = 0):
    """raw as a finite `kind` of at least `low`, `default` when raw is None; else Invalid
    naming `label` (e.g. "wait", "option numPartitions") and what was given."""
    if raw is None:
        return default
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise Invalid(f"{label}: expected a {'number' if kind is float else 'whole number'}, "
                      f"got {raw!r}") from None
    if not math.isfinite(value) or value < low:
        raise Invalid(f"{label}: must be a number of at least {low:g}, got {raw!r}")
    return value
