"""Producers and consumers that talk to any daemon of a cluster and record what they did in a
total_queue.History; and the final drain, through every daemon, once the faults stop.

Each request goes to a daemon picked at random, on a new connection (a daemon may have died
since the last one). Shared by bench/chaos.py, bench/soak.py and tests/chaos/.
"""

import http.client
import json
import random
import threading
import time
from collections import Counter

from total_queue import History, check, make_body

from mq.properties import UNLIMITED_RETRY

#: Seconds a client waits for one answer; a paused daemon holds requests this long at most.
REQUEST_SECONDS = 10.0


#: The status call() gives when the connection was refused: nothing was sent, nothing done.
REFUSED = -1


def call(port: int, method: str, path: str, body: bytes | None = None,
         timeout: float = REQUEST_SECONDS) -> tuple[int, http.client.HTTPMessage | None, bytes]:
    """One request on a new connection: (status, headers, body); (REFUSED, None, b"") when no
    daemon listens, (0, None, b"") on any other error or a timeout (the outcome is unknown)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.connect()
    except ConnectionRefusedError:
        conn.close()
        return REFUSED, None, b""
    except OSError:
        conn.close()
        return 0, None, b""
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    except (OSError, http.client.HTTPException):
        return 0, None, b""
    finally:
        conn.close()


class Traffic:
    """Producer and consumer threads over a set of ports and queues, until stop()."""

    def __init__(self, ports: list[int], queues: list[str], history: History,
                 rng: random.Random, producers: int = 2, consumers: int = 3,
                 adds_per_second: float = 50.0, abandon: float = 0.02, max_body: int = 2000,
                 wait: float = 1.0):
        self.ports, self.queues, self.history = ports, queues, history
        self.rng, self.abandon, self.max_body, self.wait = rng, abandon, max_body, wait
        self.pause = producers / adds_per_second if adds_per_second > 0 else 0.0
        self.stopping = threading.Event()
        self.counts = {"adds refused": 0, "add errors": 0, "fetch errors": 0, "ack errors": 0}
        #: (method, status) -> answers; status 0: no answer, -1: refused.
        self.statuses: Counter = Counter()
        #: The first answers no fault excuses (a 404 for a queue that exists, a 5xx but 503):
        #: (time, port, method, path, status, body).
        self.odd_answers: list[tuple] = []
        self.threads = [threading.Thread(target=self.produce, args=(n,), daemon=True)
                        for n in range(producers)]
        self.threads += [threading.Thread(target=self.consume, daemon=True)
                         for _ in range(consumers)]

    def start(self) -> "Traffic":
        """Make the queues, then start every thread.

        The queues redeliver forever (retry -1): a fetch whose answer a fault cut off still
        counts as a delivery, and after a few such a message would go to its dead-letter
        queue, out of the drain's sight. What is checked is that nothing is lost or handed
        out twice, not the dead-letter rule (tests/delivery/ has that)."""
        for queue in self.queues:
            for method, path, body in (("PUT", f"/{queue}", None),
                                       ("PATCH", f"/{queue}/properties",
                                        json.dumps({"retry": UNLIMITED_RETRY}).encode())):
                status, _, answer = call(self.ports[0], method, path, body)
                if status not in (200, 201, 204):
                    raise RuntimeError(f"cannot make queue {queue}: {method} {path}: {status} "
                                       f"{answer[:200]!r}")
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Ask every thread to stop and wait for them (each finishes its request in hand)."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(REQUEST_SECONDS * 3)

    def record(self, port: int, method: str, path: str, status: int, body: bytes) -> None:
        """Count an answer; keep the first few that no fault excuses, to say what they were."""
        self.statuses[method, status] += 1
        if (status == 404 or (status >= 500 and status != 503)) and len(self.odd_answers) < 20:
            self.odd_answers.append((round(time.time(), 3), port, method, path, status,
                                     body[:300].decode("utf-8", "replace")))

    def produce(self, number: int) -> None:
        """Add messages with checkable bodies at the set rate; record each outcome."""
        seq = 0
        while not self.stopping.is_set():
            seq += 1
            token = f"p{number}-{seq}"
            queue = self.rng.choice(self.queues)
            body = make_body(token, self.rng.randrange(0, self.max_body))
            port, path = self.rng.choice(self.ports), f"/{queue}/messages"
            status, headers, answer = call(port, "POST", path, body)
            self.record(port, "POST", path, status, answer)
            if status == 201:
                self.history.add_acknowledged(token, headers["X-Message-Id"])
            elif status == REFUSED:
                self.counts["adds refused"] += 1  # Never sent: delivering it would be unexpected.
            else:
                self.history.add_indeterminate(token)
                self.counts["add errors"] += 1
            self.stopping.wait(self.pause)

    def consume(self) -> None:
        """Fetch (with a long poll of `wait` seconds), record the delivery, ack it with its
        receipt (or now and then leave it for its timer to bring back)."""
        while not self.stopping.is_set():
            queue = self.rng.choice(self.queues)
            if not self.take_one(self.rng.choice(self.ports), queue, wait=self.wait,
                                 abandon=self.rng.random() < self.abandon):
                self.stopping.wait(0.05)

    def take_one(self, port: int, queue: str, wait: float, abandon: bool = False) -> bool:
        """Fetch one message and ack it; False when none came (or the fetch failed)."""
        path = f"/{queue}/messages?wait={wait:g}"
        status, headers, body = call(port, "GET", path)
        self.record(port, "GET", path, status, body)
        if status != 200:
            if status != 204:
                self.counts["fetch errors"] += 1
            return False
        message_id, receipt = headers["X-Message-Id"], headers["X-Receipt"]
        delivery = self.history.delivered(message_id, body, int(headers["X-Attempts"]))
        if abandon:
            delivery.abandoned = True
            return True
        path = f"/{queue}/messages/{message_id}?receipt={receipt}"
        status, _, answer = call(port, "DELETE", path)
        self.record(port, "DELETE", path, status, answer)
        delivery.acked = status == 204
        if status != 204:
            self.counts["ack errors"] += 1
        return True


def drain(traffic: Traffic, quiet_seconds: float, timeout: float, say=print) -> bool:
    """Fetch and ack through every daemon until all of them have had nothing to hand out for
    quiet_seconds (long enough for every timer and the movers' rescans); False at timeout."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    taken = 0
    while time.monotonic() < deadline:
        got = False
        for port in traffic.ports:
            for queue in traffic.queues:
                while traffic.take_one(port, queue, wait=0):
                    got = True
                    taken += 1
        if got:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_seconds:
            say(f"  drained {taken} messages; nothing more for {quiet_seconds:g} s")
            return True
        time.sleep(0.2)
    say(f"  drain timed out after {timeout:g} s ({taken} taken)")
    return False


#: With --peers, the movers list delay/ again every 5 s by default (mq --peer-rescan).
MOVER_RESCAN_SECONDS = 5.0


def stop_and_check(traffic: Traffic, history: History, timeout: float, say=print,
                   rescan: float = MOVER_RESCAN_SECONDS) -> dict:
    """Stop the traffic, drain every queue (long enough for any timer set during the run to
    pass and a mover to rescan delay/, every `rescan` seconds: the daemons' --peer-rescan),
    and return total_queue.check's counts with "drained" and "client errors"."""
    traffic.stop()
    drained = drain(traffic, quiet_seconds=timeout + rescan + 2,
                    timeout=120 + timeout, say=say)
    counts = check(history)
    counts["drained"] = drained
    counts["client errors"] = dict(traffic.counts)
    return counts
