"""Adding a message without a daemon, in the save actor's order (docs/FORMAT.md, "Add").

Write into new/ (exclusive create), flush the data, record the de-duplication key, rename into
the queue (or delay/), flush, and only then post the notice that tells running daemons.
"""

import os
import socket
import time

from mq import trace_context
from mq.adds import CheckedAdd, with_properties
from mq.client import tracing
from mq.errors import MqError, Unavailable
from mq.ids import new_id
from mq.operations import add_of
from mq.schedule import due_time
from mq.store import Changes, dedup_digest, encode_message

#: Longest wait, in seconds, for an earlier add holding the same key that is still in new/
#: (in another process or daemon), as a save actor waits, before giving up with 503.
PENDING_KEY_SECONDS = 5.0
#: Seconds between looks at such an earlier add.
PENDING_KEY_POLL = 0.002
#: The content type of a str body when none is given, as the HTTP client sends it.
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


def writer_name() -> str:
    """The 'w' header of files this process writes: no save actor ever claims them as its own."""
    return f"local/{socket.gethostname()}-{os.getpid()}"


def put(store, props, queue, body, delay=None, at=None, dedup_id=None,
        content_type=None, group=None, traceparent=None, tracestate=None) -> str:
    """Add a message durably and return its id (the first one's id for a duplicate key)."""
    now = time.time()
    if isinstance(body, str):
        body, content_type = body.encode(), content_type or TEXT_CONTENT_TYPE
    # The save actor's own op, checked as it decodes one.
    add = add_of({"queue": queue, "body": body, "content_type": content_type,
                  "due": due_time(delay, at, now), "dedup_id": dedup_id, "group": group,
                  "attributes": trace_of(traceparent, tracestate) or None}, now)
    effective = props.effective(add.queue)
    with_properties(add, effective, effective["max_body_bytes"], now)
    window = effective["dedup_window"]
    deadline = time.monotonic() + PENDING_KEY_SECONDS
    while True:
        if add.dedup_id:
            earlier = store.dedup.lookup(add.queue, add.dedup_id, window, time.time())
            changes = Changes()
            if earlier and store.dedup.pending(add.queue, earlier, changes):
                # Its add is in progress, or its writer died: never name a message that may
                # not be stored; wait until it leaves new/ or its key goes with it.
                if time.monotonic() > deadline:
                    raise Unavailable("an add with this de-duplication key is still in progress; retry")
                time.sleep(PENDING_KEY_POLL)
                continue
            if earlier:
                # The earlier add's writer may still be flushing its rename: flush it too.
                store.flush(changes)
                return earlier
        stored = store_once(store, add, window)
        if stored:
            return stored
        if time.monotonic() > deadline:  # Lost the key again and again: never spin forever.
            raise Unavailable("de-duplication key is contended; retry")


def trace_of(traceparent: str | None, tracestate: str | None) -> dict:
    """The `a` entries of an add's trace context, as the daemon's fronts store them: the one
    given, else the caller's current OpenTelemetry context (as mq.client sends it); one that
    does not parse is ignored, as the daemon ignores it (W3C Trace Context)."""
    if traceparent is None:
        current = tracing.injected({})
        traceparent, tracestate = current.get("traceparent"), current.get("tracestate")
    return trace_context.parse(traceparent, tracestate)


def store_once(store, add: CheckedAdd, window: float) -> str | None:
    """Write, key, deliver and flush one message; None when another add won its key."""
    created_ms = int(time.time() * 1000)
    message_id = new_id(created_ms)
    data = encode_message(add.body, add.content_type, created_ms, message_id, add.dedup_id,
                          writer_name(), group=add.group, attributes=add.attributes)
    store.write_new(add.queue, message_id, data, add.due)
    changes = Changes()
    try:
        store.flush_data()
        if add.dedup_id and store.dedup.record(add.queue, add.dedup_id, message_id, window,
                                               time.time(), changes) is not None:
            store.discard_new(add.queue, message_id)
            return None  # The caller answers the winner's id once that one is durable.
        store.states.deliver_new(add.queue, message_id, add.due is not None, changes)
    except (MqError, OSError):
        forget_key(store, add, message_id)
        store.discard_new(add.queue, message_id)
        raise
    try:
        store.flush(changes)
    except OSError:
        store.states.remove(add.queue, message_id)  # Never acknowledged, so not kept: the caller retries.
        forget_key(store, add, message_id)
        raise
    store.notices.post(add.queue if add.due is None else None)
    return message_id


def forget_key(store, add: CheckedAdd, message_id: str) -> None:
    """Drop the key an add that failed recorded, so that its retry is stored."""
    if add.dedup_id:
        store.dedup.forget(add.queue, dedup_digest(add.dedup_id), message_id)
