"""AsyncConsumer: the Consumer over an AsyncClient, with tasks instead of threads and an
async handler."""

import asyncio
import inspect

from mq.client import tracing
from mq.client.consuming import (
    FETCH_ERROR_PAUSE,
    ConsumeOptions,
    checked_queue,
    half_timer,
    handler_failed,
    log,
    reply_for,
)
from mq.client.errors import ClientError, ConflictError, NotFoundError
from mq.client.signals import stop_on_signals


class AsyncConsumer:
    """Awaits handler(message) on every message of one queue, `concurrency` at a time."""

    def __init__(self, client, queue: str):
        """Consume `queue` through an AsyncClient."""
        self.client = client
        self.queue = checked_queue(queue)
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_early = False

    def __repr__(self) -> str:
        """The queue and the client."""
        return f"AsyncConsumer({self.client!r}, {self.queue!r})"

    async def consume(self, handler, *, concurrency: int = 1, on_error: str = "nack",
                      wait: float = 20.0) -> None:
        """Handle messages until stop(), SIGINT or SIGTERM; return when in-flight ones are done."""
        options = ConsumeOptions(handler, concurrency, on_error, wait)
        if not (inspect.iscoroutinefunction(handler)
                # An object whose __call__ is async, not a callability test.
                or inspect.iscoroutinefunction(getattr(handler, "__call__", None))):  # noqa: B004
            raise TypeError("handler must be an async function (async def)")
        timeout = (await self.client.properties(self.queue))["timeout"]
        half_timer(timeout)  # Checked before any message is taken.
        stopping = asyncio.Event()
        self._loop, self._stopping = asyncio.get_running_loop(), stopping
        if self._stop_early:
            stopping.set()
        try:
            with stop_on_signals(self.stop, self._loop):
                # A task group: a worker that crashes takes the others down with it.
                async with asyncio.TaskGroup() as workers:
                    for _ in range(concurrency):
                        workers.create_task(self._work(options, timeout, stopping))
        finally:
            self._loop = self._stopping = None
            self._stop_early = False

    def stop(self) -> None:
        """Ask consume() to return (callable from any thread): in-flight handlers finish first.

        A task waiting in a long poll notices within `wait` seconds; a message that poll
        brings is given back at once (nack)."""
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None:
            self._stop_early = True  # Before consume() started: its run ends at once.
            return
        loop.call_soon_threadsafe(stopping.set)

    async def _work(self, options: ConsumeOptions, timeout: float, stopping: asyncio.Event) -> None:
        """One task: fetch and handle until stopped (consume()'s run's `stopping` is set)."""
        while not stopping.is_set():
            message = await self._next(options.wait, stopping)
            if message is None:
                continue
            if stopping.is_set():
                await self._settle("nack", message)
                return
            keeper = asyncio.create_task(self._keep(message, timeout))
            try:
                failed = await self._run(options.handler, message)
            finally:
                keeper.cancel()
            await self._settle(reply_for(failed, options.on_error), message)

    async def _next(self, wait: float, stopping: asyncio.Event):
        """The next message, or None (none came, or the fetch failed and was logged)."""
        try:
            return await self.client.get(self.queue, wait=wait)
        except ClientError as err:
            log.warning("fetching from queue %s failed: %s", self.queue, err)
            try:
                await asyncio.wait_for(stopping.wait(), FETCH_ERROR_PAUSE)
            except TimeoutError:
                pass
            return None

    async def _keep(self, message, timeout: float) -> None:
        """Extend the message's timer at each half of it, until cancelled."""
        while True:
            await asyncio.sleep(half_timer(timeout))
            try:
                await self.client.extend(message, timeout)
            except ClientError as err:
                log.warning("extending message %s of queue %s failed: %s", message.id,
                            self.queue, err)
                if isinstance(err, (ConflictError, NotFoundError)):
                    return  # Its delivery is over: extending again cannot help.

    async def _run(self, handler, message) -> bool:
        """Await the handler (in a span of the message's trace, tracing.py); True when it raised
        (logged with its traceback)."""
        try:
            with tracing.processing(message):
                await handler(message)
            return False
        except Exception:
            return handler_failed(message)

    async def _settle(self, verb: str | None, message) -> None:
        """Ack or nack the message (None: leave it to its timer); a refusal is logged."""
        if verb is None:
            return
        try:
            await getattr(self.client, verb)(message)
        except ClientError as err:
            log.warning("%s of message %s of queue %s failed: %s", verb, message.id,
                        self.queue, err)
