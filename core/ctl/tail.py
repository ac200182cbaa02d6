"""tail: the newest ready messages of a queue, then (-f) each new one as it arrives, unconsumed."""

import signal
import sys
import threading
import time
from collections import deque

from mq.ctl.errors import OK
from mq.ctl.records import write_message
from mq.ctl.scan import Follower


class Stopped(Exception):
    """Ctrl-C came while tail -f slept between two polls."""


class CtrlC:
    """SIGINT as a request to stop, honoured between polls; a second one interrupts at once.

    Python's own SIGINT raises KeyboardInterrupt wherever the main thread is, and inside the
    HTTP client's lock wrappers (a lock taken in a __enter__ that never returns, or not yet
    released by its __exit__) it leaves a lock held that the client's clean-up then waits on
    forever. So the first Ctrl-C only raises while the loop sleeps, where no lock is held.
    """

    def __init__(self):
        self.requested = False
        self.sleeping = False
        self.installed = False
        self.previous = None

    def handle(self, *_) -> None:
        """Note the request; raise only while sleeping; the next Ctrl-C acts as Python's."""
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self.sleeping:
            raise Stopped

    def sleep(self, seconds: float) -> None:
        """Sleep, unless asked to stop (Stopped: asked meanwhile)."""
        self.sleeping = True
        try:
            if self.requested:
                raise Stopped
            time.sleep(seconds)
        finally:
            self.sleeping = False

    def __enter__(self) -> "CtrlC":
        # Outside the main thread signals cannot be caught; a SIGINT ignored by whoever started
        # mqctl (a background job) stays ignored.
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self.previous = signal.signal(signal.SIGINT, self.handle)
            self.installed = True
        return self

    def __exit__(self, *exc) -> None:
        if self.installed:
            # None: a handler not set from Python, which only the default can stand for.
            signal.signal(signal.SIGINT, self.previous if self.previous is not None
                          else signal.SIG_DFL)


def tail(client, args) -> int:
    """Print the last --lines ready messages; with --follow, poll for newer ones until stopped."""
    out = sys.stdout.buffer
    follower = Follower(client, args.queue)
    if not args.follow:
        print_new(out, follower, args, args.lines)
        return OK
    try:
        with CtrlC() as ctrl_c:
            print_new(out, follower, args, args.lines)
            while not ctrl_c.requested:
                # A poll, not a synchronization: peek cannot wait for a message without claiming it.
                ctrl_c.sleep(args.interval)
                print_new(out, follower, args)
    except (Stopped, KeyboardInterrupt):
        pass  # Ctrl-C is how a follow ends, whenever it comes.
    return OK


def print_new(out, follower: Follower, args, last: int | None = None) -> None:
    """Print the messages of the follower's next poll (only the `last` ones when given)."""
    for message in deque(follower.poll(), maxlen=last):
        write_message(out, message, body_only=args.body)
    out.flush()  # A reader of a pipe sees each message as soon as it is found.
