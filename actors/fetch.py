"""FetchActor: owns a set of queues; serves fetches, deletes and queue operations in order."""

import time

from mq import store as fmt
from mq.actors.base import Actor
from mq.actors.queue_index import QueueIndex
from mq.errors import Invalid, MqError, NotFound

#: Seconds between re-listings of a queue whose index ran empty (lost notifications, peers).
RELIST_EMPTY_SECONDS = 0.5


class FetchActor(Actor):
    """Fetches for one queue always land here, so they are serialized and FIFO."""

    kind = "fetch"

    def start(self) -> None:
        """Connect to the mover, which times the messages this actor hides."""
        self.indexes: dict[str, QueueIndex] = {}
        self.mover = self.connect_mover()

    def ready_index(self, queue: str) -> QueueIndex:
        """The queue's index, built from its folder on first use or when empty and stale."""
        index = self.indexes.get(queue)
        if index is None:
            index = self.indexes[queue] = QueueIndex(self.store.list_ready(queue))
        elif not index and time.monotonic() - index.listed_at > RELIST_EMPTY_SECONDS:
            index = self.indexes[queue] = QueueIndex(self.store.list_ready(queue))
        return index

    def handle_batch(self, requests):
        """Apply each request in arrival order, flush the folders touched once, then reply."""
        dirs: set[str] = set()
        hidden: list[tuple[str, str, float]] = []
        results = []
        for _, _, payload in requests:
            try:
                results.append(self.apply(payload, dirs, hidden))
            except MqError as err:
                results.append(err)
            except OSError as err:
                results.append(fmt.unavailable(err, f"cannot {payload.get('op')}"))
        if dirs:
            try:
                self.store.flush(dirs)
            except OSError as err:
                error = fmt.unavailable(err, "cannot flush")
                results = [error if isinstance(r, dict) else r for r in results]
        self.tell_mover(hidden)
        return results

    def apply(self, payload: dict, dirs: set, hidden: list):
        """One request; folders it changed go into dirs, messages it hid into hidden."""
        op = payload.get("op")
        queue = fmt.validate_queue(payload.get("queue"))
        if op == "ready":
            index = self.indexes.get(queue)
            if index is not None:
                for message_id in payload.get("ids", ()):
                    index.add(message_id)
            return {}
        if op == "fetch":
            return self.fetch(queue, dirs, hidden)
        if op == "delete":
            message_id = fmt.validate_id(payload.get("id"))
            left = self.store.remove(queue, message_id)
            if left is None:
                raise NotFound(f"message {message_id} not found in queue {queue!r}")
            if queue in self.indexes:
                self.indexes[queue].discard(message_id)
            dirs.update({left, self.store.folder("remove")})
            return {"id": message_id}
        if op == "queue_get":
            if not self.store.queue_exists(queue):
                raise NotFound(f"queue {queue!r} does not exist")
            return {"queue": queue}
        if op == "queue_put":
            return {"queue": queue, "created": self.store.create_queue(queue)}
        if op == "queue_delete":
            self.indexes.pop(queue, None)
            return {"queue": queue, "in_flight": self.store.delete_queue(queue)}
        raise Invalid(f"fetch actor cannot {op!r}")

    def fetch(self, queue: str, dirs: set, hidden: list) -> dict:
        """Hide the oldest ready message for --timeout seconds and return it."""
        index = self.ready_index(queue)
        due = time.time() + self.options.timeout
        while True:
            message_id = index.take(self.options.peers)
            if message_id is None:
                if not self.store.queue_exists(queue):
                    self.indexes.pop(queue, None)
                    raise NotFound(f"queue {queue!r} does not exist")
                return {"empty": True}
            data = self.store.claim(queue, message_id, due)
            if data is None:
                continue  # Removed, or taken by a peer: try the next one.
            try:
                message = fmt.decode_message(queue, message_id, data)
            except (ValueError, KeyError) as err:
                self.log.error("fetch.corrupt", queue=queue, id=message_id, error=str(err))
                self.store.remove(queue, message_id)
                dirs.add(self.store.folder("remove"))
                continue
            dirs.update({self.store.queue_dir(queue), self.store.folder("delay")})
            hidden.append((queue, message_id, due))
            return {"id": message_id, "body": message.body, "content_type": message.content_type,
                    "due": due}
