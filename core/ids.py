"""Message ids: time-based UUIDs (version 7) that sort by creation time as strings."""

import os
import re
import threading
import time

ID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

_lock = threading.Lock()
_last = [0, 0]  # last millisecond, counter within it


def new_id(now_ms: int | None = None) -> str:
    """A new UUIDv7: 48-bit Unix milliseconds, then a 12-bit counter, then random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        # The counter keeps ids from one process strictly increasing within a millisecond.
        if ms <= _last[0]:
            ms, counter = _last[0], _last[1] + 1
            if counter > 0xFFF:
                ms, counter = ms + 1, 0
        else:
            counter = 0
        _last[0], _last[1] = ms, counter
    rand = int.from_bytes(os.urandom(8), "big")
    value = (ms & 0xFFFFFFFFFFFF) << 80
    value |= 0x7 << 76 | counter << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_id(text: str) -> bool:
    """True when text has the shape of an mq message id (any UUID in lower-case hex)."""
    return bool(ID_PATTERN.fullmatch(text))


def id_floor(ms: int) -> str:
    """A string that every id made at or after Unix milliseconds `ms` sorts after, and every
    id made before it sorts before."""
    h = f"{max(ms, 0) & 0xFFFFFFFFFFFF:012x}"
    return f"{h[:8]}-{h[8:]}"


def id_time_ms(message_id: str) -> int:
    """The creation time in Unix milliseconds that a v7 id carries."""
    return int(message_id.replace("-", "")[:12], 16)
