"""OpenTelemetry in the client, when it is installed (`pip install mq[otel]`): an add carries the
caller's trace context, a fetched message gives it back, and a consumer runs each handler in a
span of that trace. Without OpenTelemetry every function here does nothing."""

from contextlib import contextmanager, nullcontext
from types import ModuleType

propagate: ModuleType | None
trace: ModuleType | None
try:
    from opentelemetry import propagate, trace
except ImportError:  # The optional extra is not installed: the client works without traces.
    propagate = trace = None

#: The headers the daemon keeps with a message and answers with every fetch (docs/HTTP.md, "Trace
#: context"); any other header a propagator writes is sent but not kept.
HEADERS = ("traceparent", "tracestate")
#: The instrumentation scope of the consumer's spans.
TRACER_NAME = "mq.client"


def available() -> bool:
    """True when OpenTelemetry's API can be imported."""
    return propagate is not None


def injected(headers: dict) -> dict:
    """The headers with the current trace context added, as the global propagator writes it
    (W3C `traceparent` and `tracestate` by default); unchanged without OpenTelemetry."""
    if propagate is None:
        return headers
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {**headers, **carrier} if carrier else headers


def carried(headers) -> dict:
    """{"traceparent", "tracestate"} of a fetch's answer headers (or a peek's JSON record),
    None for an absent one."""
    return {name: headers.get(name) or None for name in HEADERS}


def extracted(message):
    """The OpenTelemetry Context of a message's trace (an empty one when it has none)."""
    if propagate is None:
        raise ImportError("Message.trace_context() needs OpenTelemetry: pip install 'mq[otel]'")
    return propagate.extract({name: getattr(message, name) for name in HEADERS
                              if getattr(message, name, None)})


def processing(message):
    """A context manager: inside, a CONSUMER span `process {queue}`, the child of (and linked
    to) the producer's span that the message carries, is current; ends with an exception's
    error status when the handler raises. Nothing without OpenTelemetry."""
    if trace is None:
        return nullcontext()
    return _span(message)


@contextmanager
def _span(message):
    """The span of processing(), for a message with or without trace context."""
    assert trace is not None, "processing() makes no span without OpenTelemetry"
    parent = extracted(message)
    producer = trace.get_current_span(parent).get_span_context()
    if not producer.is_valid:
        parent = None  # No trace came with the message: the span starts in the current one.
    # Parented, so the trace follows the message; linked too, as OpenTelemetry's messaging
    # conventions ask of a processing span, so that backends which follow links find it.
    links = [trace.Link(producer)] if producer.is_valid else []
    attributes = {"messaging.system": "mq", "messaging.operation.type": "process",
                  "messaging.operation.name": "process",
                  "messaging.destination.name": message.queue,
                  "messaging.message.id": message.id,
                  "mq.message.attempts": message.attempts}
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(f"process {message.queue}", context=parent,
                                      kind=trace.SpanKind.CONSUMER, links=links,
                                      attributes=attributes) as span:
        yield span
