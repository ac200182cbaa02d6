"""When an added message becomes visible: a delay in seconds or an absolute time."""

from datetime import datetime

from mq.errors import Invalid

#: Furthest a message may be scheduled ahead, in seconds (one year and a day).
MAX_AHEAD_SECONDS = 366 * 86400


def parse_time(text) -> float:
    """Unix seconds from RFC 3339 ('2026-11-23T10:00:00Z', offset required) or Unix seconds
    (a number, or its text)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    text = str(text).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise Invalid(f"at={text!r}: expected RFC 3339 (e.g. 2026-11-23T10:00:00Z) or Unix seconds") from None
    if moment.tzinfo is None:
        raise Invalid(f"at={text!r}: an RFC 3339 time needs a zone (Z or +hh:mm)")
    return moment.timestamp()


def due_time(delay, at, now: float) -> float | None:
    """The due time of an add with a delay (seconds) or an absolute time; None for 'now'.

    Each is a number or its text: the front passes query parameters, the Spark stager columns.
    """
    if delay is not None and at is not None:
        raise Invalid("give either delay or at, not both")
    if delay is not None:
        try:
            seconds = float(delay)
        except (TypeError, ValueError):
            raise Invalid(f"delay={delay!r}: expected seconds") from None
        if not 0 <= seconds <= MAX_AHEAD_SECONDS or seconds != seconds:
            raise Invalid(f"delay must be between 0 and {MAX_AHEAD_SECONDS} seconds")
        return now + seconds if seconds else None
    if at is not None:
        due = parse_time(at)
        if due != due or due - now > MAX_AHEAD_SECONDS:
            raise Invalid(f"at is more than {MAX_AHEAD_SECONDS} seconds ahead")
        return due if due > now else None
    return None
