"""Consumer: go-queue's consumer shape over a blocking client: worker threads fetch, run a
handler, ack what succeeded, and keep slow handlers' messages hidden."""

import threading

from mq.client import tracing
from mq.client.consuming import (
    FETCH_ERROR_PAUSE,
    ConsumeOptions,
    checked_queue,
    handler_failed,
    log,
    reply_for,
)
from mq.client.errors import ClientError
from mq.client.leases import LeaseKeeper
from mq.client.signals import stop_on_signals


class Consumer:
    """Runs handler(message) on every message of one queue, `concurrency` at a time."""

    def __init__(self, client, queue: str):
        """Consume `queue` through a blocking client (Client, or mq.local's LocalClient)."""
        self.client = client
        self.queue = checked_queue(queue)
        self._stopping = threading.Event()

    def __repr__(self) -> str:
        """The queue and the client."""
        return f"Consumer({self.client!r}, {self.queue!r})"

    def consume(self, handler, *, concurrency: int = 1, on_error: str = "nack",
                wait: float = 20.0) -> None:
        """Handle messages until stop(), SIGINT or SIGTERM; return when in-flight ones are done."""
        options = ConsumeOptions(handler, concurrency, on_error, wait)
        # Read once: the first extension of each message comes at half of this timer.
        keeper = LeaseKeeper(self.client, self.client.properties(self.queue)["timeout"])
        workers = [threading.Thread(target=self._work, args=(options, keeper), daemon=True,
                                    name=f"mq-consumer-{self.queue}-{n}")
                   for n in range(concurrency)]
        try:
            with stop_on_signals(self.stop):
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
        finally:
            keeper.close()
            # A stop() that came before or during this run ends this run only.
            self._stopping.clear()

    def stop(self) -> None:
        """Ask consume() to return: no new message is taken; in-flight handlers finish first.

        A worker waiting in a long poll notices within `wait` seconds; a message that poll
        brings is given back at once (nack)."""
        self._stopping.set()

    def _work(self, options: ConsumeOptions, keeper: LeaseKeeper) -> None:
        """One worker: fetch and handle until stopped."""
        while not self._stopping.is_set():
            message = self._next(options.wait)
            if message is None:
                continue
            if self._stopping.is_set():
                self._settle("nack", message)
                return
            with keeper.held(message):
                failed = self._run(options.handler, message)
            self._settle(reply_for(failed, options.on_error), message)

    def _next(self, wait: float):
        """The next message, or None (none came, or the fetch failed and was logged)."""
        try:
            return self.client.get(self.queue, wait=wait)
        except ClientError as err:
            # The client has retried already: the daemon is down or the queue is gone. Keep
            # trying, slowly, until stopped.
            log.warning("fetching from queue %s failed: %s", self.queue, err)
            self._stopping.wait(FETCH_ERROR_PAUSE)
            return None

    def _run(self, handler, message) -> bool:
        """Call the handler (in a span of the message's trace, tracing.py); True when it raised
        (logged with its traceback)."""
        try:
            with tracing.processing(message):
                handler(message)
            return False
        except Exception:
            return handler_failed(message)

    def _settle(self, verb: str | None, message) -> None:
        """Ack or nack the message (None: leave it to its timer); a refusal is logged."""
        if verb is None:
            return
        try:
            getattr(self.client, verb)(message)
        except ClientError as err:
            # A 409 or 404 means the delivery was over (its timer ran out): it will be, or
            # was, delivered again.
            log.warning("%s of message %s of queue %s failed: %s", verb, message.id,
                        self.queue, err)
