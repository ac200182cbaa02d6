"""What the root's folders say of a queue's messages (docs/FORMAT.md): the ground truth the
model's states are compared with after every step. A state is a file's place and name, and
every answer comes after its flush, so a listing right after an answer sees its change."""

import os
from pathlib import Path

from mq.store.names import parse_entry, split_name


def listing(folder: Path) -> list[str]:
    """Names in a folder, [] when it does not exist."""
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def files(root: Path, queue: str) -> dict[str, tuple[str, int]]:
    """id -> (state, deliveries in the name) of every message of the queue: ready in
    queues/{q}/, delayed or in flight in delay/, parts of open windows in accum/{q}/."""
    out = {}
    for name in listing(root / "queues" / queue):
        parsed = parse_entry(name)
        if parsed:
            out[parsed[0]] = ("ready", parsed[1])
    for name in listing(root / "delay"):
        parsed = split_name(name)
        if parsed and parsed[0] == queue:
            _, message_id, n = parsed
            out[message_id] = ("in_flight", n) if n else ("delayed", 0)
    for window in listing(root / "accum" / queue):
        if window.isdigit():  # An open window; .closing and .done ones are being combined.
            for name in listing(root / "accum" / queue / window):
                parsed = parse_entry(name)
                if parsed:
                    out[parsed[0]] = ("part", 0)
    return out
