"""Access control covers every queue an operation touches, not only the one in its path: a
queue named in a property value, the source of a redrive, the queues a pattern matches."""

import hashlib
import json

import pytest

from support import Daemon, request

#: name -> (secret, scopes, queues regex or None)
TOKENS = {
    "root": ("s3cret-root-31a4", ["admin"], None),
    "orders-admin": ("s3cret-orders-admin-77c1", ["admin"], r"orders(\..*)?"),
    "orders-worker": ("s3cret-orders-worker-90be", ["write"], r"orders(\..*)?"),
}


def entry(name: str, secret: str, scopes: list[str], queues: str | None) -> str:
    """One [[tokens]] table of a token file."""
    lines = ["[[tokens]]", f'name = "{name}"',
             f'sha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"',
             f"scopes = {json.dumps(scopes)}"]
    if queues is not None:
        lines.append(f"queues = '{queues}'")
    return "\n".join(lines) + "\n\n"


def auth(name: str) -> dict:
    """The Authorization header of one of TOKENS."""
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


class TokenDaemon(Daemon):
    """A daemon whose own helper requests carry the root token."""

    def request(self, method, path, body=None, headers=None, timeout=15.0):
        """One HTTP request, with the root token unless headers give another."""
        return super().request(method, path, body, {**auth("root"), **(headers or {})}, timeout)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with the token file."""
    workdir = tmp_path_factory.mktemp("access-queues")
    token_path = workdir / "tokens.toml"
    token_path.write_text("".join(entry(name, *rest) for name, rest in TOKENS.items()))
    mq = TokenDaemon(workdir / "root", workdir, workers=2,
                     args=(f"--token-file={token_path}",))
    try:
        yield mq.start().wait_ready()
    finally:
        mq.cleanup()


def call(daemon, method, path, who, body=None, headers=None):
    """A request as one of TOKENS."""
    return request(daemon.port, method, path, body, {**auth(who), **(headers or {})})


def refused(resp) -> bool:
    """A 403 with the JSON body of a refusal."""
    return resp.status == 403 and resp.json()["error"] == "forbidden"


def test_a_dead_letter_queue_outside_the_tokens_queues_is_refused(daemon):
    daemon.add("payments", b"card 4242")
    assert refused(call(daemon, "GET", "/payments/messages", "orders-admin"))
    patch = call(daemon, "PATCH", "/orders/properties", "orders-admin",
                 b'{"dead_letter_queue": "payments"}')
    assert refused(patch), (patch.status, patch.body)
    put = call(daemon, "PUT", "/orders/properties", "orders-admin",
               b'{"retry": 1, "dead_letter_queue": "payments"}')
    assert refused(put), (put.status, put.body)
    own = daemon.request("GET", "/orders/properties")
    assert own.status == 404 or "payments" not in json.dumps(own.json()["own"])
    # Within its queues the same change is allowed.
    assert call(daemon, "PATCH", "/orders/properties", "orders-admin",
                b'{"dead_letter_queue": "orders.failed"}').status == 200


def test_a_redrive_from_a_dead_letter_queue_outside_the_tokens_queues_is_refused(daemon):
    # An admin of every queue points orders.x's dead letters at payments.x.
    assert daemon.request("PUT", "/orders.x").status == 201
    assert daemon.request("PUT", "/orders.x/properties", b'{"dead_letter_queue": "payments.x"}').status == 200
    daemon.add("payments.x", b"card 4343")
    resp = call(daemon, "POST", "/orders.x/redrive", "orders-admin")
    assert refused(resp), (resp.status, resp.body)
    assert call(daemon, "GET", "/orders.x/messages", "orders-worker").status == 204
    assert daemon.request("GET", "/payments.x/peek").json()["messages"]
    assert daemon.request("POST", "/orders.x/redrive").json()["moved"] == 1  # Root may.


def test_a_pattern_reaches_only_the_tokens_queues(daemon):
    daemon.add("payments.p", b"card 4444")
    daemon.add("orders.p", b"order 1")
    got = call(daemon, "GET", "/_mq/messages?qre=(orders|payments)%5C.p", "orders-worker")
    assert got.status == 200 and got.header("X-Queue") == "orders.p" and got.body == b"order 1"
    assert call(daemon, "GET", "/_mq/messages?qre=(orders|payments)%5C.p",
                "orders-worker").status == 204
    assert call(daemon, "GET", "/_mq/messages?qre=payments%5C.p", "orders-worker").status == 404
    added = call(daemon, "POST", "/_mq/messages?qre=(orders|payments)%5C.p", "orders-worker", b"all")
    assert added.status == 201 and [m["queue"] for m in added.json()["messages"]] == ["orders.p"]
    assert len(daemon.request("GET", "/payments.p/peek").json()["messages"]) == 1
