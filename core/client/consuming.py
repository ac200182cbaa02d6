"""What Consumer and AsyncConsumer share: their options, checked, and what to answer after
a handler ran."""

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from mq.operations import MAX_WAIT_SECONDS

log = logging.getLogger("mq.client")

#: on_error values: "nack" gives a failed message back at once, "wait" lets its timer run out.
ON_ERROR = ("nack", "wait")
#: Seconds a worker pauses after a fetch failed beyond the client's own retries.
FETCH_ERROR_PAUSE = 1.0


@dataclass(frozen=True)
class ConsumeOptions:
    """How to consume: the handler, how many at once, what a failure does, the long poll."""

    handler: Callable
    concurrency: int = 1
    on_error: str = "nack"
    wait: float = MAX_WAIT_SECONDS

    def __post_init__(self):
        if not callable(self.handler):
            raise TypeError(f"handler must be callable, not {type(self.handler).__name__}")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) \
                or self.concurrency < 1:
            raise ValueError(f"concurrency must be a whole number >= 1, not {self.concurrency!r}")
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, not {self.on_error!r}")
        if isinstance(self.wait, bool) or not isinstance(self.wait, (int, float)) \
                or not 0 <= self.wait <= MAX_WAIT_SECONDS:
            raise ValueError(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds, not {self.wait!r}")


def checked_queue(queue) -> str:
    """The queue a consumer is made for; ValueError unless it is a non-empty str."""
    if not isinstance(queue, str) or not queue:
        raise ValueError(f"queue must be a non-empty str, not {queue!r}")
    return queue


def reply_for(failed: bool, on_error: str) -> str | None:
    """The client method that settles a handled message: ack, nack, or None (its timer runs)."""
    if not failed:
        return "ack"
    return "nack" if on_error == "nack" else None


def handler_failed(message) -> bool:
    """Log the exception a handler raised on a message (with its traceback); True."""
    log.exception("handler failed on message %s (attempt %d) of queue %s", message.id,
                  message.attempts, message.queue)
    return True


def half_timer(timeout) -> float:
    """Seconds between extensions of a message whose timer is `timeout` seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 < timeout < math.inf:
        raise ValueError(f"the queue's timeout must be a positive number, not {timeout!r}")
    # A floor keeps a tiny timeout from turning the keeper into a busy loop.
    return max(timeout / 2, 0.005)
