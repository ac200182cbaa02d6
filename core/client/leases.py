"""LeaseKeeper: keeps the messages a sync Consumer is still handling hidden, by extending each
one's timer at every half of it, from one thread."""

import itertools
import threading
import time
from contextlib import contextmanager

from mq.client.consuming import half_timer, log
from mq.client.errors import ClientError, ConflictError, NotFoundError


class LeaseKeeper:
    """Extends the timer of every held message each `timeout / 2` seconds until it is let go."""

    def __init__(self, client, timeout: float):
        """Keep messages through `client`, whose queue hides a fetched message `timeout` s."""
        self.client = client
        self.timeout = timeout
        self.interval = half_timer(timeout)
        self._held: dict[int, list] = {}  # token -> [monotonic time of the next extend, message]
        self._tokens = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mq-lease-keeper", daemon=True)
        self._thread.start()

    @contextmanager
    def held(self, message):
        """Inside, the message (just fetched) is extended at each half of its timer."""
        token = next(self._tokens)
        with self._changed:
            self._held[token] = [time.monotonic() + self.interval, message]
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                del self._held[token]

    def close(self) -> None:
        """Stop the keeper's thread."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()

    def _run(self) -> None:
        """Sleep until the nearest extend is due, make the due ones (outside the lock), repeat."""
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                due = [(token, entry[1]) for token, entry in self._held.items() if entry[0] <= now]
                if not due:
                    nearest = min((entry[0] for entry in self._held.values()), default=None)
                    self._changed.wait(None if nearest is None else nearest - now)
                    continue
            for token, message in due:
                self._extend(token, message)

    def _extend(self, token: int, message) -> None:
        """Extend one message and time its next extension."""
        error: ClientError | None
        try:
            self.client.extend(message, self.timeout)
            next_at, error = time.monotonic() + self.interval, None
        except (ConflictError, NotFoundError) as err:
            # Its delivery is over (the timer ran out first, or it was deleted): extending
            # again cannot help, and the handler's ack will fail too.
            next_at, error = float("inf"), err
        except ClientError as err:
            next_at, error = time.monotonic() + min(self.interval / 2, 1.0), err
        with self._changed:
            entry = self._held.get(token)
            if entry is None:
                return  # Let go meanwhile (acked): an error is no news.
            entry[0] = next_at
        if error is not None:
            log.warning("extending message %s of queue %s failed: %s", message.id,
                        message.queue, error)
