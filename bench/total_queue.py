"""A total-queue check in the spirit of Jepsen's: every add acknowledged is delivered, nothing
is delivered that was not added, bodies arrive whole, and each duplicate has a cause.

Producers and consumers record what they did in a History; `check` reads it once everything
was drained and returns the counts that bench/chaos.py prints and tests/chaos/ asserts on.
Shared by both (the test puts bench/ on sys.path); not part of the installed package.
"""

import hashlib
import os
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

#: Kinds of duplicate delivery whose cause the history shows.
EXPLAINED = ("timer: not acked by choice", "timer: ack failed (kill, pause)")
#: The counts that must be zero for a run to pass.
MUST_BE_ZERO = ("lost", "unexpected", "corrupted", "unexplained duplicates")


def make_body(token: str, size: int) -> bytes:
    """A body naming its add (token) and carrying its payload's length and SHA-256."""
    payload = os.urandom(size)
    return b"%s:%d:%s:" % (token.encode(), size, hashlib.sha256(payload).hexdigest().encode()) + payload


def read_body(body: bytes) -> tuple[str | None, bool]:
    """(token, whole) of a body make_body built; token is None when even that is unreadable."""
    try:
        token, size, digest, payload = body.split(b":", 3)
        whole = len(payload) == int(size) and hashlib.sha256(payload).hexdigest().encode() == digest
        return token.decode(), whole
    except ValueError:
        return None, False


@dataclass
class Delivery:
    """One message handed to a consumer, and what came of its ack."""

    message_id: str
    token: str | None
    whole: bool
    attempts: int
    acked: bool = False  # 204 to the DELETE with its receipt
    abandoned: bool = False  # the consumer chose not to ack (its timer brings it back)


@dataclass
class History:
    """What producers and consumers did; every method is safe to call from many threads."""

    added: dict = field(default_factory=dict)  # token -> id, for adds answered 201
    maybe: set = field(default_factory=set)  # tokens of adds with no answer, or an error
    deliveries: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_acknowledged(self, token: str, message_id: str) -> None:
        """Record an add the daemon answered with 201 and an id."""
        with self.lock:
            self.added[token] = message_id

    def add_indeterminate(self, token: str) -> None:
        """Record an add whose outcome is unknown (timeout, reset, 5xx): it may be stored."""
        with self.lock:
            self.maybe.add(token)

    def delivered(self, message_id: str, body: bytes, attempts: int) -> Delivery:
        """Record one delivery, before it is acked; return it so the ack can be noted on it."""
        token, whole = read_body(body)
        delivery = Delivery(message_id, token, whole, attempts)
        with self.lock:
            self.deliveries.append(delivery)
        return delivery


def check(history: History) -> dict:
    """The total-queue counts of a drained run (see MUST_BE_ZERO)."""
    with history.lock:
        added, maybe, deliveries = dict(history.added), set(history.maybe), list(history.deliveries)
    by_id = defaultdict(list)
    for d in deliveries:
        by_id[d.message_id].append(d)
    ids_of_token = defaultdict(set)
    corrupted = 0
    for d in deliveries:
        if not d.whole:
            corrupted += 1
        if d.token is not None:
            ids_of_token[d.token].add(d.message_id)
    # An acknowledged add must come back under the id it was acknowledged with.
    corrupted += sum(1 for token, ids in ids_of_token.items()
                     if token in added and ids != {added[token]})
    duplicates = Counter()
    unexplained = []
    for history_of_id in by_id.values():
        history_of_id.sort(key=lambda d: d.attempts)  # Threads record in arrival order.
        for before, after in zip(history_of_id, history_of_id[1:]):
            if before.acked or after.attempts <= before.attempts:
                duplicates["unexplained duplicates"] += 1
                unexplained.append(f"{before.message_id} delivery {before.attempts}"
                                   f"{' acked' if before.acked else ''}, then {after.attempts}")
            elif before.abandoned:
                duplicates[EXPLAINED[0]] += 1
            else:
                duplicates[EXPLAINED[1]] += 1
    delivered_tokens = set(ids_of_token)
    attempted = set(added) | maybe
    return {
        "acknowledged adds": len(added),
        "indeterminate adds": len(maybe),
        "deliveries": len(deliveries),
        "distinct messages delivered": len(by_id),
        "lost": len(set(added) - delivered_tokens),
        "unexpected": len(delivered_tokens - attempted)
                      + sum(1 for d in deliveries if d.token is None),
        "recovered (indeterminate, delivered)": len(maybe & delivered_tokens),
        "duplicates": sum(duplicates.values()),
        **{f"  {cause}": duplicates[cause] for cause in EXPLAINED},
        "unexplained duplicates": duplicates["unexplained duplicates"],
        "corrupted": corrupted,
        "lost ids (first 5)": sorted(added[t] for t in set(added) - delivered_tokens)[:5],
        "unexplained (first 5)": unexplained[:5],
    }


def passed(counts: dict) -> bool:
    """True when every count that must be zero is."""
    return all(counts[name] == 0 for name in MUST_BE_ZERO)


def table(counts: dict) -> str:
    """The counts as a Markdown table, with the verdict on each that must be zero."""
    lines = ["| what | count |", "|---|---:|"]
    for name, value in counts.items():
        if isinstance(value, list):
            if value:
                lines.append(f"| {name} | {', '.join(value)} |")
            continue
        verdict = (" (must be 0: **ok**)" if value == 0 else " (must be 0: **FAILED**)") \
            if name in MUST_BE_ZERO else ""
        lines.append(f"| {name.replace('  ', '&nbsp;&nbsp;')}{verdict} | {value:,} |")
    return "\n".join(lines)
