"""System calls Tornado makes for every request that the front does without.

Registrations (LazyReadersLoop): Tornado's IOStream stops listening for reads when a
request has been read and listens again when the handler waits for the actors (to see the
client go), then again after the reply: on asyncio's interface a remove_reader and an
add_reader per request, each one or two epoll_ctl(2) calls (uvloop: six a request, half of
them failing with EEXIST or ENOENT) and a handle made and dropped, about a tenth of the
front's CPU per durable add (bench/RESULTS.md, "Wake-ups and system calls per operation").
Here a reader nobody wants is only marked paused: a stream that wants reads again before its
socket has data costs nothing, and one whose socket turns readable while paused is removed
then, at that first event, which its stream never sees, as if it had been removed at once.

TCP_NODELAY (keep_nodelay): Tornado turns it on to send each response's last bytes at once
and off again after it, two setsockopt(2) calls a request. The front's responses go out in one
write each, so it is set once per connection and left on.
"""

from tornado.ioloop import IOLoop
from tornado.platform.asyncio import AsyncIOMainLoop


class LazyReadersLoop(AsyncIOMainLoop):
    """AsyncIOMainLoop that keeps a stream's reader registered while it is paused."""

    def initialize(self, **kwargs) -> None:  # type: ignore[override]
        """Wrap the running asyncio loop (as IOLoop.current() would)."""
        super().initialize(**kwargs)
        #: fds still registered for reads that their stream does not want now.
        self.paused: set[int] = set()

    def update_handler(self, fd, events: int) -> None:
        """Change what fd listens for; a reader it no longer wants is only paused."""
        number, _ = self.split_fd(fd)
        if events & IOLoop.READ:
            self.paused.discard(number)
        elif number in self.readers:
            self.paused.add(number)
            events |= IOLoop.READ
        super().update_handler(fd, events)

    def remove_handler(self, fd) -> None:
        """Stop listening on fd altogether (its stream closed)."""
        self.paused.discard(self.split_fd(fd)[0])
        super().remove_handler(fd)

    def _handle_events(self, fd: int, events: int) -> None:
        if events & IOLoop.READ and fd in self.paused:
            # The removal that was put off: its stream did not ask for this event.
            self.paused.discard(fd)
            super().update_handler(fd, IOLoop.WRITE if fd in self.writers else 0)
            return
        super()._handle_events(fd, events)


def keep_nodelay(stream) -> None:
    """Turn TCP_NODELAY on for a new connection's IOStream, and keep it on for good."""
    stream.set_nodelay(True)
    stream.set_nodelay = _nodelay_stays


def _nodelay_stays(value: bool) -> None:
    """What a kept stream's set_nodelay does: nothing."""


def install() -> IOLoop:
    """Make the front's IOLoop for the running asyncio loop; before anything asks for one."""
    return LazyReadersLoop()
