"""FetchActor: owns a set of queues; serves fetches, replies, deletes and queue operations in order."""

import time
from collections import deque

from mq import properties
from mq import store as fmt
from mq.actors.base import DEFERRED, Actor
from mq.actors.queue_index import QueueIndex
from mq.errors import Conflict, Invalid, MqError, NotFound

#: Seconds between re-listings of a queue whose index ran empty (lost notifications, peers,
#: other writers on the root such as the Spark data source).
RELIST_EMPTY_SECONDS = 0.5
#: Seconds between reads of the notice files of the queues this actor has indexed: a writer
#: no daemon hears (a Spark driver on another host) posts one after each commit.
NOTICE_SECONDS = 0.5
#: Longest long poll, in seconds.
MAX_WAIT_SECONDS = 20.0


def parse_receipt(message_id: str, receipt: str) -> int:
    """The delivery number a receipt '{id}.{n}' names; Invalid if it is not this message's."""
    rid, _, number = receipt.rpartition(".")
    if rid != message_id or not number.isdigit() or int(number) < 1:
        raise Invalid(f"receipt {receipt!r} is not a receipt of message {message_id}")
    return int(number)


class FetchActor(Actor):
    """Everything for one queue lands on one fetch actor, so it is serialized and FIFO."""

    kind = "fetch"

    def start(self) -> None:
        """Connect to the mover, which times the messages this actor hides."""
        self.indexes: dict[str, QueueIndex] = {}
        self.notices: dict[str, str] = {}  # queue -> notice token its index has seen
        self.noticed_at = time.monotonic()
        self.waiters: dict[str, deque] = {}
        self.props = properties.PropertyFiles(
            self.store, {"timeout": self.options.timeout, "max_body_bytes": self.options.max_body_bytes})
        self.mover = self.connect_mover()

    def ready_index(self, queue: str) -> QueueIndex:
        """The queue's index, built from its folder on first use or when empty and stale."""
        index = self.indexes.get(queue)
        if index is None or (not index and time.monotonic() - index.listed_at > RELIST_EMPTY_SECONDS):
            # The notice is read before the listing, so one posted meanwhile is seen as new.
            self.notices[queue] = self.store.read_notice(queue)
            index = self.indexes[queue] = QueueIndex(self.store.list_ready(queue))
        return index

    def merge_noticed(self) -> None:
        """Add to each index the messages a writer announced with a new notice since it was listed."""
        if time.monotonic() - self.noticed_at < NOTICE_SECONDS:
            return
        self.noticed_at = time.monotonic()
        for queue, index in self.indexes.items():
            token = self.store.read_notice(queue)
            if token is not None and token != self.notices.get(queue):
                self.notices[queue] = token
                for message_id, attempts in self.store.list_ready(queue, known=index.members):
                    index.add(message_id, attempts)
                self.log.debug("fetch.noticed", queue=queue, ready=len(index))

    def handle_batch(self, requests):
        """Apply each request in arrival order, flush the folders touched once, then reply."""
        self.dirs: set[str] = set()
        self.hidden: list = []
        results = []
        for peer, rid, payload in requests:
            try:
                results.append(self.apply(peer, rid, payload))
            except MqError as err:
                results.append(err)
            except OSError as err:
                results.append(fmt.unavailable(err, f"cannot {payload.get('op')}"))
        results = self.commit(results)
        self.serve_waiters()
        return results

    def commit(self, results: list) -> list:
        """Flush what this batch changed; on failure turn its successes into 503s."""
        if self.dirs:
            try:
                self.store.flush(self.dirs)
            except OSError as err:
                error = fmt.unavailable(err, "cannot flush")
                results = [error if isinstance(r, dict) else r for r in results]
                # The renames into delay/ happened even though the flush failed: the mover
                # must still time them, or they would stay hidden for good.
        self.tell_mover(self.hidden)
        self.dirs, self.hidden = set(), []
        return results

    def apply(self, peer: bytes, rid: bytes, payload: dict):
        """One request; the folders it changed and the messages it hid are collected for commit."""
        op = payload.get("op")
        if op in ("rules_get", "rules_put", "rules_delete"):
            return self.rules(op, payload.get("rules"))
        queue = fmt.validate_queue(payload.get("queue"))
        if op == "ready":
            index = self.indexes.get(queue)
            if index is not None:
                for message_id, attempts in payload.get("ids", ()):
                    index.add(message_id, attempts)
            return {}
        if op == "fetch":
            return self.fetch(queue, peer, rid, float(payload.get("wait") or 0))
        if op in ("delete", "ack", "nack", "extend"):
            return self.reply_to(op, queue, fmt.validate_id(payload.get("id")), payload)
        if op == "queue_get":
            if not self.store.queue_exists(queue):
                raise NotFound(f"queue {queue!r} does not exist")
            return {"queue": queue, "properties": self.props.effective(queue)}
        if op == "queue_put":
            return {"queue": queue, "created": self.store.create_queue(queue)}
        if op == "queue_delete":
            self.indexes.pop(queue, None)
            self.notices.pop(queue, None)
            return {"queue": queue, "in_flight": self.store.delete_queue(queue)}
        if op == "redrive":
            return self.redrive(queue)
        if op.startswith("props_"):
            return self.queue_props(op, queue, payload.get("properties"))
        raise Invalid(f"fetch actor cannot {op!r}")

    # -- fetching ---------------------------------------------------------------------------

    def fetch(self, queue: str, peer: bytes, rid: bytes, wait: float):
        """Hide the oldest ready message for the queue's timeout and return it; or wait for one."""
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise Invalid(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds")
        result = self.take(queue)
        if result is not None:
            return result
        if not self.store.queue_exists(queue):
            self.indexes.pop(queue, None)
            raise NotFound(f"queue {queue!r} does not exist")
        if wait <= 0:
            return {"empty": True}
        self.waiters.setdefault(queue, deque()).append((peer, rid, time.monotonic() + wait))
        self.log.debug("fetch.wait", queue=queue, seconds=wait)
        return DEFERRED

    def take(self, queue: str) -> dict | None:
        """Claim the next ready message of the queue, or None when there is none."""
        index = self.ready_index(queue)
        timeout = self.props.effective(queue)["timeout"]
        while True:
            taken = index.take(self.options.peers)
            if taken is None:
                return None
            message_id, attempts = taken
            due = time.time() + timeout
            data = self.store.claim(queue, message_id, due, attempts)
            if data is None:
                continue  # Removed, or taken by a peer: try the next one.
            delivery = attempts + 1
            self.dirs.update({self.store.queue_dir(queue), self.store.folder("delay")})
            try:
                message = fmt.decode_message(queue, message_id, data)
            except (ValueError, KeyError) as err:
                self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err))
                self.store.ack(queue, message_id, delivery)
                self.dirs.add(self.store.folder("remove"))
                continue
            self.hidden.append((queue, message_id, delivery, due))
            return {"id": message_id, "body": message.body, "content_type": message.content_type,
                    "receipt": f"{message_id}.{delivery}", "attempts": delivery, "due": due,
                    "created_ms": message.created_ms}

    def serve_waiters(self) -> None:
        """Answer long polls: a message for each waiter that can have one, 204 when time is up."""
        if not self.waiters:
            return
        now = time.monotonic()
        answers = []
        for queue in list(self.waiters):
            waiting = self.waiters[queue]
            while waiting:
                peer, rid, deadline = waiting[0]
                result = None if deadline <= now else self.take_or_none(queue)
                if result is None and deadline > now:
                    break
                waiting.popleft()
                answers.append((peer, rid, result or {"empty": True}))
            if not waiting:
                del self.waiters[queue]
        results = self.commit([a[2] for a in answers])
        for (peer, rid, _), result in zip(answers, results):
            self.reply(peer, rid, result)

    def take_or_none(self, queue: str) -> dict | None:
        """take(), with a vanished queue or disk error ending the wait as an answer."""
        try:
            return self.take(queue)
        except OSError as err:
            return fmt.unavailable(err, "cannot fetch")

    def tick(self) -> None:
        """Take in noticed messages; expire long polls and serve ones whose queue gained messages."""
        try:
            self.merge_noticed()
        except OSError as err:
            self.log.warning("fetch.notice_failed", error=str(err))
        self.serve_waiters()

    def poll_timeout_ms(self) -> int:
        """Wake for the nearest long-poll deadline, or to re-list queues someone waits on."""
        if not self.waiters:
            return 500
        nearest = min(w[0][2] for w in self.waiters.values())
        return max(0, min(int(RELIST_EMPTY_SECONDS * 1000), int((nearest - time.monotonic()) * 1000) + 1))

    # -- replies to a delivery: ack, nack, extend, delete -------------------------------------

    def reply_to(self, op: str, queue: str, message_id: str, payload: dict) -> dict:
        """Apply ack, nack, extend or delete; a stale receipt is refused with 409."""
        props = self.props.effective(queue)
        # Probe every delivery count a message can have, not only up to today's retry: a
        # message delivered before its retry was lowered keeps its higher count.
        max_attempts = properties.MAX_RETRY + 1
        receipt = payload.get("receipt")
        if op == "delete" or (op == "ack" and not receipt):
            index = self.indexes.get(queue)
            known = index.attempts(message_id) if index else None
            left = self.store.remove(queue, message_id, max_attempts,
                                     ("ready", known) if known is not None else None)
            if left is None:
                raise NotFound(f"message {message_id} not found in queue {queue!r}")
            if index:
                index.discard(message_id)
            self.dirs.update({left, self.store.folder("remove")})
            return {"id": message_id}
        delivery = parse_receipt(message_id, receipt) if receipt else self.in_flight(
            queue, message_id, max_attempts)
        if op == "ack":
            done = self.store.ack(queue, message_id, delivery)
            self.dirs.update({self.store.folder("delay"), self.store.folder("remove")})
        elif op == "extend":
            seconds = payload.get("seconds") or props["timeout"]
            if not 0 < seconds <= properties.MAX_TIMEOUT:
                raise Invalid(f"seconds must be more than 0 and at most {properties.MAX_TIMEOUT:g}")
            due = time.time() + seconds
            done = self.store.extend(queue, message_id, delivery, due)
            if done:
                self.dirs.add(self.store.folder("delay"))
                self.hidden.append((queue, message_id, delivery, due))
                return {"id": message_id, "due": due, "receipt": f"{message_id}.{delivery}"}
        else:
            dead = props["dead_letter_queue"] if delivery > props["retry"] else None
            outcome, _ = self.store.release(queue, message_id, time.time(), delivery, dead, force=True)
            done = outcome in ("ready", "dead")
            if done:
                self.requeued(queue, message_id, delivery, dead)
                return {"id": message_id, "dead_letter": dead}
        if not done:
            self.refuse_stale(queue, message_id, delivery, max_attempts)
        return {"id": message_id}

    def requeued(self, queue: str, message_id: str, delivery: int, dead: str | None) -> None:
        """Record a message made ready again (by nack), in its queue or its dead-letter queue."""
        self.dirs.update({self.store.folder("delay"), self.store.queue_dir(dead or queue)})
        if dead is None:
            self.ready_index(queue).add(message_id, delivery)
        else:
            self.log.info("fetch.dead_letter", queue=queue, id=message_id, dead_letter_queue=dead)
            self.send_mover("relay", queue=dead, ids=[[message_id, 0]])

    def in_flight(self, queue: str, message_id: str, max_attempts: int) -> int:
        """The current delivery number of an in-flight message (for a reply without a receipt)."""
        found = self.store.locate(queue, message_id, max_attempts)
        if found is None:
            raise NotFound(f"message {message_id} not found in queue {queue!r}")
        state, attempts = found
        if state != "in_flight":
            raise Conflict(f"message {message_id} is not in flight (it is {state})")
        return attempts

    def refuse_stale(self, queue: str, message_id: str, delivery: int, max_attempts: int) -> None:
        """Raise 404 when the message is gone, 409 when this delivery is over but it lives on."""
        found = self.store.locate(queue, message_id, max_attempts)
        if found is None:
            raise NotFound(f"message {message_id} not found in queue {queue!r}")
        state, attempts = found
        raise Conflict(f"stale receipt {message_id}.{delivery}: the message is now {state}"
                       + (f" (delivery {attempts})" if attempts else ""))

    # -- dead letters and properties ------------------------------------------------------------

    def redrive(self, queue: str) -> dict:
        """Move every message of the queue's dead-letter queue back into the queue."""
        dead = self.props.effective(queue)["dead_letter_queue"]
        if not self.store.queue_exists(dead):
            return {"queue": queue, "dead_letter_queue": dead, "moved": 0}
        ids = self.store.redrive(dead, queue)
        index = self.ready_index(queue)
        for message_id in ids:
            index.add(message_id, 0)
        self.dirs.update({self.store.queue_dir(dead), self.store.queue_dir(queue)})
        return {"queue": queue, "dead_letter_queue": dead, "moved": len(ids)}

    def queue_props(self, op: str, queue: str, value) -> dict:
        """Read, replace, patch or reset a queue's own properties."""
        path = self.store.props_path(queue)
        if op == "props_put":
            self.store.write_json(path, properties.validate(value))
        elif op == "props_patch":
            self.store.write_json(path, {**self.props.own(queue), **properties.validate(value)})
        elif op == "props_delete":
            self.store.delete_file(path)
        elif op != "props_get":
            raise Invalid(f"fetch actor cannot {op!r}")
        return {"queue": queue, "own": self.props.own(queue), "effective": self.props.effective(queue)}

    def rules(self, op: str, value) -> dict:
        """Read, replace or reset the default property rules."""
        path = self.store.default_props_path()
        if op == "rules_put":
            self.store.write_json(path, properties.validate_rules(value))
        elif op == "rules_delete":
            self.store.delete_file(path)
        return {"rules": self.props.rules()}
