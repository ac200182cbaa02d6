"""Disk errors the front meets itself: answered through the one table of core/errors.py
(ERRNO_KINDS: 503 with Retry-After, or a logged 500 "storage" for an operator's error), never
as an internal error.

The front reads the root in a few places without an actor (the queue list of pull-any and of
SQS ListQueues, a queue's properties for SQS): a network file system whose server is away
fails those reads as it fails the actors'. While the root itself is away (the supervisor's
verdict, or a folder missing because the root's path leads to an empty mount point) the answer
is the actors' refusal (docs/CLUSTER.md, "Errors and outages").
"""

import errno

from mq import logs
from mq.errors import MqError, Unavailable, from_os_error
from mq.store.root import RootWatch
from mq.supervisor import heartbeat

#: errnos of a name missing under the root: the root's path may lead to an empty mount point.
MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})


def disk_error(err: OSError, what: str, root: str = "") -> MqError:
    """The answer to a read of the root that failed in the front (logged once here)."""
    if heartbeat.root_lost_since() or (
            root and err.errno in MISSING_ERRNOS and RootWatch(root).check()):
        answer: MqError = Unavailable("the root is not available (its file system is not "
                                      "mounted, or it is no mq root yet); retry later")
    else:
        answer = from_os_error(err, what)
    logs.get().warning("front.disk_error", what=what, error=str(err), kind=answer.kind)
    return answer
