"""QueueService: the one way every front end (the HTTP routes, MessagePack-RPC, the SQS API,
the statistics) reaches the actors. `run` runs any op (mq.operations) from what its class
declares: it checks the caller's token on the op's scope and every queue it touches
(http/access.py), applies the front's limits, picks the actor that serves it, and returns the
actor's answer; an op whose queues a pattern names (a fan-out, a pull-any) is run on the queues
it reaches. A front end only translates its wire format to and from these calls
(docs/ARCHITECTURE.md, "The front").

Only this module and the actor-side helpers it uses (routing.py) hold the actor pool; an
import-linter contract keeps the front ends off http/actor_links.py (tests/project/test_layers.py).
"""

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from mq import logs
from mq.config import Options
from mq.http import access, routing
from mq.http.actor_links import ActorLink, ActorPool
from mq.http.clients import Clients
from mq.http.figures import merge, summed
from mq.operations import Fetched, Operation, Stats
from mq.operations.fields import ANY, EVERY, FETCH, SAVE
from mq.store import Store
from mq.store.gone_queues import GoneQueues, heap_blocks
from mq.tokens import Token

#: An op's reply type.
R = TypeVar("R")
#: Seconds the merged statistics of every actor serve the pages of GET /_mq/queues and the
#: history's samples (QueueService.recent_stats) before the next request gathers them again.
STATS_AGE_S = 2.0


def _waiting_call(link: ActorLink, request: Operation,
                  on_sent: Callable[[Callable[[], None]], None] | None) -> Awaitable[dict]:
    """Send an op that may wait (a long poll): it may take its wait plus the actor's timeout,
    and a parked one counts in no actor's load (its actor is not behind for it)."""
    wait: float = getattr(request, "wait", 0.0)
    sent = None if on_sent is None else (
        lambda rid: on_sent(functools.partial(link.cancel, rid)))
    return link.call(request, timeout=wait + link.timeout, on_sent=sent,
                     weight=0 if wait else 1)


def check(token: Token | None, request: Operation) -> None:
    """Forbidden unless the token has the op's scope and may use every queue it touches (its
    queue-typed fields; none: every queue, which needs a token limited to none). The HTTP
    routes and the RPC methods are checked on this alone; an SQS operation also asks its own
    scope first (http/sqs/authorization.py's SCOPES), at least that of each op it runs."""
    if token is not None:
        access.check(token, request.scope, request.touched())


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
        #: The last gather of recent_stats (its figures and their sums, or the one still under way).
        self._recent: asyncio.Future | None = None
        self._recent_at = 0.0

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

    def run(self, token: Token | None, request: Operation[R],
            on_sent: Callable[[Callable[[], None]], None] | None = None,
            client: str | None = None, gone: Callable[[], bool] = lambda: False) -> Awaitable[R]:
        """Run any op the front sends (mq.operations): check it (check()), send it to the
        actor its class names (a save op to the save actor with room, ActorPool.saver, which
        refuses when overloaded; a fetch op to the fetch actor of its queue, fetch actor 0
        when it names none; the statistics to every actor, their answers merged; an op with
        a pattern, FRONT or ANY, over the queues it reaches: reaching()) and return the
        awaitable of its reply. A plain function, so the hot path pays no coroutine of its own.

        An op with a `wait` (a long poll) waits that long plus --actor-timeout, none once the
        front drains; on_sent(cancel) is called once it is on its way: cancel() withdraws it
        (its client went away), and the await ends with {"empty": True, "cancelled": True};
        a pull-any asks gone() instead, and claims nothing once it is true.
        client: the connection a fetch came on, counted among its queue's clients once allowed.
        """
        if token is not None:
            check(token, request)
        if request.reaches is not None:
            return cast(Awaitable[R], self.reaching(token, request, gone))
        if request.actor == SAVE:
            return cast(Awaitable[R], self._pool.saver().call(request, weight=request.weight()))
        if request.actor == EVERY:
            return cast(Awaitable[R], self._every(request))
        if request.actor != FETCH:
            raise TypeError(f"{request.op}: the front does not send it")
        queue = getattr(request, "queue", None)
        if client is not None and queue is not None:
            self.clients.seen(queue, client)
        link = self._pool.fetchers[0] if queue is None else self._pool.fetcher(queue)
        taker = link
        if queue is not None and request.spread and getattr(request, "receipt", True):
            # A busy fetch actor hands the op to the next (ActorPool.taker); an ack without a
            # receipt stays with the queue's own, as every other op does.
            taker = self._pool.taker(queue)
        if "wait" not in request.names:
            return cast(Awaitable[R], taker.call(request))
        if self.draining and getattr(request, "wait", 0) > 0:
            request = dataclasses.replace(request, wait=0.0)  # type: ignore[type-var]
        if taker is not link:
            return cast(Awaitable[R], self._spread(taker, link, cast(str, queue), request, on_sent))
        return cast(Awaitable[R], _waiting_call(link, request, on_sent))

    async def _spread(self, taker: ActorLink, owner: ActorLink, queue: str, request: Operation,
                      on_sent: Callable[[Callable[[], None]], None] | None) -> dict:
        """A fetch sent to another fetch actor than its queue's own (ActorPool.taker); one
        that answers that the queue is served by its own alone (a fifo queue) sends it there,
        and so do this front's later fetches of that queue."""
        result = await _waiting_call(taker, request, on_sent)
        if result.get("owner_only"):
            self._pool.owner_only(queue)
            result = await _waiting_call(owner, request, on_sent)
        return result

    async def reaching(self, token: Token | None, request: Operation,
                       gone: Callable[[], bool]) -> Any:
        """Run an op whose queues its pattern names (a fan-out, a pull-any; only its scope
        was checked): its fields checked as an actor checks its op, then on the existing
        queues the pattern matches that the token may use, each tested once (a queue it may
        not use is, for it, one that does not exist, never a refusal; NotFound when none is
        left, so their op is not checked again): ANY on their fetch actors together, FRONT as
        the op its over(queues) makes."""
        request = type(request).from_payload(request.to_payload())
        queues = routing.matching_queues(self.root, getattr(request, cast(str, request.reaches)),
                                         token)
        if request.actor == ANY:
            return await self._any(queues, getattr(request, "wait", 0.0), gone)
        return await self.run(None, request.over(queues))  # FRONT (operation() allows no other)

    async def _any(self, queues: list[str], wait: float, gone: Callable[[], bool]) -> Fetched:
        """Claim the oldest ready message among the queues, waiting up to `wait` seconds:
        the fetch result with "queue" added, or {"empty": True} when none came (or gone()
        turned true) (docs/DELIVERY.md, "Pull-any")."""
        groups = routing.grouped(queues, self._pool.fetcher)
        if self.draining:
            wait = 0.0

        def ended() -> bool:
            # A drain that begins meanwhile ends the wait, as the client going away would.
            return gone() or (wait > 0 and self.draining)

        result = await routing.pull_any(groups, wait, ended)
        return {"empty": True} if result is None else result

    # Statistics: every actor at once.

    def _links(self) -> list[tuple[str, ActorLink]]:
        pool = self._pool
        return ([(f"save-{i}", link) for i, link in enumerate(pool.savers)]
                + [(f"fetch-{i}", link) for i, link in enumerate(pool.fetchers)]
                + [("mover-0", pool.mover)])

    async def _every(self, request: Operation) -> dict:
        """Every actor's statistics, asked concurrently and merged per queue (http/figures.py)."""
        links = self._links()
        answers = await asyncio.gather(*(link.call(request) for _, link in links),
                                       return_exceptions=True)
        figures = merge([name for name, _ in links], answers, time.time())
        for queue, clients in self.clients.counts().items():
            if queue in figures["queues"]:
                figures["queues"][queue]["clients"] = clients
        figures["tables"][f"front-{self._pool.front}"] = self.gone.sizes()
        if isinstance(request, Stats) and request.heap:
            figures["heap_blocks"][f"front-{self._pool.front}"] = heap_blocks()
        return figures

    def recent_stats(self, token: Token | None) -> Awaitable[tuple[dict, dict]]:
        """The statistics as Stats() gives them and their sums over every queue (summed()),
        shared: a gather younger than STATS_AGE_S (or one still under way) serves every caller,
        so a page of the queue list costs no gather of 10,000 queues' figures, nor their sum,
        each. Its `time` says when it was gathered; callers must not change what it holds."""
        if token is not None:
            check(token, Stats())
        now = time.monotonic()
        recent = self._recent
        if recent is None or (recent.done() and (
                now - self._recent_at >= STATS_AGE_S or recent.cancelled()
                or recent.exception() is not None)):
            recent = self._recent = asyncio.ensure_future(self._summed_stats())
            self._recent_at = now
        return asyncio.shield(recent)

    async def _summed_stats(self) -> tuple[dict, dict]:
        """Every actor's statistics and their sums, for recent_stats."""
        figures = await self._every(Stats())
        return figures, summed(figures["queues"])

    def unreachable(self) -> list[str]:
        """The actors (process names) the front has no connection to right now."""
        return [name for name, link in self._links() if not link.connected]
