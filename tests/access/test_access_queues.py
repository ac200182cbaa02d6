"""Access control covers every queue an operation touches, not only the one in its path: a
queue named in a property value, the source of a redrive or of a move task, the queues a
pattern matches; over mq's HTTP API, MessagePack-RPC (after auth) and the SQS API (the token of
the signing access key)."""

import json

import pytest
from botocore.exceptions import ClientError

from access_support import AccessDaemon, RpcClient, entry
from support import poll_for

#: name -> (secret, scopes, queues regex or None, SQS access key id)
TOKENS = {
    "root": ("s3cret-root-31a4", ["admin"], None, "AKIDROOT"),
    "orders-admin": ("s3cret-orders-admin-77c1", ["admin"], r"orders([.-].*)?", "AKIDORDERS"),
    "orders-worker": ("s3cret-orders-worker-90be", ["write"], r"orders([.-].*)?", "AKIDWORKER"),
}
#: A key of the credentials file that no token names.
STRAY_KEY = "AKIDSTRAY"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with the token file, RPC and SQS."""
    workdir = tmp_path_factory.mktemp("access-queues")
    mq = AccessDaemon(workdir, "".join(entry(name, *rest) for name, rest in TOKENS.items()),
                      [key for *_, key in TOKENS.values()] + [STRAY_KEY], TOKENS["root"][0])
    try:
        yield mq.ready()
    finally:
        mq.cleanup()


def call(daemon, method, path, who, body=None, headers=None):
    """A request as one of TOKENS."""
    return daemon.as_token(method, path, TOKENS[who][0], body, headers)


def refused(resp) -> bool:
    """A 403 with the JSON body of a refusal."""
    return resp.status == 403 and resp.json()["error"] == "forbidden"


def denied(call, *args, **kwargs) -> bool:
    """True when an SQS call is refused with AccessDenied (403)."""
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (
        "AccessDenied", 403), error
    return True


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
    assert daemon.request("PUT", "/orders.x/properties",
                          b'{"dead_letter_queue": "payments.x"}').status == 200
    daemon.add("payments.x", b"card 4343")
    resp = call(daemon, "POST", "/orders.x/redrive", "orders-admin")
    assert refused(resp), (resp.status, resp.body)
    assert call(daemon, "GET", "/orders.x/messages", "orders-worker").status == 204
    assert daemon.request("GET", "/payments.x/peek").json()["messages"]
    assert daemon.request("POST", "/orders.x/redrive").json()["moved"] == 1  # Root may.


def test_a_move_is_checked_on_its_queue_and_on_its_target(daemon):
    message_id = daemon.add("orders.mv", b"order 2")
    for path in (f"/orders.mv/messages/{message_id}/move?to=payments.mv",
                 f"/payments.mv/messages/{message_id}/move?to=orders.mv"):
        resp = call(daemon, "POST", path, "orders-worker")
        assert refused(resp), (path, resp.status, resp.body)
    resp = call(daemon, "POST", f"/orders.mv/messages/{message_id}/move?to=orders.mv2",
                "orders-worker")
    assert resp.status == 200 and resp.json()["queue"] == "orders.mv2", resp.body


def test_a_pattern_reaches_only_the_tokens_queues(daemon):
    daemon.add("payments.p", b"card 4444")
    daemon.add("orders.p", b"order 1")
    got = call(daemon, "GET", "/_mq/messages?qre=(orders|payments)%5C.p", "orders-worker")
    assert got.status == 200 and got.header("X-Queue") == "orders.p" and got.body == b"order 1"
    assert call(daemon, "GET", "/_mq/messages?qre=(orders|payments)%5C.p",
                "orders-worker").status == 204
    # A queue the token may not use is, for it, a queue that does not exist.
    assert call(daemon, "GET", "/_mq/messages?qre=payments%5C.p", "orders-worker").status == 404
    added = call(daemon, "POST", "/_mq/messages?qre=(orders|payments)%5C.p", "orders-worker",
                 b"all")
    assert added.status == 201 and [m["queue"] for m in added.json()["messages"]] == ["orders.p"]
    assert len(daemon.request("GET", "/payments.p/peek").json()["messages"]) == 1


def test_rpc_calls_need_auth_and_are_checked_on_every_queue_they_touch(daemon):
    daemon.add("payments.r", b"card 4545")
    daemon.add("orders.r", b"order r")
    rpc = RpcClient(daemon.rpc_port)
    try:
        error, _ = rpc.answer("push", "orders.r", "before auth")
        assert error["error"] == "unauthorized"
        assert rpc.answer("auth", "not-a-token")[0]["error"] == "unauthorized"
        assert rpc.answer("auth", TOKENS["orders-admin"][0]) == (None, "ok")
        assert rpc.answer("push", "orders.r", "mine") == (None, "ok")
        for method, *params in (("push", "payments.r", "x"), ("pull", "payments.r"),
                                ("delete", "payments.r"),
                                ("update_props", "orders.r", {"dead_letter_queue": "payments.r"}),
                                ("update_props", "orders.new", {"dead_letter_queue": "payments.r"}),
                                ("set_default_props", []), ("get_default_props",)):
            error, _ = rpc.answer(method, *params)
            assert error and error["error"] == "forbidden", (method, error)
        error, message = rpc.answer("pull_any", r"(orders|payments)\.r")
        assert error is None and message["queue"] == "orders.r"
        assert rpc.answer("push_all", r"(orders|payments)\.r", "all") == (None, "ok")
        assert rpc.answer("pull_any", r"payments\.r")[0]["error"] == "not_found"
        assert rpc.answer("update_props", "orders.r", {"dead_letter_queue": "orders.r.dead"}) == (
            None, "ok")
    finally:
        rpc.close()
    assert len(daemon.request("GET", "/payments.r/peek").json()["messages"]) == 1
    assert daemon.request("GET", "/payments.r/properties").json()["own"] == {}
    # A refused update_props changed nothing: not even the queue it would have created.
    assert daemon.request("GET", "/orders.new").status == 404
    assert daemon.request("GET", "/orders.new/properties").json()["own"] == {}


def test_sqs_calls_act_as_the_token_of_their_access_key(daemon):
    root, orders = daemon.sqs("AKIDROOT"), daemon.sqs("AKIDORDERS")
    payments = root.create_queue(QueueName="payments-s")["QueueUrl"]
    root.send_message(QueueUrl=payments, MessageBody="card 4646")
    mine = orders.create_queue(QueueName="orders-s")["QueueUrl"]
    assert denied(orders.create_queue, QueueName="billing-s")
    assert denied(orders.send_message, QueueUrl=payments, MessageBody="x")
    assert denied(orders.receive_message, QueueUrl=payments)
    assert denied(orders.get_queue_url, QueueName="payments-s")
    policy = json.dumps({"deadLetterTargetArn": daemon.arn("payments-s"), "maxReceiveCount": 2})
    assert denied(orders.set_queue_attributes, QueueUrl=mine, Attributes={"RedrivePolicy": policy})
    assert denied(orders.create_queue, QueueName="orders-s2", Attributes={"RedrivePolicy": policy})
    # payments-s is made orders-t's dead-letter queue by root; orders may not move it back.
    root.create_queue(QueueName="orders-t", Attributes={"RedrivePolicy": policy})
    assert denied(orders.start_message_move_task, SourceArn=daemon.arn("payments-s"))
    assert denied(orders.start_message_move_task, SourceArn=daemon.arn("payments-s"),
                  DestinationArn=daemon.arn("orders-s"))
    assert denied(orders.list_message_move_tasks, SourceArn=daemon.arn("payments-s"))
    assert orders.receive_message(QueueUrl=mine).get("Messages") is None
    listed = orders.list_queues()["QueueUrls"]
    assert daemon.queue_url("orders-s") in listed and daemon.queue_url("payments-s") not in listed
    assert orders.list_dead_letter_source_queues(QueueUrl=mine)["queueUrls"] == []
    assert denied(daemon.sqs("AKIDWORKER").delete_queue, QueueUrl=mine)  # write, not admin
    assert denied(daemon.sqs(STRAY_KEY).list_queues)  # a key no token names
    assert root.receive_message(QueueUrl=payments)["Messages"][0]["Body"] == "card 4646"


def test_an_rpc_connection_loses_its_token_when_the_file_drops_it(daemon):
    rpc = RpcClient(daemon.rpc_port)
    try:
        assert rpc.answer("auth", TOKENS["orders-worker"][0]) == (None, "ok")
        assert rpc.answer("push", "orders.gone", "kept") == (None, "ok")
        daemon.token_path.write_text("".join(entry(name, *rest) for name, rest in TOKENS.items()
                                             if name != "orders-worker"))
        poll_for(lambda: (rpc.answer("push", "orders.gone", "x")[0] or {}).get("error")
                 == "unauthorized", 10, what="the dropped token to be refused")
    finally:
        rpc.close()
        daemon.token_path.write_text("".join(entry(name, *rest) for name, rest in TOKENS.items()))
    poll_for(lambda: call(daemon, "GET", "/orders.gone", "orders-worker").status == 200, 10,
             what="the token to be accepted again")
    # The access log names the connection's token, never the token itself.
    daemon.wait_for_events("rpc.call", method="push", token="orders-worker", error=None)
    assert TOKENS["orders-worker"][0] not in daemon.log_path.read_text() + daemon.stderr()
