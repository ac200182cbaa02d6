"""A model-based test of access control: random tokens (each scope with each of several queue
patterns) make random operations over mq's HTTP API, batches, MessagePack-RPC and the SQS API
(boto3, signing with the token's access key) against one daemon; each answer must be allowed
exactly when a small reference model of the rules (docs/OPERATIONS.md, "Access control")
allows it, and nothing a pattern or a listing returns may name a queue the token may not use.
A 5xx, an internal RPC error or an error line in the daemon's log fails the run."""

import itertools
import json
import re
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from access_support import AccessDaemon, RpcClient, entry
from support import lines_logging

QUEUES = ["a", "a-x", "b", "b-x", "c"]
#: The queues a token may name; None: none named (every queue); ".+" is not "every queue".
TOKEN_PATTERNS = [None, ".+", "a", "a(-.*)?", "b.*", "a|b", "[ab]-x"]
#: The patterns of fan-outs and pull-anys.
ROUTE_PATTERNS = [".*", "a.*", "b|c", "[ab]-x", "c"]
RANK = {"read": 1, "write": 2, "admin": 3}
MESSAGE_ID = "01a2076a-c3ab-7000-914c-3d6642fc8a55"
ERROR_EVENTS = ("front.error", "rpc.error", "sqs.error")
SQS_AUTH_CODES = {"AccessDenied", "MissingAuthenticationToken", "InvalidClientTokenId",
                  "SignatureDoesNotMatch"}


@dataclass(frozen=True)
class ModelToken:
    """A token of the file, and the reference model of what it allows."""

    name: str
    scope: str
    pattern: str | None

    @property
    def secret(self) -> str:
        """The bearer token."""
        return f"secret-of-{self.name}-5e1f"

    @property
    def key(self) -> str:
        """Its SQS access key id."""
        return f"AKID{self.name.upper()}"

    def may_use(self, queue: str) -> bool:
        """The queue matches the token's whole pattern."""
        return self.pattern is None or re.fullmatch(self.pattern, queue) is not None

    def allows(self, scope: str, queues) -> bool:
        """The model: the scope's rank, and every queue (None: the token is for all queues)."""
        if RANK[self.scope] < RANK[scope]:
            return False
        if queues is None:
            return self.pattern is None
        return all(self.may_use(q) for q in queues)

    def __repr__(self) -> str:
        """Short, for the steps of a failing run."""
        return f"<{self.scope} {self.pattern or '*'}>"


TOKENS = [ModelToken(f"t{n}", scope, pattern) for n, (scope, pattern)
          in enumerate(itertools.product(RANK, TOKEN_PATTERNS))]
ROOT = ModelToken("root", "admin", None)
#: A key of the credentials file that no token names: it signs, and may do nothing.
STRAY = ModelToken("stray", "read", None)
tokens = st.sampled_from(TOKENS)
queues = st.sampled_from(QUEUES)
dead_letter_queues = st.sampled_from(["", *QUEUES])
route_patterns = st.sampled_from(ROUTE_PATTERNS)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon for every run of the machine."""
    workdir = tmp_path_factory.mktemp("access-model")
    text = "".join(entry(t.name, t.secret, [t.scope], t.pattern, t.key) for t in [ROOT, *TOKENS])
    mq = AccessDaemon(workdir, text, [t.key for t in [ROOT, STRAY, *TOKENS]], ROOT.secret)
    try:
        yield mq.ready()
    finally:
        mq.cleanup()


def named(*queues: str) -> list[str]:
    """The queues an operation names, without the empty name (no dead-letter queue named)."""
    return [q for q in queues if q]


class AccessModel(RuleBasedStateMachine):
    """Random operations of random tokens; each answer checked against ModelToken.allows."""

    daemon: AccessDaemon = None
    log_read = 0  # how far teardown has read the daemon's log
    rpc_clients: dict = {}
    sqs_clients: dict = {}

    # -- the front ends, and the check of an answer ------------------------------------------

    def http(self, token, method, path, allowed, body=None, headers=None):
        """One HTTP request as the token; its answer checked against the model."""
        resp = self.daemon.as_token(method, path, token.secret, body, headers)
        assert resp.status < 500, (token, method, path, resp.status, resp.body)
        if allowed:
            assert resp.status not in (401, 403), (token, method, path, resp.status, resp.body)
        else:
            assert resp.status == 403, (token, method, path, resp.status, resp.body)
            assert resp.header("Content-Type") == "application/json"
            assert resp.json()["error"] == "forbidden"
        return resp

    def rpc(self, token, allowed, method, *params):
        """One MessagePack-RPC call on the token's authenticated connection, checked."""
        client = self.rpc_clients.get(token)
        if client is None:
            client = self.rpc_clients[token] = RpcClient(self.daemon.rpc_port)
            assert client.answer("auth", token.secret) == (None, "ok")
        error, result = client.answer(method, *params)
        kind = error and error["error"]
        assert kind not in ("internal", "storage", "unavailable"), (token, method, params, error)
        if allowed:
            assert kind not in ("unauthorized", "forbidden"), (token, method, params, error)
        else:
            assert kind == "forbidden", (token, method, params, error, result)
        return result

    def sqs(self, token, allowed, operation, **params):
        """One SQS call with the token's access key (boto3), checked; its result or None."""
        client = self.sqs_clients.get(token)
        if client is None:
            client = self.sqs_clients[token] = self.daemon.sqs(token.key)
        try:
            result, code, status = getattr(client, operation)(**params), None, 200
        except ClientError as err:
            result = None
            code = err.response["Error"]["Code"]
            status = err.response["ResponseMetadata"]["HTTPStatusCode"]
        assert status < 500, (token, operation, params, code, status)
        if allowed is None:  # Either: the model cannot tell.
            assert code not in SQS_AUTH_CODES - {"AccessDenied"}, (token, operation, params, code)
        elif allowed:
            assert code not in SQS_AUTH_CODES, (token, operation, params, code)
        else:
            assert (code, status) == ("AccessDenied", 403), (token, operation, params, code)
        return result

    def dead_letter_queue(self, queue: str) -> str:
        """The queue's dead-letter queue now, as root reads it (state, not a rule)."""
        resp = self.daemon.request("GET", f"/{queue}/properties")
        return resp.json()["properties"]["dead_letter_queue"]

    def teardown(self) -> None:
        """No error line in what the daemon logged since the last run's teardown (the log is
        read on from there: read whole after each run, it took a quarter of the test's time)."""
        bad, type(self).log_read = lines_logging(self.daemon.log_path, type(self).log_read,
                                                 ERROR_EVENTS)
        assert not bad, bad

    # -- mq's HTTP API ---------------------------------------------------------------------

    @rule(token=tokens, queue=queues, method=st.sampled_from(["GET", "PUT", "DELETE"]))
    def queue_route(self, token, queue, method):
        """GET (read), PUT and DELETE (admin) /{q}."""
        scope = "read" if method == "GET" else "admin"
        self.http(token, method, f"/{queue}", token.allows(scope, [queue]))

    @rule(token=tokens, queue=queues, path=st.sampled_from(["peek", "properties"]))
    def look(self, token, queue, path):
        """GET /{q}/peek and /{q}/properties (read)."""
        self.http(token, "GET", f"/{queue}/{path}", token.allows("read", [queue]))

    @rule(token=tokens, queue=queues, batch=st.booleans())
    def add(self, token, queue, batch):
        """An add or a batch add (write)."""
        if batch:
            body, kind = b'{"body": "one"}\n{"body": "two"}\n', "application/x-ndjson"
        else:
            body, kind = b"one", "text/plain"
        self.http(token, "POST", f"/{queue}/messages", token.allows("write", [queue]), body,
                  {"Content-Type": kind})

    @rule(token=tokens, queue=queues, query=st.sampled_from(["", "?max=3"]))
    def fetch(self, token, queue, query):
        """A fetch or a batch fetch (write)."""
        self.http(token, "GET", f"/{queue}/messages{query}", token.allows("write", [queue]))

    @rule(token=tokens, queue=queues, how=st.sampled_from(["delete", "ack", "batch"]))
    def reply(self, token, queue, how):
        """Delete, ack, batch ack of a message (write)."""
        allowed = token.allows("write", [queue])
        if how == "delete":
            self.http(token, "DELETE", f"/{queue}/messages/{MESSAGE_ID}", allowed)
        elif how == "ack":
            self.http(token, "POST", f"/{queue}/messages/{MESSAGE_ID}?reply=ack", allowed)
        else:
            self.http(token, "POST", f"/{queue}/messages/ack", allowed,
                      json.dumps({"receipts": [f"{MESSAGE_ID}.1"]}).encode())

    @rule(token=tokens, queue=queues)
    def purge(self, token, queue):
        """POST /{q}/purge (admin)."""
        self.http(token, "POST", f"/{queue}/purge", token.allows("admin", [queue]))

    @rule(token=tokens, queue=queues, dead=dead_letter_queues,
          method=st.sampled_from(["PATCH", "PUT"]))
    def set_dead_letter_queue(self, token, queue, dead, method):
        """PATCH or PUT properties naming a dead-letter queue (admin, on both)."""
        body = json.dumps({"retry": 1, "dead_letter_queue": dead}).encode()
        self.http(token, method, f"/{queue}/properties", token.allows("admin", named(queue, dead)),
                  body)

    @rule(token=tokens, queue=queues)
    def reset_properties(self, token, queue):
        """DELETE /{q}/properties (admin)."""
        self.http(token, "DELETE", f"/{queue}/properties", token.allows("admin", [queue]))

    @rule(token=tokens, queue=queues)
    def redrive(self, token, queue):
        """POST /{q}/redrive (admin, on the queue and its dead-letter queue now)."""
        dead = self.dead_letter_queue(queue)
        self.http(token, "POST", f"/{queue}/redrive", token.allows("admin", [queue, dead]))

    @rule(token=tokens, pattern=route_patterns)
    def pull_any(self, token, pattern):
        """Pull-any (write): a message only from a queue the token may use."""
        resp = self.http(token, "GET", f"/_mq/messages?qre={quote(pattern)}",
                         token.allows("write", []))
        if resp.status == 200:
            assert token.may_use(resp.header("X-Queue")), (token, pattern, resp.header("X-Queue"))

    @rule(token=tokens, pattern=route_patterns)
    def fan_out(self, token, pattern):
        """Fan-out (write): copies only in queues the token may use."""
        resp = self.http(token, "POST", f"/_mq/messages?qre={quote(pattern)}",
                         token.allows("write", []), b"to all")
        if resp.status == 201:
            reached = [m["queue"] for m in resp.json()["messages"]]
            assert all(token.may_use(q) for q in reached), (token, pattern, reached)

    @rule(token=tokens, method=st.sampled_from(["GET", "PUT"]),
          path=st.sampled_from(["properties", "stats"]))
    def about_every_queue(self, token, method, path):
        """The rules and the statistics: a token for every queue."""
        if path == "stats" and method == "PUT":
            return
        scope = "read" if method == "GET" else "admin"
        self.http(token, method, f"/_mq/{path}", token.allows(scope, None),
                  b"[]" if method == "PUT" else None)

    @rule(queue=queues, via=st.sampled_from(["http", "rpc", "sqs"]))
    def without_a_token(self, queue, via):
        """No bearer token, an RPC connection that did not call auth, a key no token names."""
        if via == "http":
            resp = self.daemon.as_token("GET", f"/{queue}/messages", "no-such-token")
            assert resp.status == 401 and resp.json()["error"] == "unauthorized", resp
            assert resp.header("WWW-Authenticate").startswith("Bearer")
        elif via == "rpc":
            client = RpcClient(self.daemon.rpc_port)
            try:
                error, _ = client.answer("pull", queue)
            finally:
                client.close()
            assert error["error"] == "unauthorized", error
        else:
            self.sqs(STRAY, False, "receive_message", QueueUrl=self.daemon.queue_url(queue))

    # -- MessagePack-RPC -------------------------------------------------------------------

    @rule(token=tokens, queue=queues, method=st.sampled_from(["push", "pull", "done", "delete"]))
    def rpc_queue(self, token, queue, method):
        """push, pull, done (write) and delete (admin) of one queue."""
        params = {"push": ("rpc",), "pull": (), "done": (MESSAGE_ID,), "delete": ()}[method]
        scope = "admin" if method == "delete" else "write"
        self.rpc(token, token.allows(scope, [queue]), method, queue, *params)

    @rule(token=tokens, queue=queues, dead=dead_letter_queues)
    def rpc_update_props(self, token, queue, dead):
        """update_props naming a dead-letter queue (admin, on both)."""
        self.rpc(token, token.allows("admin", named(queue, dead)), "update_props", queue,
                 {"dead_letter_queue": dead})

    @rule(token=tokens, pattern=route_patterns, method=st.sampled_from(["pull_any", "push_all"]))
    def rpc_pattern(self, token, pattern, method):
        """pull_any and push_all (write): only queues the token may use."""
        result = self.rpc(token, token.allows("write", []), method, pattern,
                          *(("all",) if method == "push_all" else ()))
        if isinstance(result, dict):
            assert token.may_use(result["queue"]), (token, pattern, result["queue"])

    @rule(token=tokens, method=st.sampled_from(["get_default_props", "set_default_props"]))
    def rpc_rules(self, token, method):
        """get_default_props (read) and set_default_props (admin), about every queue."""
        if method == "get_default_props":
            self.rpc(token, token.allows("read", None), method)
        else:
            self.rpc(token, token.allows("admin", None), method, [])

    # -- the SQS API -----------------------------------------------------------------------

    @rule(token=tokens, queue=queues, dead=dead_letter_queues)
    def sqs_create(self, token, queue, dead):
        """CreateQueue, with a RedrivePolicy or not (admin, on both queues)."""
        attributes = {"RedrivePolicy": json.dumps({"deadLetterTargetArn": self.daemon.arn(dead),
                                                   "maxReceiveCount": 3})} if dead else {}
        self.sqs(token, token.allows("admin", named(queue, dead)), "create_queue",
                 QueueName=queue, Attributes=attributes)

    @rule(token=tokens, queue=queues, dead=st.sampled_from(QUEUES))
    def sqs_set_redrive_policy(self, token, queue, dead):
        """SetQueueAttributes with a RedrivePolicy (admin, on both queues)."""
        policy = json.dumps({"deadLetterTargetArn": self.daemon.arn(dead), "maxReceiveCount": 2})
        self.sqs(token, token.allows("admin", [queue, dead]), "set_queue_attributes",
                 QueueUrl=self.daemon.queue_url(queue), Attributes={"RedrivePolicy": policy})

    @rule(token=tokens, queue=queues, operation=st.sampled_from([
        "send_message", "send_message_batch", "receive_message", "get_queue_attributes",
        "delete_queue", "purge_queue"]))
    def sqs_queue(self, token, queue, operation):
        """The operations on one QueueUrl, each with its scope."""
        scope = {"get_queue_attributes": "read", "delete_queue": "admin",
                 "purge_queue": "admin"}.get(operation, "write")
        params = {"send_message": {"MessageBody": "sqs"},
                  "send_message_batch": {"Entries": [{"Id": "1", "MessageBody": "sqs"}]},
                  "get_queue_attributes": {"AttributeNames": ["All"]}}.get(operation, {})
        self.sqs(token, token.allows(scope, [queue]), operation,
                 QueueUrl=self.daemon.queue_url(queue), **params)

    @rule(token=tokens, queue=queues)
    def sqs_get_queue_url(self, token, queue):
        """GetQueueUrl (read)."""
        self.sqs(token, token.allows("read", [queue]), "get_queue_url", QueueName=queue)

    @rule(token=tokens, queue=queues, listing=st.sampled_from(["list_queues", "sources"]))
    def sqs_listing(self, token, queue, listing):
        """ListQueues and ListDeadLetterSourceQueues: only queues the token may use."""
        if listing == "list_queues":
            result = self.sqs(token, token.allows("read", []), "list_queues")
            urls = (result or {}).get("QueueUrls", [])
        else:
            result = self.sqs(token, token.allows("read", [queue]),
                              "list_dead_letter_source_queues",
                              QueueUrl=self.daemon.queue_url(queue))
            urls = (result or {}).get("queueUrls", [])
        listed = [url.rpartition("/")[2] for url in urls]
        assert all(token.may_use(q) for q in listed), (token, listing, listed)

    @rule(token=tokens, source=queues, destination=st.sampled_from([None, *QUEUES]))
    def sqs_move_task(self, token, source, destination):
        """StartMessageMoveTask (admin, on its source and destination)."""
        params = {"SourceArn": self.daemon.arn(source)}
        if destination:
            params["DestinationArn"] = self.daemon.arn(destination)
            allowed = token.allows("admin", [source, destination])
        else:
            # The destination is the queue whose redrive policy names the source: one of these
            # (a queue dead-letters there only with a redrive policy, which the model does not
            # follow), so a refusal is right only when one of them is not the token's.
            whose = [q for q in QUEUES if q != source and self.dead_letter_queue(q) == source]
            allowed = token.allows("admin", [source, *whose]) or (
                None if token.allows("admin", [source]) else False)
        self.sqs(token, allowed, "start_message_move_task", **params)

@pytest.mark.slow
def test_every_answer_is_allowed_exactly_when_the_model_allows(daemon):
    AccessModel.daemon, AccessModel.log_read = daemon, daemon.log_offset
    try:
        # No shrinking: shrinking a run of this daemon's calls takes minutes, past the test's
        # timeout; the failing steps are reported as they came, each naming its token.
        run_state_machine_as_test(AccessModel, settings=settings(
            max_examples=60, stateful_step_count=40, deadline=None, database=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=list(HealthCheck)))
    finally:
        for client in [*AccessModel.rpc_clients.values(), *AccessModel.sqs_clients.values()]:
            client.close()
        AccessModel.rpc_clients.clear()
        AccessModel.sqs_clients.clear()
    errors = [line for line in daemon.events() if line.get("event") in ERROR_EVENTS]
    assert not errors, errors
