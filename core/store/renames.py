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

from mq.ids import new_id

AT_FDCWD = -100
RENAME_NOREPLACE = 1
#: What renameat2 answers when the kernel, the C library or the file system lacks the flag.
UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})

_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)  # glibc 2.28 and later.
if _renameat2 is not None:
    _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint)
    _renameat2.restype = ctypes.c_int


def rename_noreplace(source: str, target: str) -> None:
    """rename(2) that fails with FileExistsError when target exists (one atomic step);
    OSError(ENOSYS) when the C library has no renameat2."""
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), source, None, target)
    if _renameat2(AT_FDCWD, os.fsencode(source), AT_FDCWD, os.fsencode(target),
                  RENAME_NOREPLACE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), source, None, target)


def check_exclusive(folder: str) -> str | None:
    """Check in `folder` that a rename onto an existing name fails there; None when it does,
    else why the file system cannot keep two clients from claiming one file.

    Two scratch files `.{id}.tmp` (the reaper sweeps such names in notices/ when a crash
    leaves them): the first renamed onto the second must fail with EEXIST and leave both,
    then renamed to a free name must succeed.
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
            if err.errno in UNSUPPORTED:
                return (f"renameat2(RENAME_NOREPLACE) is refused here ({os.strerror(err.errno)}): "
                        "a rename onto an existing name would replace it")
            raise
        else:
            made.remove(first)
            return "renameat2(RENAME_NOREPLACE) replaced an existing name here"
        rename_noreplace(first, third)
        made[made.index(first)] = third
        if not os.path.exists(third) or os.path.exists(first):
            return "a rename with RENAME_NOREPLACE did not move the file here"
        return None
    finally:
        for path in made:
            try:
                os.unlink(path)
            except OSError:
                pass
