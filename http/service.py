"""QueueService: the one way every front end (the HTTP routes, MessagePack-RPC, the SQS API,
the statistics) reaches the actors. Its methods are the operations; each one checks the
caller's token on every queue the operation touches (http/access.py), applies the front's
limits, picks the actor that serves it, and returns the actor's answer. A front end only
translates its wire format to and from these calls (docs/ARCHITECTURE.md, "The front").

Only this module and the actor-side helpers it uses (routing.py) hold the actor pool; an
import-linter contract keeps the front ends off http/actor_links.py (tests/project/test_layers.py).
"""

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable
from typing import cast, overload

from mq import logs
from mq.config import Options
from mq.errors import Invalid
from mq.http import access, routing
from mq.http.actor_links import ActorLink, ActorPool
from mq.http.clients import Clients
from mq.http.figures import merge
from mq.operations import (
    MAX_FANOUT_QUEUES,
    Ack,
    AckBatch,
    Add,
    AddBatch,
    Added,
    AddFanout,
    Delete,
    Extend,
    Fetch,
    FetchAny,
    FetchBatch,
    Fetched,
    Nack,
    OnQueue,
    Operation,
    Peek,
    PropsGet,
    PropsPatch,
    PropsPut,
    QueueGet,
    Redrive,
    RulesDelete,
    RulesGet,
    RulesPut,
    Stats,
    Watch,
    check_wait,
)
from mq.store import Store
from mq.store.gone_queues import GoneQueues
from mq.tokens import Token

READ, WRITE, ADMIN = "read", "write", "admin"

#: The scope each operation needs; one not named here needs admin (queue, properties and
#: rules changes, purge, redrive). The HTTP routes and the RPC methods are checked on these
#: alone; an SQS operation also asks its own scope first (http/sqs/authorization.py's SCOPES),
#: at least that of each op it runs.
SCOPES: dict[type[Operation], str] = {
    Add: WRITE, AddBatch: WRITE, AddFanout: WRITE,
    Fetch: WRITE, FetchBatch: WRITE, FetchAny: WRITE, Watch: WRITE,
    Ack: WRITE, AckBatch: WRITE, Nack: WRITE, Extend: WRITE, Delete: WRITE,
    QueueGet: READ, Peek: READ, PropsGet: READ, RulesGet: READ, Stats: READ,
}
#: Operations about every queue: a token limited to some queues may not use them.
EVERY_QUEUE = (RulesGet, RulesPut, RulesDelete, Stats)


def touched(request: Operation) -> list[str] | None:
    """The queues an operation touches, for its access check; None: every queue."""
    if isinstance(request, EVERY_QUEUE):
        return None
    if isinstance(request, (AddFanout, FetchAny, Watch)):
        return list(request.queues)
    if isinstance(request, Redrive):
        return [request.queue] + ([request.source] if request.source else [])
    if isinstance(request, (PropsPut, PropsPatch)):
        # Its dead-letter queue will be written by the actors and read by a redrive.
        return [request.queue, *access.named_queues(request.properties)]
    if isinstance(request, OnQueue):
        return [request.queue]
    raise TypeError(f"{request.op}: no rule says which queues it touches")


def check(token: Token | None, request: Operation) -> None:
    """Forbidden unless the token may run this operation on every queue it touches."""
    if token is not None:
        access.check(token, SCOPES.get(type(request), ADMIN), touched(request))


class QueueService:
    """The operations of the daemon as every front end calls them."""

    def __init__(self, pool: ActorPool, options: Options):
        self._pool = pool
        self.root = options.root
        self.actor_timeout = options.actor_timeout
        #: The front drains: no request waits any longer (a long poll is answered as empty).
        self.draining = False
        #: The front ends that keep per-queue tables (keep), and the sweep that forgets the
        #: queues gone from them (the front calls it: mq.store.gone_queues).
        self._keepers: list = []
        store = Store(options.root, "file")
        self.gone = GoneQueues(store.queues.list_queues, store.queues.queue_exists, self.queue_tables,
                               self.forget_queues, logs.get())
        #: The clients that fetched from each queue lately (the statistics' `clients`).
        self.clients = Clients()
        self.keep(self.clients)

    def drain(self) -> None:
        """Answer every long poll and pull-any now, as their time being up would, and let no
        later one wait (the front drains before it exits: docs/OPERATIONS.md, "Signals")."""
        self.draining = True
        for link in self._pool.fetchers:
            link.end_waits()

    def keep(self, keeper) -> None:
        """Have a front end's per-queue tables (its queue_tables(), name -> queues) released
        by its forget_queues(gone) once their queues are gone, and shown in the statistics."""
        self._keepers.append(keeper)

    def queue_tables(self) -> dict:
        """Every per-queue table of this front's front ends, by name."""
        return {name: queues for keeper in self._keepers
                for name, queues in keeper.queue_tables().items()}

    def forget_queues(self, gone: set[str]) -> None:
        """Drop from every front end what it keeps about queues that are gone."""
        for keeper in self._keepers:
            keeper.forget_queues(gone)

    # Adds: to the save actor with room (ActorPool.saver), which refuses when overloaded.

    def add(self, token: Token | None, request: Add) -> Awaitable[Added]:
        """Add one message (its Added answer); a plain function returning the awaitable, so
        the hot path pays no coroutine of its own."""
        if token is not None:
            access.check(token, WRITE, (request.queue,))
        return cast(Awaitable[Added], self._pool.saver().call(request))

    def add_batch(self, token: Token | None, request: AddBatch) -> Awaitable[dict]:
        """Add every message of a batch, all or none (its messages' ids in order)."""
        check(token, request)
        return self._pool.saver().call(request, weight=len(request.messages))

    async def fan_out(self, token: Token | None, pattern, body: bytes, content_type: str | None,
                      due: float | None, attributes: dict | None = None) -> list[dict]:
        """Add the message to every existing queue the pattern matches and the token may use,
        durably and together (one save actor's batch and flush); each copy's queue and id.
        NotFound when no queue matches."""
        queues = self.reached(token, pattern)
        if len(queues) > MAX_FANOUT_QUEUES:
            raise Invalid(f"{len(queues)} queues match {pattern!r}; a fan-out may add to at most "
                          f"{MAX_FANOUT_QUEUES}")
        request = AddFanout(queues=queues, body=body, content_type=content_type or "", due=due,
                            attributes=attributes or None)
        return (await self._pool.saver().call(request))["messages"]

    def reached(self, token: Token | None, pattern) -> list[str]:
        """The queues a fan-out or a pull-any reaches, its access check: the write scope, then
        the existing queues the pattern matches, filtered to those the token may use (each
        tested once: a queue it may not use is, for it, one that does not exist, never a
        refusal); NotFound when none is left."""
        if token is not None:
            access.check(token, WRITE, ())
        return routing.matching_queues(self.root, pattern, token)

    # Everything naming a queue: to the queue's fetch actor.

    @overload
    def fetch(self, token: Token | None, request: Fetch,
              on_sent: Callable[[Callable[[], None]], None] | None = None,
              client: str | None = None) -> Awaitable[Fetched]: ...

    @overload
    def fetch(self, token: Token | None, request: FetchBatch,
              on_sent: Callable[[Callable[[], None]], None] | None = None,
              client: str | None = None) -> Awaitable[dict]: ...

    def fetch(self, token: Token | None, request: Fetch | FetchBatch,
              on_sent: Callable[[Callable[[], None]], None] | None = None,
              client: str | None = None) -> Awaitable[Fetched] | Awaitable[dict]:
        """Fetch (or FetchBatch): claim the oldest ready message(s), waiting up to its wait.

        on_sent(cancel) is called once a request is on its way: cancel() withdraws it (its
        client went away), and the await ends with {"empty": True, "cancelled": True}.
        client: the connection it came on, counted among the queue's clients once allowed.
        """
        check(token, request)
        if client is not None:
            self.clients.seen(request.queue, client)
        if self.draining and request.wait:
            request = dataclasses.replace(request, wait=0.0)
        link = self._pool.fetcher(request.queue)
        sent = None if on_sent is None else (
            lambda rid: on_sent(functools.partial(link.cancel, rid)))
        return link.call(request, timeout=request.wait + link.timeout, on_sent=sent)

    fetch_batch = fetch

    def call(self, token: Token | None, request: Operation) -> Awaitable[dict]:
        """Any other operation on one queue (ack, ack_batch, nack, extend, delete, peek, purge,
        queue_get/put/delete, props_*, redrive) or on the rules, sent to the fetch actor that
        owns it; the actor's answer."""
        check(token, request)
        queue = getattr(request, "queue", None)
        link = self._pool.fetchers[0] if queue is None else self._pool.fetcher(queue)
        return link.call(request)

    # The operations that need no more than their routing and check.
    ack = ack_batch = nack = extend = delete = peek = purge = properties = rules = call

    async def redrive(self, token: Token | None, queue: str, source: str | None = None) -> dict:
        """Move the dead letters of `source` (default: the queue's dead-letter queue) back into
        the queue; how many moved. The actor is told the very queue checked, so a property
        changed meanwhile moves nothing unchecked."""
        if source is None:
            props = await self.call(token, PropsGet(queue=queue))
            source = props["effective"]["dead_letter_queue"]
        return await self.call(token, Redrive(queue=queue, source=source))

    async def queue_info(self, token: Token | None, queue: str, hidden: bool = False) -> dict:
        """The queue's effective properties and counts; NotFound."""
        return await self.call(token, QueueGet(queue=queue, hidden=hidden))

    async def pull_any(self, token: Token | None, pattern, wait: float,
                       gone: Callable[[], bool] = lambda: False) -> Fetched | None:
        """Claim the oldest ready message among the matching queues the token may use, waiting
        up to `wait` seconds; None when none came (or gone() turned true). The fetch result,
        with "queue" added; NotFound when no queue matches (docs/DELIVERY.md, "Pull-any")."""
        check_wait(wait)
        queues = self.reached(token, pattern)
        groups = routing.grouped(queues, self._pool.fetcher)
        if self.draining:
            wait = 0.0

        def ended() -> bool:
            # A drain that begins meanwhile ends the wait, as the client going away would.
            return gone() or (wait > 0 and self.draining)

        return await routing.pull_any(groups, wait, ended)

    # Statistics: every actor at once.

    def _links(self) -> list[tuple[str, ActorLink]]:
        pool = self._pool
        return ([(f"save-{i}", link) for i, link in enumerate(pool.savers)]
                + [(f"fetch-{i}", link) for i, link in enumerate(pool.fetchers)]
                + [("mover-0", pool.mover)])

    async def stats(self, token: Token | None) -> dict:
        """Every actor's statistics, asked concurrently and merged per queue (http/figures.py)."""
        check(token, Stats())
        links = self._links()
        answers = await asyncio.gather(*(link.call(Stats()) for _, link in links),
                                       return_exceptions=True)
        figures = merge([name for name, _ in links], answers, time.time())
        for queue, clients in self.clients.counts().items():
            if queue in figures["queues"]:
                figures["queues"][queue]["clients"] = clients
        figures["tables"][f"front-{self._pool.front}"] = self.gone.sizes()
        return figures

    def unreachable(self) -> list[str]:
        """The actors (process names) the front has no connection to right now."""
        return [name for name, link in self._links() if not link.connected]
