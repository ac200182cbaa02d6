"""Renames that never replace: renameat2(2) with RENAME_NOREPLACE, and the start-up check
that the root's file system honours it.

Two clients of a network file system renaming one file to one name at the same moment can
both be told they succeeded: the loser's kernel still has the source cached, finds the
winner's new name holding the same file and, as POSIX says of a rename between two names of
one file, does nothing and returns 0. A message would go to two consumers. With
RENAME_NOREPLACE the loser gets EEXIST instead (docs/CLUSTER.md, "Exclusive renames").
"""

import ctypes
import errno
import os
import sys

from mq.ids import new_id

AT_FDCWD = -100
RENAME_NOREPLACE = 1
#: What renameat2 answers when the kernel, the C library or the file system lacks the flag.
UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})

_libc = ctypes.CDLL(None, use_errno=True)
#: glibc 2.28 and later. Called without argtypes: ints and bytes pass as they are, which
#: keeps a rename as cheap as os.rename (bench/RESULTS.md, "Exclusive renames").
_renameat2 = getattr(_libc, "renameat2", None)
#: How os.fsencode encodes a str path.
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def rename_noreplace(source: str, target: str, _get_errno=ctypes.get_errno) -> None:
    """rename(2) that fails with FileExistsError when target exists (one atomic step);
    OSError(ENOSYS) when the C library has no renameat2."""
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), source, None, target)
    try:
        # As os.fsencode encodes a str, without its two Python-level calls per path.
        names = source.encode(_ENCODING, _ERRORS), target.encode(_ENCODING, _ERRORS)
    except AttributeError:  # bytes or a path-like object
        names = os.fsencode(source), os.fsencode(target)
    if _renameat2(AT_FDCWD, names[0], AT_FDCWD, names[1], RENAME_NOREPLACE):
        code = _get_errno()
        raise OSError(code, os.strerror(code), source, None, target)


def checked_rename(source: str, target: str) -> None:
    """A plain rename(2) for a file system that refuses RENAME_NOREPLACE, raising
    FileExistsError when it only seemed to succeed.

    When a peer renamed the file to the same name a moment before, the kernel (whose cached
    name of the source still counts) finds both names to be one file and returns 0 without
    doing anything: the source's cached name is then still there, naming the same file as
    the target. After a real rename the source name is gone. What escapes: a cached name
    that expires in the microseconds between the rename and this check (docs/CLUSTER.md).
    """
    os.rename(source, target)
    try:
        left = os.lstat(source)
    except OSError:
        return
    try:
        moved = os.lstat(target)
    except OSError:
        return
    if (left.st_dev, left.st_ino) == (moved.st_dev, moved.st_ino):
        raise FileExistsError(errno.EEXIST, "renamed by a peer a moment before", source, None,
                              target)


def check_exclusive(folder: str) -> tuple[str, str]:
    """How renames in `folder` keep two clients from claiming one file: (mode, why).

    "noreplace": renameat2 RENAME_NOREPLACE works. "checked": the file system refuses the
    flag, so renames are checked_rename ones. "none": a rename with the flag replaced an
    existing name, which nothing can make up for. Two scratch files `.{id}.tmp` (the reaper
    sweeps such names in notices/ when a crash leaves them): the first is renamed onto the
    second (it must fail and leave both), then to a free name (it must move).
    """
    first, second, third = (os.path.join(folder, f".{new_id()}.tmp") for _ in range(3))
    made = []
    try:
        for path in (first, second):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            made.append(path)
        try:
            rename_noreplace(first, second)
        except FileExistsError:
            pass
        except OSError as err:
            if err.errno not in UNSUPPORTED:
                raise
        else:
            made.remove(first)
            return "none", "a rename with RENAME_NOREPLACE replaced an existing name here"
        try:
            rename_noreplace(first, third)
        except OSError as err:
            if err.errno not in UNSUPPORTED:
                raise
            return "checked", (f"the file system refuses RENAME_NOREPLACE ({os.strerror(err.errno)}): "
                               "each rename is a plain one, checked afterwards")
        made[made.index(first)] = third
        return "noreplace", "renameat2 RENAME_NOREPLACE"
    finally:
        for path in made:
            try:
                os.unlink(path)
            except OSError:
                pass
