"""Listing a root's messages without claiming them: the Spark snapshot read's view."""

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mq.store.message import Message, decode_message
from mq.store.names import parse_entry
from mq.store.reads import read_all
from mq.store.root import Root


@dataclass
class Entry:
    """A message found by a folder listing: its state, where it is, how often delivered."""

    state: str  # ready, delayed (added with a delay, never fetched) or in_flight
    queue: str
    id: str
    attempts: int
    path: str


def _in_shard(message_id: str, shard: tuple[int, int] | None) -> bool:
    # The last two hex digits of a v7 id are random, so shards come out even.
    return shard is None or int(message_id[34:36], 16) % shard[1] == shard[0]


def list_entries(store: Root, queues: Iterable[str],
                 shard: tuple[int, int] | None = None) -> Iterator[Entry]:
    """Yield an Entry for each ready, delayed and in-flight message of the queues; open none.

    shard=(i, n) keeps only ids whose last two hex digits modulo n are i. Each folder is
    listed once; a message that moves between the listings may be yielded twice (once per
    state) or not at all, so readers treat entries as hints and skip what is gone.
    """
    wanted = set(queues)
    for queue in sorted(wanted):
        folder = store.queue_dir(queue)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            if _in_shard(name[:36], shard) and (parsed := parse_entry(name)):
                yield Entry("ready", queue, parsed[0], parsed[1], os.path.join(folder, name))
    delay = store.folder("delay")
    for name in os.listdir(delay):
        queue, _, entry = name.rpartition(":")
        if queue in wanted and _in_shard(entry[:36], shard) and (parsed := parse_entry(entry)):
            yield Entry("in_flight" if parsed[1] else "delayed", queue, parsed[0], parsed[1],
                        os.path.join(delay, name))


def read_entry(entry: Entry) -> tuple[Message, float] | None:
    """(message, file mtime) of a listed entry, read whole; None when it moved or went."""
    return read_unclaimed(entry.path, entry.queue, entry.id)


def read_unclaimed(path: str, queue: str, message_id: str) -> tuple[Message, float] | None:
    """(message, file mtime) of a message file read without claiming it; None when it moved
    or went. CorruptMessage when the file is not that message.

    A file is complete before it is renamed out of new/, but once its message is removed it
    may become a spare and hold another message (docs/FORMAT.md, "Spare files"). What was
    read counts only if the path still names the file after the read: a file that reached
    remove/ never again has a name of its old message (ids are never reused), so the file
    was that message's all along.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        data, info = read_all(fd), os.fstat(fd)
        try:
            if os.stat(path).st_ino != info.st_ino:
                return None
        except FileNotFoundError:
            return None
    finally:
        os.close(fd)
    return decode_message(queue, message_id, data), info.st_mtime
