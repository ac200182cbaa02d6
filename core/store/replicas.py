"""The replica layout of a GlusterFS root, read from the client with no admin access.

A GlusterFS client answers the virtual extended attribute `glusterfs.pathinfo` on any folder of
its mount with the translator tree above that folder's bricks, e.g. for a replica 2 volume:

    (<REPLICATE:vol-replicate-0> <POSIX(/b1):host:/b1/> <POSIX(/b0):host:/b0/>)

Each `<REPLICATE:...>` group is one replica set; a brick outside any such group (a plain
distributed volume) is a set of one copy. An arbiter brick is listed like a full copy, and counts
as one for quorum. With fewer than three copies a brick's loss and return can leave a stale
copy in charge (split brain): docs/CLUSTER.md asks for replica 3 or an arbiter.
"""

import os
import re
from dataclasses import dataclass

from mq.store.disk import PER_FILE_FLUSH, filesystem_type

#: The attribute names, the second for clients that only answer the trusted namespace.
PATHINFO_ATTRS = ("glusterfs.pathinfo", "trusted.glusterfs.pathinfo")
#: The copies a replica set needs for quorum to survive one brick's loss and return.
SAFE_COPIES = 3
#: One token of a pathinfo string: a parenthesis, or one <...> translator or brick entry.
_TOKEN = re.compile(r"[()]|<[^<>]*>")
#: A brick entry: <POSIX(brick path):host:brick path/>.
_BRICK = re.compile(r"<POSIX\((?P<path>.*)\):(?P<host>[^:]*):")
#: An octal escape of mountinfo (a space is \040).
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class ReplicaSet:
    """One set of bricks holding the same files: its translator kind and name, its bricks."""

    kind: str  # "replicate", "disperse", or "brick" for a brick with no copy
    name: str
    bricks: tuple[str, ...]  # host:path

    def describe(self) -> str:
        """The set in one line, for logs: name, copies, bricks."""
        return f"{self.name or self.kind}: {len(self.bricks)} copies ({', '.join(self.bricks)})"


@dataclass(frozen=True)
class Layout:
    """What the start-up check found on a GlusterFS root: its sets, or why it has none."""

    sets: tuple[ReplicaSet, ...] = ()
    error: str = ""  # set when the layout is unknown

    def weak(self) -> tuple[ReplicaSet, ...]:
        """The replica sets with fewer than SAFE_COPIES copies (disperse sets not judged)."""
        return tuple(s for s in self.sets if s.kind != "disperse" and len(s.bricks) < SAFE_COPIES)


def parse_pathinfo(text: str) -> tuple[ReplicaSet, ...]:
    """The replica sets listed in a glusterfs.pathinfo value (empty when none is recognised)."""
    # Each open group: [translator kind, translator name, bricks directly inside it].
    stack: list[list] = [["", "", []]]
    found: list[ReplicaSet] = []

    def close(group: list) -> None:
        kind, name, bricks = group
        if kind in ("replicate", "disperse"):
            found.append(ReplicaSet(kind, name, tuple(bricks)))
        else:  # Directly under DISTRIBUTE, or alone: one copy each.
            found.extend(ReplicaSet("brick", "", (brick,)) for brick in bricks)

    for token in _TOKEN.findall(text.rstrip("\0")):
        if token == "(":
            stack.append(["", "", []])
        elif token == ")":
            if len(stack) > 1:
                close(stack.pop())
        elif (brick := _BRICK.match(token)):
            stack[-1][2].append(f"{brick['host']}:{brick['path']}")
        elif not stack[-1][0] and ":" in token:
            kind, _, name = token[1:-1].partition(":")
            stack[-1][0], stack[-1][1] = kind.lower(), name
    while stack:
        close(stack.pop())
    return tuple(found)


def mount_type(path: str) -> str:
    """The type of the mount holding path, from /proc/self/mountinfo ("" when unknown)."""
    path = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields, _, rest = line.partition(" - ")
                point = _ESCAPE.sub(lambda m: chr(int(m[1], 8)), fields.split()[4])
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, rest.split()[0]
    except (OSError, IndexError):
        return ""
    return kind


def replica_layout(root: str) -> Layout | None:
    """The replica layout of the GlusterFS volume holding root; None when root is not on
    GlusterFS. Never raises: an unreadable layout is a Layout with its error."""
    try:
        if PER_FILE_FLUSH.get(filesystem_type(root)) != "fuse":
            return None
    except OSError:
        return None
    error = ""
    for attr in PATHINFO_ATTRS:
        try:
            raw = os.getxattr(root, attr)
        except OSError as err:
            error = f"{attr}: {err.strerror or err}"
            continue
        if (sets := parse_pathinfo(raw.decode(errors="replace"))):
            return Layout(sets)
        error = f"{attr}: no brick in {raw[:200]!r}"
    # Another FUSE file system (JuiceFS, ...) has no such attribute: nothing to say there.
    return Layout(error=error) if mount_type(root) == "fuse.glusterfs" else None
