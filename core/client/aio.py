"""AsyncClient: the daemon's API as coroutines, on one httpx.AsyncClient (kept-alive
connections)."""

import asyncio
import functools

import httpx

from mq.client import calls
from mq.client.api import OPERATIONS, Operations
from mq.client.retry import RETRYABLE_ERRORS


class AsyncClient(Operations):
    """An asyncio client of one mq daemon; use it in an `async with` block or await close()."""

    _http_class = httpx.AsyncClient

    async def close(self) -> None:
        """Close the kept-alive connections."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        """The client itself."""
        return self

    async def __aexit__(self, *exc_info) -> None:
        """Close the client."""
        await self.close()

    async def _perform(self, call: calls.Call):
        """Send the call, pausing between retries, and return its result or raise its error."""
        attempt = 0
        while True:
            outcome = await self._exchange(call)
            pause = self.policy.pause(attempt, outcome)
            if pause is None:
                return calls.result(call, outcome, self.url, retried=attempt > 0)
            await asyncio.sleep(pause)
            attempt += 1

    async def _exchange(self, call: calls.Call) -> httpx.Response | Exception:
        """One try: the response, or the connection error as a value."""
        try:
            return await self._http.request(**call.arguments(self.timeout))
        except RETRYABLE_ERRORS as err:
            return err


def _coroutine(operation):
    """The shared method as a coroutine function (it returns _perform's coroutine)."""
    @functools.wraps(operation)
    async def method(self, *args, **kwargs):
        return await operation(self, *args, **kwargs)
    return method


# The shared methods return what _perform returns, here a coroutine; wrapping them makes them
# coroutine functions too, so that inspect, help() and type checkers see `async def`.
for _name in OPERATIONS:
    setattr(AsyncClient, _name, _coroutine(getattr(Operations, _name)))
