"""The message a client hands out: the same class for the HTTP client and the broker-less library."""

from dataclasses import dataclass

from mq.client import tracing


@dataclass
class Message:
    """One delivery of a message (receipt None for a peek), with its body and content type, and
    the W3C trace context it was added with (None when it came without one)."""

    queue: str
    id: str
    body: bytes
    content_type: str
    receipt: str | None
    attempts: int
    created_ms: int | None
    traceparent: str | None = None
    tracestate: str | None = None

    def trace_context(self):
        """The OpenTelemetry Context of the producer's span (empty without a trace), to start
        a span in or link to; ImportError without OpenTelemetry (`pip install 'mq[otel]'`)."""
        return tracing.extracted(self)
