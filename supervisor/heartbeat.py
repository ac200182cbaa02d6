"""Heartbeats: how the supervisor tells a child that stopped answering from one that is busy.

An exit is seen through waitpid; a child stuck in a busy loop, a deadlock or a SIGSTOP never
exits, and without this it would hold its queues (503 to every request for them) until an
operator came. Each child stamps the monotonic clock into its own 8-byte slot of one anonymous
shared mapping, which the supervisor made before forking (so every child, restarts included,
writes into pages the supervisor reads): once per turn of its loop, which is a clock read and
a store, no system call and nothing on the wire. The supervisor kills (SIGKILL, which also
ends a stopped process) a child whose stamp is older than --hang-timeout, and restarts it as
if it had died.

CLOCK_MONOTONIC is one clock for every process of the host, so stamps and the supervisor's
`now` compare directly.

The same mapping carries one more slot, written by the supervisor alone: the root's state
(docs/OPERATIONS.md, "The root's file system"). 0.0 while the root is there, else the Unix time
it was found gone. The supervisor checks the root a few times a second; every child reads the
verdict with a load from memory, so the hot path of a request pays no system call for it.
"""

import asyncio
import mmap
import struct
import time

#: One slot: a float, the child's last time.monotonic().
SLOT = struct.Struct("d")
#: Seconds between the front's beats (its asyncio loop has no turn of its own to stamp).
FRONT_BEAT_SECONDS = 0.5


class Slot:
    """A child's place in the shared mapping."""

    def __init__(self, memory: mmap.mmap, offset: int):
        self.memory = memory
        self.offset = offset
        # Stores and loads through a memoryview of doubles: one aligned 8-byte move each, so
        # a reader in another process sees the old time or the new one. struct.pack_into
        # zeroes the bytes before it writes them, and a supervisor reading in between saw
        # 0.0, a child silent since boot, and killed a child that was beating.
        self.cells = memoryview(memory).cast("d")
        self.index = offset // SLOT.size

    def stamp(self, now: float) -> None:
        """Write a time into the slot."""
        self.cells[self.index] = now

    def read(self) -> float:
        """The time last written."""
        return self.cells[self.index]


class Heartbeats:
    """The supervisor's shared mapping, one slot per child, made before the first fork."""

    def __init__(self, slots: int):
        # Anonymous and MAP_SHARED (mmap's default): forked children share these pages.
        # One slot more than children: the root's state, last.
        self.memory = mmap.mmap(-1, SLOT.size * (max(1, slots) + 1))
        self.root_state = Slot(self.memory, SLOT.size * max(1, slots))

    def slot(self, index: int) -> Slot:
        """The slot of the child at this position in the tree."""
        return Slot(self.memory, SLOT.size * index)


#: This process's slot; None outside a forked child (a child run by hand beats for no one).
_mine: Slot | None = None
#: The root's state slot; set in the supervisor before it forks, so every child inherits it.
_root: Slot | None = None


def share_root_state(slot: Slot | None) -> None:
    """In the supervisor, before the first fork: the slot that tells children the root's state."""
    global _root
    _root = slot


def root_lost_since() -> float:
    """The Unix time the supervisor found the root gone, or 0.0 while it is there (or outside
    a supervised tree, where no one watches)."""
    return _root.read() if _root is not None else 0.0


def attach(slot: Slot | None) -> None:
    """In a freshly forked child: beat into this slot from now on."""
    global _mine
    _mine = slot


def beat() -> None:
    """Say this process is still turning its loop."""
    if _mine is not None:
        _mine.stamp(time.monotonic())


async def beat_forever(interval: float = FRONT_BEAT_SECONDS) -> None:
    """Beat every interval seconds for as long as the event loop runs its callbacks."""
    while True:
        beat()
        await asyncio.sleep(interval)
