"""mqctl's commands of an operator (ls, create, delete, set, redrive) against a real daemon
over HTTP, one over HTTPS with access control (--ca, MQ_TOKEN), and a real root with no
daemon: each command, the confirmation of delete on a terminal and its refusal off one, a
refused property, and a listing of 10,000 queues. mqctl's main() runs in this process
(cli_support.run_ctl); the terminal's prompt starts it as a process."""

import hashlib
import json
import os
import pty
import select
import ssl
import subprocess
import uuid

import pytest
from cli_support import MQCTL, run_ctl
from doc_blocks import assert_shows, shown
from support import Daemon, free_port, poll_for, ready_daemon, request

from mq.store import Store

#: The module's tests on one xdist worker: spread over the workers, each started its two daemons.
pytestmark = pytest.mark.xdist_group("ctl-admin")

trustme = pytest.importorskip("trustme")

ADMIN = "s3cret-ctl-admin-4d1e"
#: A token limited to queues named orders*: no listing of every queue.
ORDERS = "s3cret-ctl-orders-77aa"


def token_entry(name: str, secret: str, queues: str | None = None) -> str:
    """One [[tokens]] table of a token file, with the admin scope."""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    limit = f"queues = '{queues}'\n" if queues else ""
    return f'[[tokens]]\nname = "{name}"\nsha256 = "{digest}"\nscopes = ["admin"]\n{limit}\n'


class SecureDaemon(Daemon):
    """A daemon on HTTPS with a token file; its own requests verify the authority and carry
    the admin token."""

    def __init__(self, *args, ca_file, **kwargs):
        super().__init__(*args, **kwargs)
        self.context = ssl.create_default_context(cafile=str(ca_file))

    def request(self, method, path, body=None, headers=None, timeout=15.0):
        """One HTTPS request with the admin token."""
        return request(self.port, method, path, body,
                       {"Authorization": f"Bearer {ADMIN}", **(headers or {})}, timeout,
                       context=self.context)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A daemon on plain HTTP, without access control."""
    yield from ready_daemon(tmp_path_factory.mktemp("ctl-admin"), workers=2, timeout=30)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """A daemon on HTTPS with a token file; .ca is the authority's PEM file."""
    workdir = tmp_path_factory.mktemp("ctl-admin-tls")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    ca_file, cert, key = workdir / "ca.pem", workdir / "cert.pem", workdir / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf.private_key_pem.write_to_path(str(key))
    for i, pem in enumerate(leaf.cert_chain_pems):
        pem.write_to_path(str(cert), append=i > 0)
    tokens = workdir / "tokens.toml"
    tokens.write_text(token_entry("admin", ADMIN) + token_entry("orders", ORDERS, r"orders.*"))
    mq = SecureDaemon(workdir / "root", workdir, workers=2, timeout=30, ca_file=ca_file, args=(
        f"--tls-cert={cert}", f"--tls-key={key}", f"--token-file={tokens}"))
    mq.ca = ca_file
    try:
        yield mq.start().wait_ready()
    finally:
        mq.cleanup()


class Ctl:
    """mqctl pointed at a daemon or a root, with the environment it runs in."""

    def __init__(self, where: list[str], env: dict | None = None, daemon: bool = True):
        self.where, self.daemon = where, daemon
        self.env = {**os.environ, **(env or {})}

    def argv(self, *args) -> list[str]:
        """The command line of one run as a process."""
        return MQCTL + self.where + [str(arg) for arg in args]

    def run(self, *args, input: bytes = b"") -> subprocess.CompletedProcess:
        """Run to the end in this process, with stdin, stdout and stderr as bytes."""
        return run_ctl(self.where + list(args), input=input, env=self.env)

    def ok(self, *args) -> bytes:
        """Run; assert exit status 0 and a silent stderr; return stdout."""
        result = self.run(*args)
        assert (result.returncode, result.stderr) == (0, b""), (args, result)
        return result.stdout

    def json(self, *args):
        """Run; the one JSON line it printed."""
        return json.loads(self.ok(*args))

    def fails(self, status: int, *args) -> str:
        """Run; assert the exit status and one `mqctl: ` line on stderr; return it."""
        result = self.run(*args)
        err = result.stderr.decode()
        assert result.returncode == status, (args, result)
        assert err.startswith("mqctl: ") and err.count("\n") == 1, err
        return err

    def listed(self, *args) -> dict[str, dict]:
        """`ls --json`'s queues, by name."""
        return {entry.pop("queue"): entry for entry in
                (json.loads(line) for line in self.ok("ls", "--json", *args).splitlines())}


def make_ctl(request, tmp_path) -> Ctl:
    """mqctl on the plain daemon, on the HTTPS daemon with a token, or on a fresh root."""
    if request.param == "url":
        return Ctl(["--url", f"http://127.0.0.1:{request.getfixturevalue('plain').port}"])
    if request.param == "tls-token":
        daemon = request.getfixturevalue("secure")
        return Ctl(["--url", f"https://127.0.0.1:{daemon.port}", "--ca", str(daemon.ca)],
                   {"MQ_TOKEN": ADMIN})
    root = tmp_path / "root"
    Store(str(root)).init()
    return Ctl(["--root", str(root)], daemon=False)


@pytest.fixture(params=["url", "root"])
def ctl(request, tmp_path) -> Ctl:
    """mqctl on the plain daemon or on a fresh root."""
    return make_ctl(request, tmp_path)


@pytest.fixture(params=["url", "tls-token", "root"])
def every_ctl(request, tmp_path) -> Ctl:
    """mqctl on the plain daemon, the HTTPS daemon with a token (--ca, MQ_TOKEN), or a root."""
    return make_ctl(request, tmp_path)


@pytest.fixture
def q() -> str:
    """A queue name no other test uses (the daemons are shared)."""
    return f"adm-{uuid.uuid4().hex[:10]}"


def test_create_set_list_and_delete(every_ctl, q):
    ctl = every_ctl
    made = ctl.json("create", q, "--set", "retry=0", "--set", 'tags={"team": "ops"}',
                    "--set", f"dead_letter_queue={q}.dlq")
    assert made["created"] is True
    assert (made["properties"]["retry"], made["properties"]["tags"]) == (0, {"team": "ops"})
    assert made["properties"]["dead_letter_queue"] == f"{q}.dlq"
    assert ctl.json("create", q)["created"] is False
    ctl.ok("put", q, "one")
    ctl.ok("put", q, "later", "--delay", "600")
    ctl.ok("put", q, "two")
    ctl.ok("get", q)
    ctl.ok("put", f"{q}.dlq", "dead one")

    def counted():
        return ctl.listed(q).get(q) == {"ready": 1, "delayed": 1, "in_flight": 1, "dead": 1}
    poll_for(counted, what="ls to count each state and the dead letter")
    assert set(ctl.listed(f"{q}*")) == {q, f"{q}.dlq"}
    assert set(ctl.listed(f"{q}?dlq")) == {f"{q}.dlq"}
    assert ctl.listed("no-such-queue-at-all") == {}
    table = ctl.ok("ls", q).decode().splitlines()
    assert table[0].split() == ["QUEUE", "READY", "DELAYED", "IN", "FLIGHT", "DEAD"]
    assert table[1].split() == [q, "1", "1", "1", "1"]

    after = ctl.json("set", q, "timeout=5", "fifo=true", "retention=3600")["properties"]
    assert (after["timeout"], after["fifo"], after["retention"], after["retry"]) == (5, True, 3600, 0)
    assert ctl.json("stat", q)["properties"]["timeout"] == 5

    assert ctl.json("delete", q, "--yes") == {"queue": q, "deleted": True}
    assert q not in ctl.listed(q)
    assert "does not exist" in ctl.fails(3, "delete", q, "--yes")
    ctl.fails(3, "stat", q)


def test_a_bad_property_is_refused_with_the_reason(ctl, q):
    err = ctl.fails(2, "create", q, "--set", "nosuch=1")
    assert "unknown property 'nosuch'" in err and "dead_letter_queue" in err
    # The daemon's (or the root's) own check, word for word; the queue is not left made.
    assert "property 'retry' must be between -1 and 100" in ctl.fails(
        2, "create", q, "--set", "retry=1000")
    ctl.fails(3, "stat", q)
    ctl.ok("create", q)
    assert "property 'fifo' must be true or false" in ctl.fails(2, "set", q, "fifo=maybe")
    assert "expected key=value" in ctl.fails(2, "set", q, "timeout")
    assert ctl.json("stat", q)["properties"]["fifo"] is False
    assert "does not exist" in ctl.fails(3, "set", f"{q}-missing", "timeout=5")
    ctl.fails(2, "set", q)  # No pair at all: a usage error.


def test_delete_off_a_terminal_needs_yes(ctl, q):
    ctl.ok("create", q)
    err = ctl.fails(2, "delete", q)
    assert "not a terminal" in err and "--yes" in err
    assert ctl.json("stat", q)["queue"] == q


def run_with_terminal(argv: list[str], answer: bytes, env: dict) -> tuple[int, bytes]:
    """Run with stdin, stdout and stderr on a pseudo-terminal, typing `answer` once asked;
    the exit status and everything written there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out, typed = b"", False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            assert ready, f"no output for 30 s; so far {out!r}"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end.
                break
            if not chunk:
                break
            out += chunk
            if not typed and b"Type the queue name" in out:
                os.write(master, answer + b"\n")
                typed = True
    finally:
        os.close(master)
        proc.wait(10)
    return proc.returncode, out


def test_delete_on_a_terminal_asks_for_the_name(ctl, q):
    ctl.ok("create", q)
    ctl.ok("put", q, "x")
    status, shown = run_with_terminal(ctl.argv("delete", q), b"not-" + q.encode(), ctl.env)
    assert status == 1 and b"1 ready messages" in shown and b"not deleted" in shown, shown
    assert ctl.json("stat", q)["ready"] == 1
    status, shown = run_with_terminal(ctl.argv("delete", q), q.encode(), ctl.env)
    assert status == 0 and b'"deleted":true' in shown, shown
    ctl.fails(3, "stat", q)


def test_the_delete_prompt_is_the_one_the_operations_guide_shows(ctl):
    ctl.ok("create", "invoices")
    ctl.ok("put", "invoices", "x")
    status, out = run_with_terminal(ctl.argv("delete", "invoices"), b"invoices", ctl.env)
    assert status == 0, out
    assert_shows(shown("OPERATIONS.md", "tests/clients/test_ctl_admin.py", "Delete queue"),
                 out.decode().replace("\r\n", "\n"))


def test_redrive_all_some_or_into_another_queue(every_ctl, q):
    ctl = every_ctl
    ctl.ok("create", q)
    for n in range(4):
        ctl.ok("put", f"{q}.dead", f"dead {n}")
    assert ctl.json("redrive", q, "--limit", "1") == {"queue": q, "dead_letter_queue": f"{q}.dead",
                                                      "moved": 1}
    assert "does not exist" in ctl.fails(3, "redrive", q, "--to", f"{q}-other")
    ctl.ok("create", f"{q}-other")
    assert ctl.json("redrive", q, "--to", f"{q}-other", "--limit", "1")["moved"] == 1
    assert ctl.json("redrive", q) == {"queue": q, "dead_letter_queue": f"{q}.dead", "moved": 2}
    assert ctl.json("redrive", q)["moved"] == 0
    assert ctl.run("get", f"{q}.dead").returncode == 1  # Nothing left to claim there.
    bodies = [json.loads(line)["body"] for line in ctl.ok("peek", q, "-n", "10").splitlines()]
    other = [json.loads(line)["body"] for line in ctl.ok("peek", f"{q}-other").splitlines()]
    assert sorted(bodies + other) == [f"dead {n}" for n in range(4)] and len(other) == 1
    ctl.fails(2, "redrive", q, "--limit", "0")


def test_a_token_limited_to_some_queues_cannot_list_them_all(secure):
    where = ["--url", f"https://127.0.0.1:{secure.port}", "--ca", str(secure.ca)]
    err = Ctl(where, {"MQ_TOKEN": ORDERS}).fails(6, "ls")
    assert "needs one for every queue" in err, err
    Ctl(where + ["--token", ADMIN]).ok("ls")
    Ctl(where, {"MQ_TOKEN": ""}).fails(6, "ls")


@pytest.mark.slow
def test_ls_lists_ten_thousand_queues(tmp_path):
    root = tmp_path / "root"
    Store(str(root)).init()
    # Made as the store lays a queue out (queues/{name}/), without a flush each: the test is
    # of the listing, and 10,000 flushes would take the better part of a minute.
    for n in range(10_000):
        os.mkdir(root / "queues" / f"many-{n:05d}")
    on_root = Ctl(["--root", str(root)], daemon=False)
    assert len(on_root.ok("ls").splitlines()) == 10_001
    assert list(on_root.listed("many-0000?")) == [f"many-{n:05d}" for n in range(10)]
    mq = Daemon(root, tmp_path, port=free_port(), workers=2, timeout=30)
    try:
        mq.start().wait_ready()
        over_http = Ctl(["--url", f"http://127.0.0.1:{mq.port}"])
        assert len(over_http.listed("many-")) == 10_000
        assert list(over_http.listed("9999")) == ["many-09999"]
    finally:
        mq.cleanup()
