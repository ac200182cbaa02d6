"""Reads that change nothing: a whole file in one call, whether an entry may be there.

The Disk (disk.py) holds every change and flush; what only looks at the root is here, used by
the renames of a message (states.py) and the listings that claim nothing (listing.py).
"""

import os

#: Bytes asked for by each read after the first, for a file that grew while it was read.
READ_CHUNK = 1 << 16


def read_all(fd: int) -> bytes:
    """Every byte of an open file, read in one call when its size holds still.

    The first read asks for one byte more than the file's size, so a short read is the end;
    a file that grew meanwhile is read on to its end. A fixed 1 MiB buffer per read, shrunk
    to the body, fragmented the fetch actor's heap: memory in use held still while freed
    memory glibc never reused grew by about 0.3 KB a message (bench/RESULTS.md, "Soak").
    """
    size = os.fstat(fd).st_size
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(fd, READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def may_exist(path: str) -> bool:
    """Whether an entry may be there: False only when it is known to be gone (on any other
    error, whoever acts on the entry finds out)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True
