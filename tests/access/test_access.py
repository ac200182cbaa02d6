"""Access control against a real daemon started with a token file: 401 without a token or with
an unknown one, 403 outside a token's scope or queues, the open health and OpenAPI routes, the
file read again when it changes, tokens never in the log, and the Python client and mqctl
sending a token."""

import asyncio
import hashlib
import hmac
import json
import os

import pytest

from cli_support import run_forked
from support import Daemon, poll_for, request
from repo_support import REPO

from mq import tokens
from mq.client import AsyncClient, Client, ForbiddenError, UnauthorizedError
from mq.ctl import main as ctl
from mq.errors import Invalid
from mq.http import access
from mq.supervisor import main as supervisor

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("access")

#: name -> (secret, scopes, queues regex or None)
TOKENS = {
    "root": ("s3cret-admin-7f1c2b", ["admin"], None),
    "reader": ("s3cret-read-a91e0d", ["read"], None),
    "orders-worker": ("s3cret-write-55d3aa", ["write"], r"orders(\..*)?"),
    "orders-admin": ("s3cret-orders-admin-0b7e", ["admin"], r"orders(\..*)?"),
}
WRONG = "s3cret-nobody-c0ffee"
LATE = ("late", "s3cret-late-9d9d9d")


def entry(name: str, secret: str, scopes: list[str], queues: str | None = None) -> str:
    """One [[tokens]] table of a token file."""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    lines = ["[[tokens]]", f'name = "{name}"', f'sha256 = "{digest}"',
             f"scopes = {json.dumps(scopes)}"]
    if queues is not None:
        lines.append(f"queues = '{queues}'")  # A TOML literal string: no escapes in the regex.
    return "\n".join(lines) + "\n\n"


def token_file_text(extra: str = "") -> str:
    """The token file of the module's daemon."""
    return "".join(entry(name, *rest) for name, rest in TOKENS.items()) + extra


def auth(name: str) -> dict:
    """The Authorization header of one of TOKENS."""
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


class TokenDaemon(Daemon):
    """A daemon whose own helper requests (wait_ready, add, drain) carry the admin token."""

    def request(self, method, path, body=None, headers=None, timeout=15.0):
        """One HTTP request, with the admin token unless headers give another."""
        return super().request(method, path, body, {**auth("root"), **(headers or {})}, timeout)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with the token file, logging to a file the tests search for secrets."""
    workdir = tmp_path_factory.mktemp("access")
    token_path = workdir / "tokens.toml"
    token_path.write_text(token_file_text())
    mq = TokenDaemon(workdir / "root", workdir, workers=2, log_file=workdir / "mq.log",
                     args=(f"--token-file={token_path}",))
    mq.token_path = token_path
    try:
        yield mq.start().wait_ready()
    finally:
        mq.cleanup()


def call(daemon, method, path, who=None, body=None, headers=None):
    """A request as one of TOKENS (None: no Authorization header)."""
    return request(daemon.port, method, path, body, {**(auth(who) if who else {}), **(headers or {})})


def test_no_token_is_401_with_a_bearer_challenge(daemon):
    for method, path in [("GET", "/orders"), ("POST", "/orders/messages"), ("GET", "/_mq/properties"),
                         ("GET", "/no/such/path")]:
        resp = call(daemon, method, path, body=b"x" if method == "POST" else None)
        assert resp.status == 401, (method, path, resp.status, resp.body)
        assert resp.json()["error"] == "unauthorized"
        assert resp.header("WWW-Authenticate") == 'Bearer realm="mq"'
    resp = call(daemon, "GET", "/orders", headers={"Authorization": f"Basic {TOKENS['root'][0]}"})
    assert resp.status == 401  # Another scheme is no token.


def test_an_unknown_token_is_401_invalid_token(daemon):
    resp = request(daemon.port, "GET", "/orders", headers={"Authorization": f"Bearer {WRONG}"})
    assert resp.status == 401 and resp.json()["error"] == "unauthorized"
    assert 'error="invalid_token"' in resp.header("WWW-Authenticate")


def test_health_and_the_openapi_document_need_no_token(daemon):
    assert call(daemon, "GET", "/_mq/health").status in (200, 503)  # 503: a child restarting
    assert call(daemon, "GET", "/_mq/openapi.yaml").status == 200
    assert call(daemon, "DELETE", "/_mq/health").status == 401  # Only GET is open.


def test_a_read_token_reads_but_cannot_write_or_administer(daemon):
    daemon.add("readable", b"one")
    assert call(daemon, "GET", "/readable", "reader").status == 200
    assert call(daemon, "GET", "/readable/peek", "reader").status == 200
    assert call(daemon, "GET", "/readable/properties", "reader").status == 200
    assert call(daemon, "GET", "/_mq/properties", "reader").status == 200
    for method, path in [("POST", "/readable/messages"), ("GET", "/readable/messages"),
                         ("PUT", "/readable"), ("POST", "/readable/purge"),
                         ("PATCH", "/readable/properties"),
                         ("DELETE", "/readable/peek")]:  # Not declared: admin, not 405.
        resp = call(daemon, method, path, "reader", body=b"{}" if method in ("POST", "PATCH") else None)
        assert resp.status == 403, (method, path, resp.status, resp.body)
        assert resp.json()["error"] == "forbidden"
        assert 'error="insufficient_scope"' in resp.header("WWW-Authenticate")
    assert daemon.request("GET", "/readable/peek").json()["messages"][0]["body"] == "b25l"


def test_a_queue_regex_must_match_the_whole_queue_name(daemon):
    worker = "orders-worker"
    assert call(daemon, "POST", "/orders/messages", worker, b"a").status == 201
    assert call(daemon, "POST", "/orders.eu/messages", worker, b"b").status == 201
    fetched = call(daemon, "GET", "/orders/messages", worker)
    assert fetched.status == 200 and fetched.body == b"a"
    receipt = fetched.header("X-Receipt")
    path = f"/orders/messages/{fetched.header('X-Message-Id')}?reply=ack&receipt={receipt}"
    assert call(daemon, "POST", path, worker).status == 204
    for queue in ("billing", "orders2", "xorders", "orders.eu.x-"):
        expected = 201 if queue == "orders.eu.x-" else 403
        assert call(daemon, "POST", f"/{queue}/messages", worker, b"c").status == expected, queue
    # Write includes read, but a route about every queue needs a token for every queue.
    assert call(daemon, "GET", "/orders", worker).status == 200
    assert call(daemon, "GET", "/_mq/properties", worker).status == 403
    # Admin of some queues administers those, and nothing about every queue.
    assert call(daemon, "PUT", "/orders.admin", "orders-admin").status == 201
    assert call(daemon, "DELETE", "/billing", "orders-admin").status == 403
    assert call(daemon, "PUT", "/_mq/properties", "orders-admin", b"[]").status == 403


def test_an_admin_token_may_do_everything(daemon):
    admin = "root"
    assert call(daemon, "PUT", "/adminq", admin).status == 201
    assert call(daemon, "PUT", "/adminq/properties", admin, b'{"retry": 1}').status == 200
    assert call(daemon, "PATCH", "/adminq/properties", admin, b'{"retry": 0}').status == 200
    added = call(daemon, "POST", "/adminq/messages", admin, b"m")
    assert added.status == 201
    assert call(daemon, "GET", "/adminq/peek", admin).status == 200
    assert call(daemon, "POST", "/adminq/redrive", admin).status == 200
    assert call(daemon, "PUT", "/_mq/properties", admin, b'[["zz.*", {"retry": 3}]]').status == 200
    assert call(daemon, "DELETE", "/_mq/properties", admin).status == 200
    assert call(daemon, "POST", "/adminq/purge", admin).json()["purged"] == 1
    assert call(daemon, "DELETE", "/adminq/properties", admin).status == 200
    assert call(daemon, "DELETE", "/adminq", admin).status == 204
    assert call(daemon, "GET", "/no/such/path", admin).status == 404
    # A method the route does not serve: only an admin learns it is not served.
    assert call(daemon, "DELETE", "/adminq/peek", admin).status == 405


def test_the_token_file_is_read_again_when_it_changes_and_a_bad_one_is_refused(daemon):
    name, secret = LATE
    headers = {"Authorization": f"Bearer {secret}"}
    assert request(daemon.port, "GET", "/late", headers=headers).status == 401
    daemon.token_path.write_text(token_file_text(entry(name, secret, ["read"])))
    poll_for(lambda: request(daemon.port, "GET", "/_mq/properties", headers=headers).status == 200,
             30, what="the new token to be accepted")
    daemon.wait_for_events("access.tokens_loaded", tokens=len(TOKENS) + 1)
    daemon.token_path.write_text("[[tokens]]\nname = 'broken'\n")  # no sha256, no scopes
    # The front looks at the file when a request comes, at most once a second.
    poll_for(lambda: request(daemon.port, "GET", "/_mq/properties", headers=headers).status == 200
             and daemon.events("access.tokens_refused"), 30, what="the broken file to be refused")
    daemon.token_path.write_text(token_file_text())
    poll_for(lambda: request(daemon.port, "GET", "/_mq/properties", headers=headers).status == 401,
             30, what="the removed token to be refused")


def test_the_python_clients_send_their_token(daemon):
    url = f"http://127.0.0.1:{daemon.port}"
    with Client(url, token=TOKENS["orders-worker"][0], retries=0) as client:
        message_id = client.put("orders.py", "hi")
        message = client.get("orders.py")
        assert message.id == message_id
        client.ack(message)
        with pytest.raises(ForbiddenError) as refused:
            client.put("billing", "no")
        assert (refused.value.status, refused.value.kind) == (403, "forbidden")
    with Client(url, retries=0) as client, pytest.raises(UnauthorizedError):
        client.stat("orders.py")

    async def through_async():
        async with AsyncClient(url, token=TOKENS["reader"][0], retries=0) as client:
            return await client.stat("orders.py")
    assert asyncio.run(through_async())["queue"] == "orders.py"


def test_mqctl_takes_a_token_from_the_option_or_mq_token(daemon, monkeypatch, capsys):
    """mqctl's main() in this process (the option and environment handling is what is tested;
    test_ctl.py runs the command itself)."""
    monkeypatch.setenv("MQ_URL", f"http://127.0.0.1:{daemon.port}")
    monkeypatch.setenv("MQ_TOKEN", TOKENS["orders-worker"][0])
    assert ctl.main(["put", "orders.ctl", "by env"]) == 0
    monkeypatch.delenv("MQ_TOKEN")
    capsys.readouterr()
    assert ctl.main(["get", "orders.ctl", "--ack", "--body",
                     "--token", TOKENS["orders-worker"][0]]) == 0
    assert capsys.readouterr().out == "by env\n"
    assert ctl.main(["stat", "orders.ctl", "--retries", "0"]) == 6
    assert "Bearer token" in capsys.readouterr().err
    assert ctl.main(["put", "billing", "x", "--token", TOKENS["reader"][0]]) == 6
    assert "write scope" in capsys.readouterr().err


def test_mqctl_status_sends_the_token_and_a_refused_one_is_status_6(daemon, monkeypatch, capsys):
    monkeypatch.setenv("MQ_URL", f"http://127.0.0.1:{daemon.port}")
    monkeypatch.setenv("MQ_TOKEN", TOKENS["root"][0])
    assert ctl.main(["status", "--json"]) == 0
    assert "health" in json.loads(capsys.readouterr().out)
    assert ctl.main(["status", "--token", WRONG]) == 6
    assert "not valid" in capsys.readouterr().err
    monkeypatch.delenv("MQ_TOKEN")
    assert ctl.main(["status"]) == 6
    assert "Bearer token" in capsys.readouterr().err


def test_no_token_reaches_the_log_but_the_access_log_names_the_token(daemon):
    call(daemon, "GET", "/orders", "reader")
    request(daemon.port, "GET", "/orders", headers={"Authorization": f"Bearer {WRONG}"})
    call(daemon, "POST", "/orders/messages", "reader", b"refused")
    daemon.wait_for_events("http.request", token="reader", status=403, path="/orders/messages")
    text = daemon.log_path.read_text() + daemon.stderr()
    for secret in [s for s, _, _ in TOKENS.values()] + [WRONG, LATE[1]]:
        assert secret not in text
        assert hashlib.sha256(secret.encode()).hexdigest() not in text


# -- the token file, without a daemon ---------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("[[tokens]]\nscopes = ['read']\n", "sha256 must be"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = []\n", "scopes must be"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['all']\n", "scopes must be"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['read']\nqueues = '('\n", "regex"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['read']\ntoken = 'x'\n", "unknown key"),
    (("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['read']\n") * 2, "same sha256"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['read']\naws_access_key_id = 3\n",
     "aws_access_key_id must be"),
    ("[[tokens]]\nsha256 = '" + "a" * 64 + "'\nscopes = ['read']\naws_access_key_id = 'K'\n"
     "[[tokens]]\nsha256 = '" + "b" * 64 + "'\nscopes = ['read']\naws_access_key_id = 'K'\n",
     "same aws_access_key_id"),
    ("tokens = 3\n", "array of tables"),
    ("[[tokens]\n", "not TOML"),
])
def test_a_bad_token_file_is_refused_with_the_reason(text, message):
    with pytest.raises(Invalid, match=message):
        tokens.parse(text)


def test_a_bad_token_file_stops_mq_with_status_2(tmp_path):
    bad = tmp_path / "tokens.toml"
    bad.write_text("[[tokens]]\nname = 'x'\n")
    # mq's main() in a fork: the command's refusal without an interpreter's imports.
    result = run_forked(supervisor.main, [f"--root={tmp_path / 'r'}", f"--token-file={bad}"],
                        dict(os.environ), timeout=60)
    assert result.returncode == 2 and "token 1 (x): sha256 must be" in result.stderr, result


def test_every_entry_is_compared_in_constant_time(monkeypatch):
    """Timing cannot be measured here: this checks that hmac.compare_digest does the comparing,
    once per entry whichever matches (no early exit)."""
    parsed = tokens.parse(token_file_text())
    compared = []
    compare = hmac.compare_digest

    def recording(a, b):
        compared.append(a)
        return compare(a, b)
    monkeypatch.setattr(tokens.hmac, "compare_digest", recording)
    assert tokens.find(parsed, TOKENS["root"][0]).name == "root"
    assert len(compared) == len(TOKENS)
    assert tokens.find(parsed, WRONG) is None


@pytest.mark.parametrize("host, reachable", [
    ("127.0.0.1", False), ("127.0.0.2", False), ("::1", False), ("localhost", False),
    ("0.0.0.0", True), ("::", True), ("", True), ("10.1.2.3", True), ("mq.example.com", True),
])
def test_only_loopback_addresses_count_as_closed_to_other_hosts(host, reachable):
    assert access.exposed(host) is reachable


def test_the_token_file_of_the_operations_guide_reads_as_it_says():
    guide = (REPO / "docs" / "OPERATIONS.md").read_text()
    example = guide.split("```toml\n[[tokens]]", 1)[1].split("```", 1)[0]
    parsed = tokens.parse("[[tokens]]" + example.replace('"..."', '"' + "b" * 64 + '"'))
    producer, ops = parsed
    assert (producer.name, producer.allows("read"), producer.allows("admin")) == (
        "orders-producer", True, False)
    assert (producer.aws_access_key_id, ops.aws_access_key_id) == ("AKIDORDERS", None)
    assert [producer.allows_queue(q) for q in ("orders", "orders.eu", "orders2")] == [
        True, True, False]
    assert ops.allows("admin") and ops.every_queue


def test_the_dashboards_data_needs_a_token_for_every_queue(daemon):
    for path in ("/_mq/queues", "/_mq/queues?filter=orders", "/_mq/history"):
        assert call(daemon, "GET", path).status == 401, path
        assert call(daemon, "GET", path, "reader").status == 200, path
        assert call(daemon, "GET", path, "orders-worker").status == 403, path
        assert call(daemon, "GET", path, "orders-admin").status == 403, path
