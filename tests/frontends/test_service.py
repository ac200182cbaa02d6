"""The front ends reach the actors only through QueueService (http/service.py), and the service
checks the caller's token on every queue each operation touches, so no front end can leave a
queue unchecked."""

import asyncio
import dataclasses
import re
import time
import tomllib
import typing
from collections import Counter

import pytest
import tornado.httpclient
import tornado.httpserver
from repo_support import REPO, lint_imports
from support import Daemon, free_port

from mq.config import Options
from mq.errors import Forbidden
from mq.http import front, service
from mq.http.actor_links import ActorPool
from mq.operations import OPS, Acked, FanOut, PullAny, Stats
from mq.operations.admin import Properties
from mq.operations.fields import EACH_QUEUE, Queue
from mq.tokens import RANKS, Token, digest_of

#: The modules of http/ that may hold the actor pool: the service's side, and the front's
#: process, which builds the pool and hands the service to every front end.
SERVICE_SIDE = {"mq.http.actor_links", "mq.http.service", "mq.http.routing", "mq.http.front"}
#: What the service shares with the front ends: the access check, the merging of statistics,
#: the answer to a disk error of the front's own reads of the root.
SHARED = {"mq.http.access", "mq.http.figures", "mq.http.disk_errors", "mq.http.clients"}
#: The ops a front end sends (the others are notes between the daemon's own processes).
FRONT_OPS = [cls for cls in OPS.values()
             if cls.__module__.rpartition(".")[2] in ("admin", "fetch", "save")] + [Stats]


def contract(contract_id: str) -> dict:
    """One contract of pyproject.toml's [tool.importlinter]."""
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [found] = [c for c in settings["contracts"] if c["id"] == contract_id]
    return found


def http_modules() -> set[str]:
    """Every module of http/, by its installed name (the sqs package as one)."""
    top = {f"mq.http.{path.stem}" for path in (REPO / "http").glob("*.py")}
    return top | {"mq.http.sqs"}


def test_every_front_end_module_is_kept_off_the_actor_links():
    # A module added to http/ is a front end unless named as the service's: the contract
    # must name it, or it could reach the pool unseen.
    front_ends = contract("front-ends")
    assert set(front_ends["source_modules"]) == http_modules() - SERVICE_SIDE
    assert front_ends["forbidden_modules"] == ["mq.http.actor_links"]


def test_the_contract_sees_an_import_of_the_actor_links(tmp_path):
    # Held to the service too, the contract is broken: it does see the imports it forbids.
    front_ends = contract("front-ends")
    config = tmp_path / "service_too.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    mq\n    mq.http\n"
        "\n[importlinter:contract:service-too]\nname = service too\ntype = forbidden\n"
        "source_modules =\n" + "".join(f"    {m}\n" for m in front_ends["source_modules"])
        + "    mq.http.service\nforbidden_modules =\n    mq.http.actor_links\n"
        "allow_indirect_imports = true\n")
    result = lint_imports(str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "mq.http.service -> mq.http.actor_links" in result.stdout


def test_the_service_side_imports_no_front_end():
    # The front ends call the service; were it to import one of them (the statistics route,
    # say), a front end could not change without the service.
    below = contract("service-below-front-ends")
    assert set(below["source_modules"]) == SERVICE_SIDE - {"mq.http.front"}
    assert set(below["forbidden_modules"]) == http_modules() - SERVICE_SIDE - SHARED | {
        "mq.http.front"}


def sample(cls) -> tuple[object, list[str]]:
    """An instance of the op with every field typed as a queue (a name, a list of names, the
    properties naming a dead-letter queue) given distinct names; the names."""
    values, queues = {}, []
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if hint in (Queue, Queue | None):
            values[field.name] = f"q-{field.name}"
            queues.append(values[field.name])
        elif EACH_QUEUE in typing.get_args(hint):
            values[field.name] = [f"q-{field.name}-1", f"q-{field.name}-2"]
            queues += values[field.name]
        elif hint == Properties:  # Its dead-letter queue is written and read too.
            values[field.name] = {"dead_letter_queue": "q-dead"}
            queues.append("q-dead")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            values[field.name] = {"body": b"x", "id": "0" * 16}.get(field.name, [])
    return cls(**values), queues


def token(queues: str, scope: str = "admin") -> Token:
    """A token of the scope for the queues whose whole name matches the regex."""
    return Token(name="t", digest=b"", rank=RANKS[scope], queues=re.compile(queues))


@pytest.mark.parametrize("cls", FRONT_OPS, ids=lambda cls: cls.op)
def test_each_op_is_checked_on_every_queue_it_touches(cls):
    request, queues = sample(cls)
    service.check(token(".*"), request)  # Every queue allowed: passes.
    if not queues:  # About every queue (rules, statistics): a token limited to some is refused.
        assert request.touched() is None
        with pytest.raises(Forbidden):
            service.check(token("q-.*"), request)
        return
    for queue in queues:  # Each queue it touches, refused alone, refuses the op.
        with pytest.raises(Forbidden, match=re.escape(repr(queue))):
            service.check(token(f"(?!{re.escape(queue)}$).*"), request)


@pytest.mark.parametrize("cls", FRONT_OPS, ids=lambda cls: cls.op)
def test_each_op_needs_its_scope(cls):
    request, _ = sample(cls)
    needed = cls.scope
    service.check(token(".*", needed), request)
    lower = [scope for scope, rank in RANKS.items() if rank == RANKS[needed] - 1]
    if lower:
        with pytest.raises(Forbidden, match="lacks the"):
            service.check(token(".*", lower[0]), request)


class CountingQueues:
    """A token's queue pattern that counts the queues it is asked about."""

    def __init__(self, regex: str):
        self.pattern = regex
        self.asked: Counter = Counter()

    def fullmatch(self, queue: str):
        """re.Pattern.fullmatch, counted."""
        self.asked[queue] += 1
        return re.fullmatch(self.pattern, queue)


async def connected_pool(daemon: Daemon, options: Options) -> ActorPool:
    """Links in this process to the daemon's own actors, once every one is up."""
    pool = ActorPool(options, str(daemon.run_dir()))
    deadline = time.monotonic() + 30
    while not all(link.connected for link in [*pool.savers, *pool.fetchers]):
        if time.monotonic() > deadline:
            pool.close()
            raise AssertionError("the actors' links did not connect")
        await asyncio.sleep(0.05)
    return pool


def test_a_pattern_tests_each_queue_against_the_token_once(tmp_path):
    # A fan-out and a pull-any reach only the token's queues: they are filtered once, and not
    # tested again as the op's queues (they could not be refused).
    daemon = Daemon(tmp_path / "root", tmp_path, workers=2)
    try:
        daemon.start().wait_ready()
        for queue in ("mine-a", "mine-b", "other-a"):
            assert daemon.request("PUT", f"/{queue}").status == 201
        queues = CountingQueues("mine-.*")
        writer = Token(name="w", digest=b"", rank=RANKS["write"], queues=queues)

        async def reach():
            options = Options(root=str(daemon.root), workers=daemon.workers)
            pool = await connected_pool(daemon, options)
            try:
                queues_service = service.QueueService(pool, options)
                copies = (await queues_service.run(writer, FanOut(pattern=".*", body=b"x")))[
                    "messages"]
                every = set(queues.asked)
                fanned, queues.asked = dict(queues.asked), Counter()
                pulled = await queues_service.run(writer, PullAny(pattern=".*"))
            finally:
                pool.close()
            return copies, every, fanned, dict(queues.asked), pulled

        copies, every, fanned, pulled_asked, pulled = asyncio.run(reach())
        assert sorted(m["queue"] for m in copies) == ["mine-a", "mine-b"]
        assert {"mine-a", "mine-b", "other-a"} <= every
        assert set(fanned.values()) == {1} and set(pulled_asked.values()) == {1}, (
            fanned, pulled_asked)
        assert pulled["queue"] in ("mine-a", "mine-b")
    finally:
        daemon.cleanup()


class OneToken:
    """A token file holding one token (what the front asks of a TokenFile)."""

    def __init__(self, token: Token):
        self.token = token

    def current(self) -> list[Token]:
        """The tokens in force."""
        return [self.token]


def test_an_http_request_is_checked_once_by_the_service_on_its_queue(tmp_path):
    # The route neither permits its path's queue nor re-tests it when it reads the name: the
    # service's check of the operation is the one check, each queue tested once.
    daemon = Daemon(tmp_path / "root", tmp_path, workers=2)
    secret = "s3cret-one-check"
    queues = CountingQueues("mine-.*")
    writer = Token(name="w", digest=digest_of(secret), rank=RANKS["write"], queues=queues)
    requests = [("POST", "/mine-a/messages", b"x"), ("GET", "/mine-a/messages", None),
                ("GET", "/mine-a", None), ("POST", "/other/messages", b"x"),
                ("PUT", "/mine-a", b"")]
    try:
        daemon.start().wait_ready()

        async def serve():
            options = Options(root=str(daemon.root), workers=daemon.workers)
            pool = await connected_pool(daemon, options)
            app = front.make_app(service.QueueService(pool, options), options,
                                 str(daemon.run_dir()))
            app.tokens = OneToken(writer)
            server = tornado.httpserver.HTTPServer(app)
            port = free_port()
            server.listen(port, "127.0.0.1")
            client = tornado.httpclient.AsyncHTTPClient()
            answers = []
            try:
                for method, path, body in requests:
                    queues.asked.clear()
                    resp = await client.fetch(f"http://127.0.0.1:{port}{path}", method=method,
                                              body=body, raise_error=False,
                                              headers={"Authorization": f"Bearer {secret}"})
                    answers.append((method, path, resp.code, dict(queues.asked)))
            finally:
                client.close()
                server.stop()
                pool.close()
            return answers

        assert asyncio.run(serve()) == [
            ("POST", "/mine-a/messages", 201, {"mine-a": 1}),
            ("GET", "/mine-a/messages", 200, {"mine-a": 1}),
            ("GET", "/mine-a", 200, {"mine-a": 1}),
            ("POST", "/other/messages", 403, {"other": 1}),
            ("PUT", "/mine-a", 403, {}),  # Write is not admin: refused on the scope alone.
        ]
    finally:
        daemon.cleanup()


def test_an_op_is_checked_on_every_field_typed_as_a_queue():
    # A new op declares its queues by their type, whatever the fields are called: both of a
    # throw-away op's queues are checked, the second one named "target".
    from dataclasses import dataclass

    from mq.operations.fields import FETCH, WRITE, OnQueue, Queue, operation

    try:
        @operation("copy_between", scope=WRITE)
        @dataclass(slots=True, frozen=True, kw_only=True)
        class CopyBetween(OnQueue[Acked]):
            """Copy a message of a queue into another (a declaration for this test)."""

            queue: Queue
            target: Queue

        request = CopyBetween(queue="from-q", target="to-q")
        assert (CopyBetween.scope, CopyBetween.actor, CopyBetween.reply) == (WRITE, FETCH, Acked)
        service.check(token("from-q|to-q", WRITE), request)
        with pytest.raises(Forbidden, match="lacks the write scope"):
            service.check(token("from-q|to-q", "read"), request)
        with pytest.raises(Forbidden, match="'to-q'"):
            service.check(token("from-q"), request)
        with pytest.raises(Forbidden, match="'from-q'"):
            service.check(token("to-q"), request)
    finally:
        OPS.pop("copy_between", None)


def test_a_queue_name_field_not_typed_as_a_queue_is_refused_at_declaration():
    # Checked as a queue's name, yet plain: it would escape the access check, so the
    # declaration itself fails.
    from dataclasses import dataclass
    from typing import Annotated

    from mq.operations.fields import OnQueue, Queue, operation
    from mq.store import validate_queue

    with pytest.raises(TypeError, match="type a queue as Queue"):
        @operation("copy_unmarked")
        @dataclass(slots=True, frozen=True, kw_only=True)
        class CopyUnmarked(OnQueue):
            """A declaration for this test."""

            queue: Queue
            target: Annotated[str, validate_queue]
    assert "copy_unmarked" not in OPS



def test_an_op_with_a_pattern_is_checked_on_its_scope_alone():
    # Its queues are those its pattern reaches that the token may use, filtered and never
    # refused (QueueService.reaching), so a token limited to some queues runs it; its scope
    # is checked as any op's.
    patterned = [cls for cls in OPS.values() if cls.reaches is not None]
    assert {cls.op for cls in patterned} == {"fan_out", "pull_any"}
    for cls in patterned:
        request = cls.from_payload({"pattern": "q-.*", "body": b"x"})
        assert request.touched() == []
        service.check(token("q-a", "write"), request)
        with pytest.raises(Forbidden, match="lacks the write scope"):
            service.check(token(".*", "read"), request)


def test_a_pattern_field_on_an_op_an_actor_serves_is_refused_at_declaration():
    # An actor would be sent a pattern it cannot resolve: only the front runs such an op.
    from dataclasses import dataclass

    from mq.operations.fields import WRITE, Operation, operation
    from mq.operations.patterns import Pattern

    with pytest.raises(TypeError, match="one pattern field"):
        @operation("fetch_matching", scope=WRITE)
        @dataclass(slots=True, frozen=True, kw_only=True)
        class FetchMatching(Operation):
            """A declaration for this test."""

            pattern: Pattern
    assert "fetch_matching" not in OPS
