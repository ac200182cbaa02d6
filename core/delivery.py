"""The delivery rules: what may be handed out, and how a delivery is answered.

Every consumer of a root applies them through this one module: the daemon's fetch actor
(actors/fetch.py, actors/message_groups.py, actors/replies.py), its reaper's retention sweep
(actors/retention.py) and the broker-less mq.local (core/local/consume.py, receipts.py).
docs/DELIVERY.md describes them: Retention, Message groups, Receipts and stale receipts, and
the byte cap of a batch fetch's or a peek's answer (Batches). The
rule of retries and dead letters is mq.properties.exhausted, which all of them call.
"""

from mq import properties
from mq import store as fmt
from mq.errors import Conflict, Invalid, MqError, NotFound, Unavailable
from mq.ids import id_time_ms
from mq.store.listing import read_unclaimed

#: Every delivery count a message can have, not only up to today's retry: a message delivered
#: before its queue's retry was lowered keeps its higher count.
MAX_DELIVERIES = properties.MAX_RETRY + 1

# -- retention ----------------------------------------------------------------------------------


def expiry_cutoff_ms(retention: float, now: float) -> int:
    """The creation time (Unix ms) before which a message of a queue with this `retention`
    has expired; 0 when retention is 0 (kept until acked: no id is older than the epoch)."""
    return int((now - retention) * 1000) if retention else 0


def expired(message_id: str, cutoff_ms: int) -> bool:
    """Whether a message is past its queue's retention: its id carries when it was added."""
    return id_time_ms(message_id) < cutoff_ms


# -- message groups -----------------------------------------------------------------------------


def group_in_file(path: str, queue: str, message_id: str) -> str | None:
    """The group of the message a file holds: "" for none, and for a file that is not that
    message (its claim puts it aside); None when the file is gone (claimed or removed)."""
    try:
        found = read_unclaimed(path, queue, message_id)
    except fmt.CorruptMessage:
        return ""
    return None if found is None else found[0].group


def holds_back(in_flight, message_id: str, holder: str | None = None) -> bool:
    """Whether a message of a fifo queue's group waits: `in_flight` is (id, holder) of each
    message of its group in flight. An older one in flight with another holder (or with
    anyone, when the fetch names none) holds it back; a younger one does not (an older message
    that came back goes again first, as in SQS)."""
    return any(other < message_id and (not holder or owner != holder)
               for other, owner in in_flight)


# -- the size of one answer ---------------------------------------------------------------------

#: Most body bytes one answer of a batch fetch or a peek gathers, whoever serves it (the
#: daemon's fetch actor, mq.local): it stops before the message that would pass this, but always
#: holds its first message, whatever its size. Without it, max messages of up to
#: --max-body-bytes each would be held in memory at once.
MAX_ANSWER_BYTES = 8 * 1024 * 1024


def answer_room(gathered: int, count: int) -> int | None:
    """How many more body bytes an answer of `count` messages holding `gathered` bytes takes:
    None (any size) while it is empty, else what is left of MAX_ANSWER_BYTES."""
    return None if count == 0 else MAX_ANSWER_BYTES - gathered


def joins_answer(gathered: int, count: int, size: int) -> bool:
    """Whether a message of `size` body bytes joins an answer of `count` messages holding
    `gathered` bytes (answer_room)."""
    room = answer_room(gathered, count)
    return room is None or size <= room


def peeked(store, queue: str, candidates, count: int) -> list[tuple[str, int, fmt.Message]]:
    """(id, deliveries, message) of up to `count` of the candidates, (id, deliveries) of ready
    messages oldest first, read without claiming, within the answer's byte cap (joins_answer):
    a peek's answer, whoever serves it. A file gone (taken meanwhile) or not a message (a
    fetch puts it aside) is passed over."""
    out: list[tuple[str, int, fmt.Message]] = []
    size = 0
    for message_id, attempts in candidates:
        try:
            found = read_unclaimed(store.ready_path(queue, message_id, attempts), queue, message_id)
        except fmt.CorruptMessage:
            continue
        if found is None:
            continue
        message = found[0]
        if not joins_answer(size, len(out), len(message.body)):
            break  # The next page starts after the last id returned.
        size += len(message.body)
        out.append((message_id, attempts, message))
        if len(out) == count:
            break
    return out


# -- receipts -----------------------------------------------------------------------------------


#: The most digits of a receipt's delivery number: far more deliveries than a message gets, few
#: enough that reading one costs nothing.
MAX_RECEIPT_DIGITS = 9


def parse_receipt(receipt, message_id: str | None = None) -> tuple[str, int]:
    """(id, delivery) of a receipt '{id}.{n}', n >= 1 (docs/DELIVERY.md, "Receipts and stale
    receipts"), the one reading of that wire form; Invalid when it is not one, or, with
    message_id, not a receipt of that message."""
    if not isinstance(receipt, str):
        raise Invalid("a receipt must be a string")
    rid, _, number = receipt.rpartition(".")
    # isdigit() alone takes other scripts' digits (and "²", which int() refuses).
    if not (number.isascii() and number.isdigit() and len(number) <= MAX_RECEIPT_DIGITS
            and int(number) >= 1):
        raise Invalid(f"{receipt!r} is not a receipt ('{{id}}.{{n}}', n >= 1)")
    if message_id is not None and rid != message_id:
        raise Invalid(f"receipt {receipt!r} is not a receipt of message {message_id}")
    try:
        return fmt.validate_id(rid), int(number)
    except Invalid:
        raise Invalid(f"{receipt!r} is not a receipt ('{{id}}.{{n}}', n >= 1)") from None


def located(store, queue: str, message_id: str, near: int | None = None) -> tuple[str, int]:
    """(state, deliveries) of a message, by the names it may have (also from `near`, a count
    it had, on: mq.store's probe_counts); NotFound when it is gone."""
    found = store.states.locate(queue, message_id, MAX_DELIVERIES, near)
    if found is None:
        raise NotFound(f"message {message_id} not found in queue {queue!r}")
    return found


def current_delivery(store, queue: str, message_id: str, near: int | None = None) -> int:
    """The delivery a reply without a receipt is about: the message's own, when in flight
    (NotFound when it is gone, Conflict when it is not in flight)."""
    state, attempts = located(store, queue, message_id, near)
    if state != "in_flight":
        raise Conflict(f"message {message_id} is not in flight (it is {state})")
    return attempts


def gone(store, queue: str, message_id: str) -> MqError:
    """Why a delete whose every rename failed as a lost race removed nothing: the message is
    gone (NotFound), or is still there, so the file system failed the rename (ENOENT, ESTALE
    while a replica or metadata server comes back: Unavailable)."""
    if store.states.locate(queue, message_id, MAX_DELIVERIES) is None:
        return NotFound(f"message {message_id} not found in queue {queue!r}")
    return Unavailable(f"cannot delete message {message_id}: the file system did not find its "
                       "file, which is still there; retry")


def stale(store, queue: str, message_id: str, delivery: int, near: int | None = None) -> MqError:
    """Why delivery `delivery` cannot be answered: the message is gone (NotFound) or lives on
    as another delivery or state (Conflict); it had that delivery, so probed from it on.
    Found in flight as that very delivery, nothing moved it: the file system failed the
    reply's rename or open (ENOENT, ESTALE while a replica or metadata server comes back),
    and the receipt is still good (Unavailable)."""
    try:
        state, attempts = located(store, queue, message_id, delivery if near is None else near)
    except NotFound as err:
        return err
    if state == "in_flight" and attempts == delivery:
        return Unavailable(f"cannot answer delivery {message_id}.{delivery}: the file system "
                           "did not find its file, which is still there; retry")
    return Conflict(f"stale receipt {message_id}.{delivery}: the message is now {state}"
                    + (f" (delivery {attempts})" if attempts else ""))
