"""The message a client hands out: the same class for the HTTP client and the broker-less library."""

from dataclasses import dataclass


@dataclass
class Message:
    """One delivery of a message (receipt None for a peek), with its body and content type."""

    queue: str
    id: str
    body: bytes
    content_type: str
    receipt: str | None
    attempts: int
    created_ms: int | None
