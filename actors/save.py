"""SaveActor: writes messages into new/, flushes once per batch, delivers them by rename."""

import time

from mq import store as fmt
from mq.actors.base import Actor
from mq.errors import Invalid, MqError, TooLarge, Unavailable
from mq.ids import new_id


class SaveActor(Actor):
    """Durably adds messages; no reply goes out before its own message is on stable media."""

    kind = "save"

    def start(self) -> None:
        """Connect to the mover, which times delayed messages."""
        self.mover = self.connect_mover()

    def prepare(self, payload: dict) -> tuple[str, str, bytes, float | None]:
        """Validate an add request; return (queue, id, file bytes, due time or None)."""
        if payload.get("op") != "add":
            raise Invalid(f"save actor cannot {payload.get('op')!r}")
        queue = fmt.validate_queue(payload.get("queue"))
        body = payload.get("body")
        if not isinstance(body, bytes):
            raise Invalid("message body must be bytes")
        if len(body) > self.options.max_body_bytes:
            raise TooLarge(f"body of {len(body)} bytes is over the limit of "
                           f"{self.options.max_body_bytes} bytes")
        content_type = payload.get("content_type") or fmt.DEFAULT_CONTENT_TYPE
        due = payload.get("due")
        now = time.time()
        message_id = new_id(int(now * 1000))
        data = fmt.encode_message(body, content_type, int(now * 1000))
        return queue, message_id, data, (due if due and due > now else None)

    def handle_batch(self, requests):
        """Write every message, flush once, rename each into place, flush once, reply."""
        results: list = [None] * len(requests)
        written = []  # (position, queue, id, due)
        for pos, (_, _, payload) in enumerate(requests):
            try:
                queue, message_id, data, due = self.prepare(payload)
                self.store.write_new(queue, message_id, data, due)
                written.append((pos, queue, message_id, due))
            except MqError as err:
                results[pos] = err
        if not written:
            return results
        try:
            self.store.flush_data()
        except OSError as err:
            self._fail(written, results, fmt.unavailable(err, "cannot flush messages"))
            return results
        dirs = {self.store.folder("new")}
        delivered = []
        for pos, queue, message_id, due in written:
            try:
                dirs.add(self.store.deliver_new(queue, message_id, due is not None))
                delivered.append((pos, queue, message_id, due))
            except MqError as err:
                results[pos] = err
            except OSError as err:
                self.store.discard_new(self.store.new_path(queue, message_id))
                results[pos] = fmt.unavailable(err, "cannot deliver message")
        try:
            self.store.flush(dirs)
        except OSError as err:
            error = fmt.unavailable(err, "cannot flush message folders")
            for pos, queue, message_id, _ in delivered:
                # Not acknowledged, so not kept: the client will retry.
                self.store.remove(queue, message_id)
                results[pos] = error
            self.log.error("save.flush_failed", error=str(err), count=len(delivered))
            return results
        for pos, queue, message_id, due in delivered:
            results[pos] = {"id": message_id, "queue": queue, "due": due}
        self.tell_mover([(q, i, due) for _, q, i, due in delivered if due is not None])
        return results

    def _fail(self, written, results, error: Unavailable) -> None:
        for pos, queue, message_id, _ in written:
            self.store.discard_new(self.store.new_path(queue, message_id))
            results[pos] = error
        self.log.error("save.flush_failed", error=error.message, count=len(written))
