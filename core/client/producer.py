"""Producer: go-queue's producer shape over a client (Client, AsyncClient or mq.local's
LocalClient): put a message now, after a delay or at a time, and revoke messages."""

import inspect
from datetime import datetime

from mq.client.calls import at_value


class Producer:
    """Adds messages to one queue through a client; each method returns what the client's does
    (a coroutine to await with an AsyncClient)."""

    def __init__(self, client, queue: str):
        """Produce to `queue` through `client`."""
        if not isinstance(queue, str) or not queue:
            raise ValueError(f"queue must be a non-empty str, not {queue!r}")
        self.client = client
        self.queue = queue

    def __repr__(self) -> str:
        """The queue and the client."""
        return f"Producer({self.client!r}, {self.queue!r})"

    def put(self, body: bytes | str, *, dedup_id: str | None = None,
            content_type: str | None = None):
        """Add a message, ready now; return its id."""
        return self.client.put(self.queue, body, dedup_id=dedup_id, content_type=content_type)

    def delay(self, body: bytes | str, seconds: float, *, dedup_id: str | None = None,
              content_type: str | None = None):
        """Add a message that becomes ready after `seconds`; return its id."""
        return self.client.put(self.queue, body, delay=seconds, dedup_id=dedup_id,
                               content_type=content_type)

    def at(self, body: bytes | str, when: datetime | float, *, dedup_id: str | None = None,
           content_type: str | None = None):
        """Add a message that becomes ready at `when` (an aware datetime or Unix seconds); its id."""
        # Converted here so that every client gets the same plain value.
        when = float(at_value(when)) if isinstance(when, datetime) else when
        return self.client.put(self.queue, body, at=when, dedup_id=dedup_id,
                               content_type=content_type)

    def revoke(self, ids: str | list[str]):
        """Delete one message or several (an id or ids), whatever state each is in, in order."""
        ids = [ids] if isinstance(ids, str) else list(ids)
        if not all(isinstance(message_id, str) for message_id in ids):
            raise TypeError("ids must be a message id or an iterable of message ids")
        if inspect.iscoroutinefunction(self.client.revoke):
            return self._revoke_each(ids)
        for message_id in ids:
            self.client.revoke(self.queue, message_id)
        return None

    async def _revoke_each(self, ids: list[str]) -> None:
        """Revoke through an async client, one id after the other."""
        for message_id in ids:
            await self.client.revoke(self.queue, message_id)
