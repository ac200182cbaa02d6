"""When a client tries a request again: after a 503 or a lost connection, with exponential
backoff that also honours the daemon's Retry-After, a bounded number of times."""

import math
import ssl
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx

#: Transport failures worth another try: the daemon is down, restarting or cut the connection.
#: (A bad URL scheme or a proxy error would fail the same way again.)
RETRYABLE_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to pause before each retry."""

    retries: int = 5
    backoff: float = 0.1
    max_backoff: float = 5.0

    def __post_init__(self):
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be a whole number >= 0, not {self.retries!r}")
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")

    def pause(self, attempt: int, outcome: httpx.Response | Exception) -> float | None:
        """Seconds to wait before retry number attempt + 1 after this outcome; None: stop here."""
        if attempt >= self.retries or not retryable(outcome):
            return None
        wanted = self.backoff * 2 ** attempt
        if isinstance(outcome, httpx.Response):
            wanted = max(wanted, retry_after(outcome))
        return min(wanted, self.max_backoff)


def retryable(outcome: httpx.Response | Exception) -> bool:
    """True for a 503 and for a connection that failed or broke."""
    if isinstance(outcome, httpx.Response):
        return outcome.status_code == 503
    if untrusted(outcome):
        return False  # A certificate the client does not trust stays untrusted (ca).
    return isinstance(outcome, RETRYABLE_ERRORS)


def untrusted(error: BaseException | None) -> bool:
    """True when a connection failed because the server's certificate did not verify (httpx
    wraps httpcore's error, which wraps ssl's)."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def retry_after(response: httpx.Response) -> float:
    """The seconds a Retry-After header asks for (delta seconds or an HTTP date); 0 if none."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return 0.0
    return seconds if 0 <= seconds < math.inf else 0.0
