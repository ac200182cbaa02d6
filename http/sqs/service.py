"""SqsService: what every SQS operation uses: the front's queue service (http/service.py, the
same operations and access checks as mq's own routes), a read-only view of the root for
listings, and the calls every operation makes, as the caller's token (acting)."""

import copy

from mq import properties
from mq.config import Options
from mq.errors import MqError, NotFound
from mq.http.service import QueueService
from mq.http.sqs.errors import from_mq, queue_missing
from mq.operations import Operation, PropsGet, PropsPatch, QueueGet
from mq.store import Store
from mq.tokens import Token


class SqsService:
    """The daemon as the SQS operations see it."""

    def __init__(self, queues: QueueService, options: Options):
        #: The operations, each checked against `token` (None: access control is off).
        self.queues = queues
        self.token: Token | None = None
        self.options = options
        # Only read: listing queues and their properties, for ListQueues and the sources of a
        # dead-letter queue. Every change goes through the actors.
        self.store = Store(options.root)
        self.props = properties.PropertyFiles(
            self.store, {"timeout": options.timeout, "max_body_bytes": options.max_body_bytes})
        self.tasks: dict[str, dict] = {}  # dead-letter queue -> its last message move task
        self.purges: dict[str, float] = {}  # queue -> monotonic time of its last purge
        self.deleted: dict[str, float] = {}  # queue -> monotonic time of its DeleteQueue
        queues.keep(self)  # Kept for a minute by design, `deleted` is not forgotten with its queue.

    def queue_tables(self) -> dict:
        """The queues whose properties are cached, that have a move task, purged lately."""
        return {"sqs_properties": self.props.queues(), "sqs_move_tasks": set(self.tasks),
                "sqs_purges": set(self.purges)}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop what is kept about queues that are gone (in place: every request's copy of
        this service shares the tables)."""
        for queue in gone:
            self.props.forget(queue)
            self.tasks.pop(queue, None)
            self.purges.pop(queue, None)

    def acting(self, token: Token | None) -> "SqsService":
        """This service for one request, whose every call is checked against its token; the
        state (move tasks, purge and delete times) stays shared."""
        bound = copy.copy(self)
        bound.token = token
        return bound

    async def call(self, request: Operation) -> dict:
        """An op (mq.operations) naming a queue, through the queue service as this request's
        token; a missing queue is QueueDoesNotExist."""
        try:
            return await self.queues.run(self.token, request)
        except NotFound:
            raise queue_missing() from None
        except MqError as err:
            raise from_mq(err) from None

    async def queue(self, queue: str, hidden: bool = False) -> dict:
        """queue_get: the queue's effective properties and counts; QueueDoesNotExist.

        `max_body_bytes` is the limit the daemon applies: never above --max-body-bytes.
        """
        info = await self.call(QueueGet(queue=queue, hidden=hidden))
        props = info["properties"]
        props["max_body_bytes"] = min(props["max_body_bytes"], self.options.max_body_bytes)
        return info

    async def fifo_or_none(self, queue: str) -> bool | None:
        """Whether a queue is FIFO; None when it does not exist."""
        try:
            info = await self.queue(queue)
        except Exception:  # QueueDoesNotExist or an unreachable actor: not a usable target.
            return None
        return bool(info["properties"].get("fifo"))

    async def patch(self, queue: str, props: dict) -> dict:
        """Merge properties into the queue's own."""
        return await self.call(PropsPatch(queue=queue, properties=props))

    async def own(self, queue: str) -> dict:
        """The queue's own properties."""
        return (await self.call(PropsGet(queue=queue)))["own"]

    def queue_names(self) -> list[str]:
        """Every queue of the root, sorted."""
        return self.store.queues.list_queues()
