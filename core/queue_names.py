"""The queue-name rule, the one the daemon, the store and the clients apply alike (the clients
import it without the store)."""

import re

from mq.errors import Invalid

#: Longest queue name, in characters.
MAX_QUEUE_NAME = 128
QUEUE_PATTERN = re.compile(rf"^[A-Za-z0-9_.-]{{1,{MAX_QUEUE_NAME}}}$")
#: Names no queue may have: '.' and '..' are folders (and path segments a client's URL would
#: resolve away), '_mq' holds the admin endpoints, and '_defaults' would share
#: props/_defaults.json with the default property rules.
RESERVED_NAMES = (".", "..", "_mq", "_defaults")


def validate_queue(name: str) -> str:
    """Return name if it is a safe queue name, else raise Invalid saying why."""
    if not isinstance(name, str) or not QUEUE_PATTERN.fullmatch(name):
        raise Invalid(
            f"invalid queue name {name!r}: use 1 to {MAX_QUEUE_NAME} characters "
            "from A-Z a-z 0-9 _ . -"
        )
    if name in RESERVED_NAMES:
        raise Invalid(f"invalid queue name {name!r}: {', '.join(RESERVED_NAMES)} are reserved")
    return name


def is_queue(name: str) -> bool:
    """True when name is a valid queue name."""
    return bool(QUEUE_PATTERN.fullmatch(name)) and name not in RESERVED_NAMES
