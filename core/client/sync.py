"""Client: the daemon's API as blocking calls, on one httpx.Client (kept-alive connections,
safe to share between threads)."""

import time

import httpx

from mq.client import calls
from mq.client.api import Operations
from mq.client.retry import RETRYABLE_ERRORS


class Client(Operations):
    """A blocking client of one mq daemon; use it in a `with` block or close() it."""

    _http_class = httpx.Client

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        """The client itself."""
        return self

    def __exit__(self, *exc_info) -> None:
        """Close the client."""
        self.close()

    def _perform(self, call: calls.Call):
        """Send the call, pausing between retries, and return its result or raise its error."""
        attempt = 0
        while True:
            outcome = self._exchange(call)
            pause = self.policy.pause(attempt, outcome)
            if pause is None:
                return calls.result(call, outcome, self.url, retried=attempt > 0)
            time.sleep(pause)
            attempt += 1

    def _exchange(self, call: calls.Call) -> httpx.Response | Exception:
        """One try: the response, or the connection error as a value."""
        try:
            return self._http.request(**call.arguments(self.timeout))
        except RETRYABLE_ERRORS as err:
            return err
