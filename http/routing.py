"""Routing by a pattern of queue names, for QueueService (http/service.py), which the HTTP
routes and MessagePack-RPC call: which queues match, and pull-any across fetch actors (one
fetch from the matching queue whose ready message is oldest). The pattern and its checks are
the ops' (mq.operations.patterns).
"""

import asyncio
import functools
import time
from collections.abc import Callable
from typing import cast

from mq.errors import MqError, NotFound
from mq.http import access
from mq.http.actor_links import ActorLink
from mq.http.disk_errors import disk_error
from mq.operations import MAX_QUEUES, FetchAny, Fetched, Watch
from mq.operations.patterns import compile_pattern
from mq.store import Store
from mq.tokens import Token

#: Seconds between checks that the client of a waiting pull-any is still there.
CLIENT_CHECK_SECONDS = 0.5


@functools.cache
def _store(root: str) -> Store:
    return Store(root)


def matching_queues(root: str, pattern, token: Token | None = None) -> list[str]:
    """The existing queues whose whole name matches the pattern and the token may use, in name
    order; NotFound when there is none (a queue the token may not use is not revealed)."""
    regex = compile_pattern(pattern)
    try:
        names = _store(root).queues.list_queues()
    except OSError as err:
        raise disk_error(err, "cannot list the queues", root) from None
    queues = access.allowed(token, [queue for queue in names if regex.fullmatch(queue)])
    if not queues:
        raise NotFound(f"no queue matches {pattern!r}")
    return queues


#: The queues of one fetch actor that one fetch_any or watch names, and that actor's link.
Group = tuple[ActorLink, list[str]]


def grouped(queues: list[str], owner: Callable[[str], ActorLink]) -> list[Group]:
    """The queues by the fetch actor that owns them, at most MAX_QUEUES to a group (a field
    limit of fetch_any and watch: an owner of more gets a group of each MAX_QUEUES)."""
    by_owner: dict[ActorLink, list[str]] = {}
    for queue in queues:
        by_owner.setdefault(owner(queue), []).append(queue)
    return [(link, names[start:start + MAX_QUEUES]) for link, names in by_owner.items()
            for start in range(0, len(names), MAX_QUEUES)]


async def pull_any(groups: list[Group], wait: float,
                   gone: Callable[[], bool] = lambda: False) -> Fetched | None:
    """Claim the oldest ready message among the queues, grouped by the fetch actor that owns
    them (QueueService.reaching found them, grouped()), waiting up to `wait` seconds for
    one; None when none came (or the client, asked through gone(), went away).

    The result is the fetch result with "queue" added. Nothing is claimed once gone() is true:
    the waiting itself claims nothing (docs/DELIVERY.md, "Pull-any").
    """
    deadline = time.monotonic() + wait
    while not gone():
        result = await claim_oldest(groups, gone)
        if result is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        await watch_any(groups, remaining, gone)
    return None


def _raise_if_all_failed(results: list) -> None:
    """Raise the first error when every actor asked failed (a bug is raised at once)."""
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, MqError):
            raise result
    if results and all(isinstance(r, MqError) for r in results):
        raise results[0]


async def claim_oldest(groups: list[Group], gone: Callable[[], bool]) -> Fetched | None:
    """Claim the oldest ready message of the groups' queues, or None when all are empty.

    With several groups (queues on several fetch actors), each names its oldest head first
    (claiming nothing), then the one with the oldest head claims; if it lost that message
    meanwhile, the next. An actor that is down is passed over while another can serve.
    """
    if len(groups) == 1:
        candidates = groups
    else:
        heads = await asyncio.gather(*(link.call(FetchAny(queues=queues, claim=False))
                                       for link, queues in groups), return_exceptions=True)
        _raise_if_all_failed(heads)
        found = sorted((head["id"], pos) for pos, head in enumerate(heads)
                       if isinstance(head, dict) and not head.get("empty"))
        candidates = [groups[pos] for _, pos in found]
    for link, queues in candidates:
        if gone():
            return None
        result = cast(Fetched, await link.call(FetchAny(queues=queues, claim=True)))
        if not result.get("empty"):
            return result
    return None


async def _until_gone(gone: Callable[[], bool]) -> None:
    while not gone():
        await asyncio.sleep(CLIENT_CHECK_SECONDS)


async def watch_any(groups: list[Group], seconds: float, gone: Callable[[], bool]) -> None:
    """Wait, claiming nothing, until one of the queues has a ready message, `seconds` pass, or
    the client goes away; then withdraw the watches still parked on other actors. A watch that
    failed (its actor is down) ends the wait only when every one failed."""
    sent: dict[int, bytes] = {}
    watches = {pos: asyncio.ensure_future(link.call(
        Watch(queues=queues, wait=seconds), timeout=seconds + link.timeout,
        on_sent=lambda rid, pos=pos: sent.__setitem__(pos, rid)))
        for pos, (link, queues) in enumerate(groups)}
    checker = asyncio.ensure_future(_until_gone(gone))
    pending = set(watches.values()) | {checker}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            answered = [w for w in done if w is not checker and w.exception() is None]
            if checker in done or answered or all(w.done() for w in watches.values()):
                break
    finally:
        checker.cancel()
        for pos, watch in watches.items():
            if not watch.done() and pos in sent:
                groups[pos][0].cancel(sent[pos])
        results = await asyncio.gather(*watches.values(), return_exceptions=True)
    _raise_if_all_failed(results)
