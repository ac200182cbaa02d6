"""OpenTelemetry through the Python client against the real daemon: an add carries the current
trace context, every fetch (single, batch, peek) gives it back, and Consumer and AsyncConsumer
run each handler in a CONSUMER span of the producer's trace, recorded by the SDK's in-memory
exporter; without OpenTelemetry the client works as before. mq.local's put carries the
current trace context too."""

import asyncio
import os
import re
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from delivery_support import fresh_queue, shared_mq  # noqa: F401
from support import request
from repo_support import REPO

from mq.client import AsyncClient, AsyncConsumer, Client, Consumer, Producer

EXPORTER = InMemorySpanExporter()
#: A trace context given to an add outright.
GIVEN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
README = REPO / "docs" / "CLIENTS.md"


@pytest.fixture(scope="module", autouse=True)
def provider():
    """The SDK as the global tracer provider (set once per process), exporting to EXPORTER."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        sdk = TracerProvider()
        sdk.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(sdk)
    yield


@pytest.fixture
def spans():
    """The spans this test finishes."""
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def url(daemon) -> str:
    """The daemon's base URL."""
    return f"http://127.0.0.1:{daemon.port}"


def hex_trace(span) -> str:
    """The 32 hex digits of a span's trace id, as a traceparent writes them."""
    return format(span.get_span_context().trace_id, "032x")


def processed(spans, queue: str) -> list:
    """The finished CONSUMER spans of handlers of queue."""
    return [s for s in spans.get_finished_spans()
            if s.kind is SpanKind.CONSUMER and s.name == f"process {queue}"]


def consume_one_sync(daemon, queue: str, handler) -> None:
    """Run a Consumer until its handler has run once (the handler stops it)."""
    with Client(url(daemon)) as client:
        consumer = Consumer(client, queue)

        def handle(message):
            """Stop after this message, then run the test's handler."""
            consumer.stop()
            handler(message)

        consumer.consume(handle, wait=1)


def consume_one_async(daemon, queue: str, handler) -> None:
    """Run an AsyncConsumer until its handler has run once (the handler stops it)."""
    async def main():
        async with AsyncClient(url(daemon)) as client:
            consumer = AsyncConsumer(client, queue)

            async def handle(message):
                """Stop after this message, then run the test's handler."""
                consumer.stop()
                handler(message)

            await consumer.consume(handle, wait=1)
    asyncio.run(main())


def produce(daemon, queue: str, kind: str, body: str) -> None:
    """Put body through a Producer over a Client or an AsyncClient, in the current context."""
    if kind == "sync":
        with Client(url(daemon)) as client:
            Producer(client, queue).put(body)
        return

    async def main():
        async with AsyncClient(url(daemon)) as client:
            await Producer(client, queue).put(body)
    # A new loop runs in a copy of this context: the producer's span is current there.
    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_producer_span_s_trace_follows_its_message_into_the_consumer_s_span(
        shared_mq, spans, kind):  # noqa: F811
    queue = fresh_queue("traced")
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("checkout") as producer:
        produce(shared_mq, queue, kind, "order 1")
    seen = []
    (consume_one_sync if kind == "sync" else consume_one_async)(
        shared_mq, queue, lambda m: seen.append((m, trace.get_current_span())))
    message, current = seen[0]
    assert message.traceparent.split("-")[1] == hex_trace(producer)
    [span] = processed(spans, queue)
    context = span.get_span_context()
    assert context.trace_id == producer.get_span_context().trace_id
    assert span.parent.span_id == producer.get_span_context().span_id
    assert [link.context.span_id for link in span.links] == [producer.get_span_context().span_id]
    assert span.attributes["messaging.destination.name"] == queue
    assert span.attributes["messaging.message.id"] == message.id
    # The handler ran inside that span: its own spans join the trace.
    assert current.get_span_context().span_id == context.span_id
    assert span.status.status_code is not StatusCode.ERROR


def test_a_failing_handler_s_span_records_the_error_and_a_message_without_trace_starts_one(
        shared_mq, spans):  # noqa: F811
    queue = fresh_queue("untraced")
    with Client(url(shared_mq)) as client:
        client.put(queue, "no trace")  # No span is current: nothing to carry.

    def fail(message):
        """Refuse the message."""
        assert message.traceparent is None and message.tracestate is None
        raise RuntimeError("cannot ship")

    consume_one_sync(shared_mq, queue, fail)
    [span] = processed(spans, queue)
    assert span.parent is None and not span.links
    assert span.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" and "cannot ship" in e.attributes["exception.message"]
               for e in span.events)


def test_mq_local_carries_the_current_trace_as_the_http_client_does(tmp_path, spans):
    from mq.local import LocalClient
    tracer = trace.get_tracer("test")
    with LocalClient(tmp_path / "root", create_root=True) as local:
        with tracer.start_as_current_span("checkout") as producer:
            local.put("orders", b"traced")
            # One given outright wins over the current span's.
            local.put("orders", b"given", traceparent=GIVEN)
        local.put("orders", b"untraced")  # No span is current: nothing to carry.
        peeked = local.peek("orders")
        traced, given, untraced = (local.get("orders") for _ in range(3))
    assert [m.traceparent for m in peeked] == [traced.traceparent, GIVEN, None]
    assert traced.traceparent.split("-")[1] == hex_trace(producer)
    parent = trace.get_current_span(traced.trace_context()).get_span_context()
    assert (parent.trace_id, parent.span_id) == (producer.get_span_context().trace_id,
                                                 producer.get_span_context().span_id)
    assert given.traceparent == GIVEN and untraced.traceparent is None


def test_a_batch_add_carries_the_trace_to_every_message_of_peek_and_batch_fetch(
        shared_mq, spans):  # noqa: F811
    queue = fresh_queue("batch")
    producer = trace.SpanContext(trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
                                 span_id=0x00F067AA0BA902B7, is_remote=False,
                                 trace_flags=trace.TraceFlags(1),
                                 trace_state=trace.TraceState([("shop", "eu")]))
    with Client(url(shared_mq)) as client:
        with trace.use_span(trace.NonRecordingSpan(producer)):
            client.add_many(queue, ["a", b"b", {"body": "c", "content_type": "text/x"}])
        expected = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        peeked = client.peek(queue)
        assert [(m.traceparent, m.tracestate) for m in peeked] == [(expected, "shop=eu")] * 3
        fetched = client.fetch_many(queue, max=10)
        assert [(m.traceparent, m.tracestate) for m in fetched] == [(expected, "shop=eu")] * 3
        for message in fetched:
            context = trace.get_current_span(message.trace_context()).get_span_context()
            assert (context.trace_id, context.span_id) == (producer.trace_id, producer.span_id)
            assert context.is_remote and context.trace_state.get("shop") == "eu"
        client.ack_many(fetched)


def test_peek_answers_the_trace_context_as_json_fields(shared_mq):  # noqa: F811
    queue = fresh_queue("peeked")
    traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert request(shared_mq.port, "POST", f"/{queue}/messages", b"x",
                   {"traceparent": traced, "tracestate": "a=1"}).status == 201
    assert request(shared_mq.port, "POST", f"/{queue}/messages", b"y").status == 201
    first, second = request(shared_mq.port, "GET", f"/{queue}/peek").json()["messages"]
    assert (first["traceparent"], first["tracestate"]) == (traced, "a=1")
    assert "traceparent" not in second and "attributes" not in second


#: A client run with OpenTelemetry hidden (as if not installed): every call works, a fetched
#: message still shows the traceparent it came with, and only trace_context() asks for the extra.
WITHOUT_OTEL = textwrap.dedent("""
    import sys
    sys.modules["opentelemetry"] = None  # import opentelemetry now raises ImportError
    from mq.client import Client, Consumer, Producer
    from mq.client import tracing
    assert not tracing.available()
    url, queue, traced = sys.argv[1:4]
    with Client(url) as client:
        Producer(client, queue).put("plain")
        [ids] = [client.add_many(queue, ["one", "two"])]
        assert [m.body for m in client.peek(queue)][:3] == [b"traced", b"plain", b"one"]
        first = client.get(queue)
        assert first.body == b"traced" and first.traceparent == traced, first
        try:
            first.trace_context()
        except ImportError as err:
            assert "mq[otel]" in str(err)
        else:
            raise AssertionError("trace_context() without OpenTelemetry")
        client.ack(first)
        second = client.fetch_many(queue, max=1)
        assert second[0].traceparent is None
        client.ack_many(second)
        consumer, handled = Consumer(client, queue), []
        def handle(message):
            handled.append(message.body)
            if len(handled) == 2:
                consumer.stop()
        consumer.consume(handle, wait=1)
        assert handled == [b"one", b"two"], handled
        assert client.stat(queue)["ready"] == 0
    assert sys.modules["opentelemetry"] is None
    print("ok")
""")


def test_the_client_works_as_before_without_opentelemetry(shared_mq, tmp_path):  # noqa: F811
    queue = fresh_queue("plain")
    traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert request(shared_mq.port, "POST", f"/{queue}/messages", b"traced",
                   {"traceparent": traced}).status == 201
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL, url(shared_mq), queue, traced],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_the_readme_tracing_example_prints_what_it_says(shared_mq, tmp_path):  # noqa: F811
    section = README.read_text().split("## Python client\n", 1)[1].split("\n## ", 1)[0]
    [code] = [block for block in re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
              if "trace_context()" in block]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "MQ_URL": url(shared_mq)})
    assert done.returncode == 0 and done.stdout == "True\n", done.stdout + done.stderr
