"""tail: the newest ready messages of a queue, then (-f) each new one as it arrives, unconsumed."""

import sys
import time
from collections import deque

from mq.ctl.errors import OK
from mq.ctl.records import write_message
from mq.ctl.scan import Follower


def tail(client, args) -> int:
    """Print the last --lines ready messages; with --follow, poll for newer ones until stopped."""
    out = sys.stdout.buffer
    follower = Follower(client, args.queue)
    try:
        for message in deque(follower.poll(), maxlen=args.lines):
            write_message(out, message, body_only=args.body)
        out.flush()
        while args.follow:
            # A poll, not a synchronization: peek cannot wait for a message without claiming it.
            time.sleep(args.interval)
            for message in follower.poll():
                write_message(out, message, body_only=args.body)
            out.flush()  # A reader of a pipe sees each message as soon as it is found.
    except KeyboardInterrupt:
        if not args.follow:
            raise
        # Ctrl-C is how a follow ends, whenever it comes.
    return OK
