"""GroupClaims: which delivery holds a fifo queue's message group, kept on the root so that
every daemon sharing it (--peers) sees it (docs/FORMAT.md, "Group claims").

A group's claim is the file groups/{queue}:{digest of the group}, holding the deliveries
`{id}.{n}` that hold the group (one, or several handed out to one SQS holder). Claims are
only ever created, never edited in place, by an exclusive rename (Disk.rename, checked where
the file system refuses RENAME_NOREPLACE): a claim whose deliveries have all ended is taken
over by creating the link `{claim}.{last delivery}`, which only one daemon can create (a
delivery is last in one content only: each new content ends with the delivery it adds). The
links from the claim form a chain; its last link holds the group. The winner then renames
its link over the claim, so the chain is one file again; a crash in between leaves a chain
of two, still read right. A delivery ends when its name is in neither delay/ nor its queue:
it never comes back, so "ended" stays true and two daemons that both see it decide alike.
"""

import errno
import hashlib
import os
from collections.abc import Set

from mq.errors import lost_race
from mq.ids import new_id
from mq.store.names import entry_name, parse_entry, queued_name

#: Most links followed from a claim (each one a crash in the middle of a take-over).
MAX_CHAIN = 64


def group_key(group: str) -> str:
    """The group's name in groups/: short and safe whatever the group's characters."""
    return hashlib.sha256(group.encode()).hexdigest()[:32]


class GroupClaims:
    """The claims of message groups under one root."""

    def __init__(self, paths, disk) -> None:
        self.paths = paths
        self.disk = disk
        self.folder = paths.folder("groups")

    def claim_path(self, queue: str, group: str) -> str:
        """The claim file of a queue's group."""
        return f"{self.folder}/{queued_name(queue, group_key(group))}"

    def read(self, path: str) -> list[str] | None:
        """The deliveries a link names; None when it is gone."""
        try:
            with open(path, "rb") as f:
                return f.read().decode("ascii", "replace").split()
        except OSError as err:
            if lost_race(err) or err.errno == errno.ENOENT:
                return None
            raise

    def holder(self, queue: str, group: str) -> tuple[str, list[str]] | None:
        """(last link, its deliveries) of the group's claim chain; None when there is none."""
        path = self.claim_path(queue, group)
        found = None
        for _ in range(MAX_CHAIN):
            held = self.read(path)
            if held is None:
                return found
            found = (path, held)
            if not held:
                return found
            path = f"{self.claim_path(queue, group)}.{held[-1]}"
        return found

    def ended(self, queue: str, delivery: str) -> bool:
        """Whether a delivery `{id}.{n}` holds nothing any more: its name is neither in delay/
        nor back in its queue, nor is the message ready to become it (a claim is taken before
        the message's rename, and that rename is what hands it out)."""
        parsed = parse_entry(delivery)
        if parsed is None or parsed[1] < 1:
            return True
        message_id, n = parsed
        return not (os.path.exists(self.paths.delay_path(queue, message_id, n))
                    or os.path.exists(self.paths.ready_path(queue, message_id, n))
                    or os.path.exists(self.paths.ready_path(queue, message_id, n - 1)))

    def free_for(self, queue: str, group: str, message_id: str, attempts: int,
                 mine: Set[str] = frozenset()) -> bool:
        """Whether the message (ready after `attempts` deliveries) may be handed out as far as
        other daemons go: no claim, one whose deliveries all ended, one this message itself
        holds or is about to take, or one of deliveries in `mine` (this holder's)."""
        found = self.holder(queue, group)
        if found is None:
            return True
        held = found[1]
        own = {entry_name(message_id, attempts), entry_name(message_id, attempts + 1)}
        return (set(held) <= own | set(mine)
                or all(d in own or d in mine or self.ended(queue, d) for d in held))

    def take(self, queue: str, group: str, message_id: str, attempts: int,
             mine: Set[str] = frozenset()) -> bool:
        """Make the claim name this message's next delivery (added to `mine`, the holder's
        deliveries, when it holds the group already); False when another delivery holds the
        group, or another daemon took it first."""
        delivery = entry_name(message_id, attempts + 1)
        base = self.claim_path(queue, group)
        found = self.holder(queue, group)
        if found is None:
            return self.publish(base, [delivery]) and self.holds(queue, group, base)
        path, held = found
        if held == [delivery]:
            return True  # Taken for this very delivery (here or by a peer): the rename decides.
        live = [d for d in held if d != delivery and d not in mine
                and d != entry_name(message_id, attempts) and not self.ended(queue, d)]
        if live:
            return False
        keep = [d for d in held if d in mine and not self.ended(queue, d)]
        link = f"{base}.{held[-1]}" if held else f"{base}.-"
        if not self.publish(link, keep + [delivery]):
            return False
        if not self.holds(queue, group, link):
            self.disk.discard(link)  # Made after the chain had moved on: not part of it.
            return False
        if link != base:
            try:
                self.disk.rename_over(link, base)
            except OSError:
                pass  # The chain stays two links long; readers follow it.
        return True

    def holds(self, queue: str, group: str, link: str) -> bool:
        """Whether the chain of the group's claim ends at `link`."""
        found = self.holder(queue, group)
        return found is not None and found[0] == link

    def publish(self, path: str, deliveries: list[str]) -> bool:
        """Create a link holding the deliveries, whole, by an exclusive rename; False when
        the name exists."""
        temp = f"{self.folder}/.{new_id()}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:
            os.makedirs(self.folder, exist_ok=True)  # A root made before groups/ existed.
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, " ".join(deliveries).encode())
        finally:
            os.close(fd)
        try:
            self.disk.rename(temp, path)
        except FileExistsError:
            self.disk.discard(temp)
            return False
        except BaseException:
            self.disk.discard(temp)
            raise
        return True
