"""Every error kind, from its one declaration (mq.errors.TABLE) to each face of mq: the status
the front answers, the class mq.client and mq.local raise, mqctl's exit status and the SQS
error. docs/PROTOCOL.md's table of kinds is the contract each face is held to; a real daemon
(through HTTP, mq.client, mqctl and, for the daemon's own failures, boto3 on the SQS API), and a
real root for the broker-less library, answer the kinds a request can provoke."""

import asyncio
import contextlib
import hashlib
import os
import re
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import boto3
import botocore.config
import botocore.exceptions
import psutil
import pytest
import tornado.httpserver
import tornado.netutil
import yaml

from cli_support import run_ctl
from support import Daemon, poll_for, request
from repo_support import REPO

import mq.client
from mq.client import Client, Message
from mq.client.errors import CLASSES, ClientError, error_for
from mq.ctl import errors as ctl
from mq.errors import BY_NAME, KINDS, from_value
from mq.http import access
from mq.http.api import STATUS, ApiHandler, FrontApplication
from mq.http.sqs.errors import ERRORS, from_mq
from mq.local import LocalClient
from mq.local.errors import client_error

PROTOCOL = REPO / "docs" / "PROTOCOL.md"
OPENAPI = REPO / "core" / "openapi.yaml"
TABLE_HEAD = "| kind | raised when | HTTP status | client class | SQS error | `mqctl` exit |"


class Row(NamedTuple):
    """One kind as docs/PROTOCOL.md documents it."""

    status: int
    client: str
    sqs: str
    exit: int


def quoted(cell: str) -> str:
    """The first `name` of a table cell."""
    return re.search(r"`([A-Za-z_]+)`", cell).group(1)


def documented_kinds() -> dict[str, Row]:
    """kind -> Row, from the table of kinds in docs/PROTOCOL.md."""
    lines = PROTOCOL.read_text().split(TABLE_HEAD + "\n", 1)[1].splitlines()
    rows = {}
    for line in lines[1:]:  # Past the |---| line, to the first line that is no row.
        if not line.startswith("|"):
            break
        kind, _, status, client, sqs, exit_status = (c.strip() for c in line.strip("|").split("|"))
        rows[quoted(kind)] = Row(int(re.match(r"\d+", status).group()), quoted(client),
                                 quoted(sqs), int(exit_status))
    return rows


DOC = documented_kinds()


# -- the table, the docs and each derived mapping ---------------------------------------------


def test_the_documented_kinds_are_the_declared_ones_and_the_openapi_errors():
    assert list(DOC) == list(BY_NAME)
    for name, kind in BY_NAME.items():
        row = DOC[name]
        assert (row.status, row.sqs, row.exit) == (kind.status, kind.sqs, kind.exit), name
    spec = yaml.safe_load(OPENAPI.read_text())
    assert set(spec["components"]["schemas"]["Error"]["properties"]["error"]["enum"]) == set(DOC)


@pytest.mark.parametrize("kind", list(DOC))
def test_each_kind_maps_to_the_documented_answer_on_every_face(kind):
    row = DOC[kind]
    error = KINDS[kind](f"a {kind} failure")
    assert error.kind == kind and type(from_value(error.to_value())) is KINDS[kind]
    assert STATUS[kind] == row.status
    cls = getattr(mq.client, row.client)  # Exported under the documented name.
    assert CLASSES[kind] is cls and (cls.kind, cls.status) == (kind, row.status)
    assert cls.__doc__.startswith(f"{row.status}:"), cls.__doc__
    raised = error_for(row.status, kind, "why")
    assert type(raised) is cls and (raised.status, raised.kind, raised.message) == (
        row.status, kind, "why")
    local = client_error(error)
    assert type(local) is cls and (local.status, local.kind) == (row.status, kind)
    assert row.exit in (ctl.USAGE, ctl.NOT_FOUND, ctl.UNAVAILABLE, ctl.FAILED, ctl.REFUSED)
    assert ctl.status_of(raised) == ctl.status_of(local) == ctl.status_of(error) == row.exit
    sqs = from_mq(error)
    assert sqs.name == row.sqs and row.sqs in ERRORS
    # A missing queue in SQS's own words (what SDKs show); any other kind in mq's.
    assert sqs.message == ("The specified queue does not exist." if kind == "not_found"
                           else error.message)


def test_an_answer_whose_kind_is_unknown_or_misfits_its_status_raises_the_class_of_the_status():
    assert type(error_for(404, None, "gone")) is mq.client.NotFoundError
    assert type(error_for(405, "invalid", "no such method")) is ClientError
    assert type(error_for(500, "internal", "bug")) is mq.client.ServerError
    assert type(error_for(500, None, "a proxy's")) is mq.client.ServerError
    assert type(error_for(502, None, "bad gateway")) is mq.client.ServerError
    assert type(error_for(418, None, "teapot")) is ClientError


@pytest.mark.parametrize("base, classes", [(KINDS["internal"], KINDS), (ClientError, CLASSES)])
def test_a_kind_has_one_class_and_only_a_declared_kind_has_one(base, classes):
    with pytest.raises(TypeError, match="already has"):
        type("Again", (base,), {"kind": "not_found"})
    with pytest.raises(TypeError, match="not a kind"):
        type("Undeclared", (base,), {"kind": "teapot"})
    # A subclass that declares no kind of its own is its parent's kind, not a second class.
    assert type("Inherits", (classes["not_found"],), {}).kind == "not_found"
    assert "teapot" not in classes and classes["not_found"].__name__ != "Again"


# -- the front's status for every kind, even those no request can provoke --------------------


class Raising(ApiHandler):
    """A route of the real ApiHandler that fails with the kind its path names."""

    open_methods = frozenset({"GET"})

    def get(self, kind: str) -> None:
        """Raise the kind's MqError."""
        raise KINDS[kind](f"a {kind} failure")


@pytest.fixture(scope="module")
def raising_front():
    """A Tornado server on 127.0.0.1 with the Raising route, in a thread: its base URL."""
    ready, box = threading.Event(), {}

    async def serve():
        app = FrontApplication([(r"/([a-z_]+)", Raising, {
            "service": None, "options": SimpleNamespace(max_url_bytes=8192)})], tokens=None)
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        box.update(port=sockets[0].getsockname()[1], stop=asyncio.Event(),
                   loop=asyncio.get_running_loop())
        ready.set()
        await box["stop"].wait()
        server.stop()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the front did not start"
    yield f"http://127.0.0.1:{box['port']}"
    box["loop"].call_soon_threadsafe(box["stop"].set)
    thread.join(10)


@pytest.mark.parametrize("kind", list(DOC))
def test_the_front_answers_each_kinds_status_and_the_client_raises_its_class(raising_front, kind):
    row = DOC[kind]
    port = int(raising_front.rsplit(":", 1)[1])
    resp = request(port, "GET", f"/{kind}")
    assert (resp.status, resp.json()) == (row.status, {"error": kind, "message": f"a {kind} failure"})
    assert (resp.header("Retry-After") is not None) == (row.status == 503)
    with Client(raising_front, retries=0) as client, pytest.raises(ClientError) as raised:
        client.stat(kind)
    assert type(raised.value) is getattr(mq.client, row.client)
    assert (raised.value.status, raised.value.kind) == (row.status, kind)


# -- a real daemon: the kinds a request can provoke, on the wire, in the client, in mqctl ------

TOKENS = {"admin": "admin-secret-kinds", "reader": "reader-secret-kinds"}
SQS_KEY = ("AKIDMQKINDS000000000", "kinds-secret-key")
MAX_BODY, MAX_URL = 1000, 100


class TokenDaemon(Daemon):
    """A daemon whose own helper requests carry the admin token."""

    def request(self, method, path, body=None, headers=None, timeout=15.0):
        """One HTTP request, with the admin token unless headers give another."""
        return super().request(method, path, body, {**bearer("admin"), **(headers or {})}, timeout)


def bearer(who: str | None) -> dict:
    """The Authorization header of one of TOKENS (None: none)."""
    return {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with access control, small body and URL limits, one actor pair, and the SQS
    API on its port (signatures checked against SQS_KEY)."""
    workdir = tmp_path_factory.mktemp("kinds")
    tokens = workdir / "tokens.toml"
    tokens.write_text("".join(
        f'[[tokens]]\nname = "{name}"\nsha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"\n'
        f'scopes = ["{"admin" if name == "admin" else "read"}"]\n'
        # SQS requests signed with SQS_KEY act as the admin token.
        + (f'aws_access_key_id = "{SQS_KEY[0]}"\n' if name == "admin" else "") + "\n"
        for name, secret in TOKENS.items()))
    credentials = workdir / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = {SQS_KEY[0]}\n"
                           f"aws_secret_access_key = {SQS_KEY[1]}\n")
    mq_daemon = TokenDaemon(workdir / "root", workdir, workers=1, timeout=30, args=(
        f"--token-file={tokens}", f"--max-body-bytes={MAX_BODY}", f"--max-url-bytes={MAX_URL}",
        f"--sqs-credentials={credentials}"))
    try:
        yield mq_daemon.start().wait_ready()
    finally:
        mq_daemon.cleanup()


class Provoked(NamedTuple):
    """One failure three ways: the raw request, the same through a Client, mqctl's arguments."""

    raw: tuple  # (method, path, body, headers)
    client: object  # Client -> anything; raises
    ctl: list
    who: str | None = "admin"
    #: A boto3 SQS client -> anything, for a kind the SQS API reports through its kind table.
    sqs: object = None


def stale_or_bad(mq_daemon: Daemon, queue: str, receipt_of) -> Provoked:
    """An ack of a message just added and fetched, with the receipt receipt_of(id) makes."""
    message_id = mq_daemon.add(queue, b"x")
    assert mq_daemon.fetch(queue).status == 200
    receipt = receipt_of(message_id)
    message = Message(queue, message_id, b"", "", receipt, 0, None)
    return Provoked(("POST", f"/{queue}/messages/{message_id}?reply=ack", None,
                     {"X-Receipt": receipt}), lambda c: c.ack(message),
                    ["ack", queue, message_id, receipt])


@contextlib.contextmanager
def provoke(kind: str, mq_daemon: Daemon, queue: str):
    """The state in which the three requests of the kind's Provoked fail with that kind."""
    if kind == "not_found":
        yield Provoked(("GET", f"/{queue}", None, {}), lambda c: c.stat(queue), ["stat", queue])
    elif kind == "invalid":
        yield stale_or_bad(mq_daemon, queue, lambda message_id: "not-a-receipt")
    elif kind == "conflict":
        yield stale_or_bad(mq_daemon, queue, lambda message_id: f"{message_id}.5")
    elif kind == "too_large":
        body = "x" * (MAX_BODY + 1)
        yield Provoked(("POST", f"/{queue}/messages", body.encode(), {}),
                       lambda c: c.put(queue, body), ["put", queue, body])
    elif kind == "too_long":
        long_queue = (queue + "-" + "l" * MAX_URL)[:128]  # A valid name in a URL over the limit.
        yield Provoked(("GET", f"/{long_queue}", None, {}), lambda c: c.stat(long_queue),
                       ["stat", long_queue])
    elif kind in ("unauthorized", "forbidden"):
        who = None if kind == "unauthorized" else "reader"
        yield Provoked(("POST", f"/{queue}/messages", b"x", {}), lambda c: c.put(queue, b"x"),
                       ["put", queue, "x"], who)
    elif kind == "storage":
        # The queue's folder of de-duplication keys is a file: the disk answers ENOTDIR.
        fifo = f"{queue}.fifo"
        for name in (queue, fifo):
            assert mq_daemon.request("PUT", f"/{name}").status == 201
            (mq_daemon.root / "dedup" / name).write_bytes(b"not a folder")
        assert mq_daemon.request("PATCH", f"/{fifo}/properties", b'{"fifo": true}').status == 200
        yield Provoked(("POST", f"/{queue}/messages?dedup_id=a", b"x", {}),
                       lambda c: c.put(queue, b"x", dedup_id="b"),
                       ["put", queue, "x", "--dedup-id", "c"],
                       sqs=lambda sqs: sqs.send_message(
                           QueueUrl=sqs.get_queue_url(QueueName=fifo)["QueueUrl"],
                           MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d"))
    elif kind == "unavailable":
        # The save actor dead, and no supervisor to restart it until the requests are made.
        assert mq_daemon.request("PUT", f"/{queue}").status == 201
        supervisor = psutil.Process(mq_daemon.pid)
        supervisor.suspend()
        try:
            old = mq_daemon.kill_child("save-0")
            poll_for(lambda: mq_daemon.request("POST", f"/{queue}/messages", b"x").status == 503,
                     10, what="adds to be refused while the save actor is down")
            yield Provoked(("POST", f"/{queue}/messages", b"x", {}),
                           lambda c: c.put(queue, b"x"), ["put", queue, "x"],
                           sqs=lambda sqs: sqs.send_message(
                               QueueUrl=sqs.get_queue_url(QueueName=queue)["QueueUrl"],
                               MessageBody="x"))
        finally:
            supervisor.resume()
        mq_daemon.wait_for_new_pid("save-0", old, timeout=30)
        poll_for(lambda: mq_daemon.request("POST", f"/{queue}/messages", b"x").status == 201, 30,
                 what="adds to succeed again")


LIVE = ["not_found", "invalid", "conflict", "too_large", "too_long", "unauthorized",
        "forbidden", "storage", "unavailable"]


@pytest.mark.parametrize("kind", LIVE)
def test_a_real_daemon_answers_each_kind_and_the_client_mqctl_and_sqs_report_it(daemon, kind):
    row, queue = DOC[kind], f"kinds-{uuid.uuid4().hex[:10]}"
    with provoke(kind, daemon, queue) as failing:
        method, path, body, headers = failing.raw
        resp = request(daemon.port, method, path, body, {**bearer(failing.who), **headers})
        assert (resp.status, resp.json()["error"]) == (row.status, kind), resp.body
        url = f"http://127.0.0.1:{daemon.port}"
        token = TOKENS[failing.who] if failing.who else None
        with Client(url, token=token, retries=0) as client, \
                pytest.raises(ClientError) as raised:
            failing.client(client)
        assert type(raised.value) is getattr(mq.client, row.client)
        assert (raised.value.status, raised.value.kind) == (row.status, kind)
        env = {k: v for k, v in os.environ.items() if k not in ("MQ_TOKEN", "MQ_URL")}
        if token:
            env["MQ_TOKEN"] = token
        ran = run_ctl(["--url", url, "--retries", "0"] + failing.ctl, env=env)
        assert ran.returncode == row.exit, (ran.returncode, ran.stderr)
        assert ran.stderr.startswith(b"mqctl: ") and ran.stderr.count(b"\n") == 1, ran.stderr
        if failing.sqs is not None:
            with pytest.raises(botocore.exceptions.ClientError) as refused:
                failing.sqs(boto_client(url))
            code, status, _ = ERRORS[row.sqs]
            assert (refused.value.response["Error"]["Code"],
                    refused.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)


def boto_client(url: str):
    """A boto3 SQS client of the daemon, signing with SQS_KEY, that never retries."""
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id=SQS_KEY[0], aws_secret_access_key=SQS_KEY[1],
                        config=botocore.config.Config(retries={"max_attempts": 0}))


# -- the broker-less library on a real root, and mqctl --root ---------------------------------


@contextlib.contextmanager
def provoke_local(kind: str, root: Path, queue: str):
    """(LocalClient -> anything that raises the kind, mqctl's arguments) on a root it makes."""
    client = LocalClient(str(root), create_root=True)
    try:
        if kind == "not_found":
            yield (lambda c: c.stat(queue)), ["stat", queue]
        elif kind == "invalid":
            yield (lambda c: c.put("no such/queue", b"x")), ["put", "no such/queue", "x"]
        elif kind == "too_large":
            client.set_properties(queue, max_body_bytes=10)
            yield (lambda c: c.put(queue, b"x" * 11)), ["put", queue, "x" * 11]
        elif kind == "conflict":
            client.put(queue, b"x")
            message = client.get(queue)
            stale = message.receipt.rpartition(".")[0] + ".5"
            yield (lambda c: c.ack(Message(queue, message.id, b"", "", stale, 0, None))), \
                ["ack", queue, message.id, stale]
        elif kind == "storage":
            client.create_queue(queue)
            (root / "dedup" / queue).write_bytes(b"not a folder")
            yield (lambda c: c.put(queue, b"x", dedup_id="b")), \
                ["put", queue, "x", "--dedup-id", "c"]
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["not_found", "invalid", "too_large", "conflict", "storage"])
def test_the_local_library_and_mqctl_on_a_root_report_each_kind_as_the_daemon_does(tmp_path,
                                                                                     kind):
    row, root, queue = DOC[kind], tmp_path / "root", f"local-{uuid.uuid4().hex[:10]}"
    root.mkdir()
    with provoke_local(kind, root, queue) as (call, ctl_args):
        client = LocalClient(str(root))
        try:
            with pytest.raises(ClientError) as raised:
                call(client)
        finally:
            client.close()
        assert type(raised.value) is getattr(mq.client, row.client), raised.value
        assert raised.value.kind == kind
        ran = run_ctl(["--root", str(root)] + ctl_args)
        assert ran.returncode == row.exit, (ran.returncode, ran.stderr)


def test_the_local_library_and_mqctl_report_a_folder_without_format_as_unavailable(tmp_path):
    # What a daemon with --peers answers 503 for: the root's path leads to no root.
    row, empty = DOC["unavailable"], tmp_path / "mnt"
    empty.mkdir()
    with pytest.raises(ClientError) as raised:
        LocalClient(str(empty))
    assert type(raised.value) is getattr(mq.client, row.client), raised.value
    assert (raised.value.kind, raised.value.status) == ("unavailable", row.status)
    ran = run_ctl(["--root", str(empty), "stat", "q"])
    assert ran.returncode == row.exit, (ran.returncode, ran.stderr)
    assert os.listdir(empty) == []
