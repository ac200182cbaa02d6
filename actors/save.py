"""SaveActor: writes messages into new/, flushes once per batch, delivers them by rename."""

import os
import time

from mq import properties
from mq import store as fmt
from mq.actors.base import Actor
from mq.errors import Invalid, MqError, NotFound, TooLarge, Unavailable
from mq.ids import new_id


class SaveActor(Actor):
    """Durably adds messages; no reply goes out before its own message is on stable media."""

    kind = "save"

    def start(self) -> None:
        """Connect to the mover, which times delayed messages."""
        self.mover = self.connect_mover()
        self.props = properties.PropertyFiles(self.store, {"max_body_bytes": self.options.max_body_bytes})

    def prepare(self, payload: dict, now: float) -> dict:
        """Validate an add request; return what to write, or a duplicate's earlier id."""
        if payload.get("op") != "add":
            raise Invalid(f"save actor cannot {payload.get('op')!r}")
        queue = fmt.validate_queue(payload.get("queue"))
        body = payload.get("body")
        if not isinstance(body, bytes):
            raise Invalid("message body must be bytes")
        props = self.props.effective(queue)
        limit = min(props["max_body_bytes"], self.options.max_body_bytes)
        if len(body) > limit:
            raise TooLarge(f"body of {len(body)} bytes is over the limit of {limit} bytes")
        if not self.store.auto_create and not self.store.queue_exists(queue):
            raise NotFound(f"queue {queue!r} does not exist (auto-create is off)")
        dedup = payload.get("dedup_id") or ""
        if dedup:
            earlier = self.store.dedup_lookup(queue, dedup, props["dedup_window"], now)
            if earlier:
                return {"queue": queue, "id": earlier, "duplicate": True}
        due = payload.get("due")
        if due is None and props["delay"] > 0:
            due = now + props["delay"]
        message_id = new_id(int(now * 1000))
        content_type = payload.get("content_type") or fmt.DEFAULT_CONTENT_TYPE
        return {"queue": queue, "id": message_id, "dedup": dedup, "window": props["dedup_window"],
                "due": due if due and due > now else None,
                "data": fmt.encode_message(body, content_type, int(now * 1000), message_id, dedup)}

    def handle_batch(self, requests):
        """Write every message, flush once, record keys, rename each into place, flush, reply."""
        results: list = [None] * len(requests)
        written = []  # (position, queue, id, due)
        now = time.time()
        keyed = []
        for pos, (_, _, payload) in enumerate(requests):
            try:
                item = self.prepare(payload, now)
                if item.get("duplicate"):
                    results[pos] = {"id": item["id"], "queue": item["queue"], "duplicate": True}
                    continue
                self.store.write_new(item["queue"], item["id"], item["data"], item["due"])
                written.append((pos, item["queue"], item["id"], item["due"]))
                if item["dedup"]:
                    keyed.append((pos, item))
            except MqError as err:
                results[pos] = err
                if isinstance(err, Unavailable):
                    self.log.error("save.write_failed", queue=payload.get("queue"), error=err.message)
        if not written:
            return results
        try:
            self.store.flush_data()
        except OSError as err:
            self._fail(written, results, fmt.unavailable(err, "cannot flush messages"))
            return results
        dirs = {self.store.folder("new")}
        written = self.record_keys(written, keyed, results, dirs, now)
        keys = {pos: item["dedup"] for pos, item in keyed}
        delivered = []
        for pos, queue, message_id, due in written:
            try:
                dirs.add(self.store.deliver_new(queue, message_id, due is not None))
                delivered.append((pos, queue, message_id, due))
            except MqError as err:
                results[pos] = err
                self.forget_key(keys, pos, queue, message_id)
            except OSError as err:
                self.store.discard_new(self.store.new_path(queue, message_id))
                results[pos] = fmt.unavailable(err, "cannot deliver message")
                self.log.error("save.deliver_failed", queue=queue, id=message_id, error=str(err))
                self.forget_key(keys, pos, queue, message_id)
        try:
            self.store.flush(dirs)
        except OSError as err:
            error = fmt.unavailable(err, "cannot flush message folders")
            for pos, queue, message_id, _ in delivered:
                # Not acknowledged, so not kept: the client will retry.
                self.store.remove(queue, message_id)
                self.forget_key(keys, pos, queue, message_id)
                results[pos] = error
            self.log.error("save.flush_failed", error=str(err), count=len(delivered))
            return results
        for pos, queue, message_id, due in delivered:
            results[pos] = {"id": message_id, "queue": queue, "due": due}
        self.tell_mover([(q, i, 0, due) for _, q, i, due in delivered if due is not None])
        return results

    def record_keys(self, written, keyed, results, dirs, now) -> list:
        """Record de-duplication keys (after the data is durable, before delivery).

        An add that loses the race for its key, to another worker, daemon or request in this
        batch, discards its file and answers the winner's id.
        """
        losers = set()
        for pos, item in keyed:
            try:
                earlier = self.store.dedup_record(item["queue"], item["dedup"], item["id"],
                                                  item["window"], now)
            except (OSError, MqError) as err:
                earlier, results[pos] = None, err if isinstance(err, MqError) else \
                    fmt.unavailable(err, "cannot record de-duplication key")
                losers.add(pos)
            if earlier:
                results[pos] = {"id": earlier, "queue": item["queue"], "duplicate": True}
                losers.add(pos)
            dirs.add(os.path.dirname(self.store.dedup_path(item["queue"], item["dedup"])))
        for pos, queue, message_id, _ in written:
            if pos in losers:
                self.store.discard_new(self.store.new_path(queue, message_id))
        return [w for w in written if w[0] not in losers]

    def forget_key(self, keys: dict, pos: int, queue: str, message_id: str) -> None:
        """Drop the key an unacknowledged add recorded, so the client's retry is stored."""
        if keys.get(pos):
            self.store.dedup_forget(queue, fmt.dedup_digest(keys[pos]), message_id)

    def _fail(self, written, results, error: Unavailable) -> None:
        for pos, queue, message_id, _ in written:
            self.store.discard_new(self.store.new_path(queue, message_id))
            results[pos] = error
        self.log.error("save.flush_failed", error=error.message, count=len(written))
