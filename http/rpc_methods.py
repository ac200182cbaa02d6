"""The methods of the MessagePack-RPC server, each mapped onto the QueueService calls
(http/service.py) the HTTP routes make: push and pull as POST and GET /{queue}/messages,
push_all and pull_any as /_mq/messages?qre=, done/retain/release as reply=ack/ext/nack, delete as
DELETE /{queue}, the properties as /{queue}/properties and /_mq/properties.

A content goes in as given: bytes are stored as they are (application/octet-stream), a string
as UTF-8 text (text/plain; charset=utf-8), any other value packed as msgpack
(application/msgpack); pull unpacks it back by that content type, so what was pushed comes
back the same, and a message added over HTTP comes back as bytes (as text when it is text/*).

With a token file, a connection first calls auth(token); every call is then checked as the
HTTP route it maps onto is, by the queue service on each operation it runs (http/service.py):
the scope, and every queue the operation touches.

Beside the methods below, each op that declares an RPC method (`rpc=Rpc(...)`,
mq.operations.wire) is one, with no code here: `declared_method` builds the op from its
parameters by name (`from_payload`, its own checks) and runs it.
"""

import time

import msgpack

from mq import store as fmt
from mq import trace_context
from mq.config import Options
from mq.errors import Invalid, Unauthorized
from mq.http.service import QueueService
from mq.operations import (
    OPS,
    Ack,
    Add,
    Extend,
    FanOut,
    Fetch,
    Fetched,
    Nack,
    Operation,
    PropsDelete,
    PropsPut,
    PullAny,
    QueueDelete,
    QueuePut,
    RulesGet,
    RulesPut,
)
from mq.tokens import Token, TokenFile, digest_of, find_digest

MSGPACK_TYPE = "application/msgpack"
TEXT_TYPE = "text/plain; charset=utf-8"
#: Options push may take as its third parameter.
PUSH_OPTIONS = ("delay", "dedup_id", "content_type", "traceparent", "tracestate")


class Caller:
    """What a method needs of its connection: the queue service, the options, the token it
    authenticated with, and the long polls to withdraw when the client hangs up (so that no
    message is claimed for nobody)."""

    def __init__(self, service: QueueService, options: Options, tokens: TokenFile | None = None):
        self.service = service
        self.options = options
        self.tokens = tokens
        # The SHA-256 of the token given to auth(), never the token: the file in force is
        # searched again for each call, so a token removed from it stops working at once.
        self.digest: bytes | None = None
        #: The name of the token last found for the connection, for the access log.
        self.token_name: str | None = None
        self.gone = False
        self.polls: set = set()  # The cancel() of each waiting poll (QueueService.fetch).

    def token(self) -> Token | None:
        """The connection's token now (None: access control is off); Unauthorized when it has
        not authenticated, or its token left the file."""
        if self.tokens is None:
            return None
        if self.digest is None:
            raise Unauthorized("this daemon checks tokens: call auth(token) first")
        token = find_digest(self.tokens.current(), self.digest)
        if token is None:
            raise Unauthorized("the token is not valid")
        self.token_name = token.name
        return token

    def hang_up(self) -> None:
        """The client went away: withdraw its waiting polls; claim nothing more for it."""
        self.gone = True
        for cancel in list(self.polls):
            cancel()
        self.polls.clear()


def encode_content(content) -> tuple[bytes, str]:
    """(body, content type) of a pushed content."""
    if isinstance(content, bytes):
        return content, "application/octet-stream"
    if isinstance(content, str):
        return content.encode(), TEXT_TYPE
    return msgpack.packb(content, use_bin_type=True), MSGPACK_TYPE


def decode_content(body: bytes, content_type: str):
    """A stored body as the content pull returns (see the module's docstring)."""
    kind = content_type.split(";")[0].strip().lower()
    try:
        if kind == MSGPACK_TYPE:
            return msgpack.unpackb(body, raw=False)
        if kind.startswith("text/"):
            return body.decode()
    except (ValueError, msgpack.UnpackException):
        pass  # Not what its type says: hand over the bytes.
    return body


def arguments(method: str, params: list, names: tuple, required: int) -> list:
    """params padded with None to the method's arity; Invalid when too few or too many."""
    if not required <= len(params) <= len(names):
        wanted = f"{required} to {len(names)}" if required != len(names) else str(required)
        raise Invalid(f"{method}({', '.join(names)}) takes {wanted} parameters, not {len(params)}")
    return list(params) + [None] * (len(names) - len(params))


def queue_name(name) -> str:
    """A queue name parameter, checked."""
    return fmt.validate_queue(name)


def traceparent_of(method: str, params: list, result) -> str | None:
    """The trace a call carried, for the access log: a push's, or a pulled message's."""
    if isinstance(result, dict):
        return result.get("traceparent")
    if method == "push" and len(params) > 2 and isinstance(params[2], dict):
        return trace_context.parse(params[2].get("traceparent")).get("tp")
    return None


def message(result: Fetched, queue: str) -> dict:
    """A fetched message as pull and pull_any return it."""
    return {"queue": queue, "id": result["id"], "type": "normal",
            "content": decode_content(result["body"], result["content_type"]),
            "receipt": result["receipt"], "attempts": result["attempts"],
            **trace_context.of_message(result.get("attributes"))}


def seconds(value, what: str = "timeout") -> float:
    """A number of seconds parameter (nil: 0)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{what} must be a number of seconds")
    return float(value)


async def push(caller: Caller, params: list):
    """push(name, content[, options]) -> "ok": add a message (options: delay, dedup_id,
    content_type, traceparent, tracestate)."""
    name, content, options = arguments("push", params, ("name", "content", "options"), 2)
    options = options or {}
    if not isinstance(options, dict) or set(options) - set(PUSH_OPTIONS):
        raise Invalid(f"push options must be a map of {', '.join(PUSH_OPTIONS)}")
    body, content_type = encode_content(content)
    now = time.time()
    delay = seconds(options.get("delay"), "delay")
    if not 0 <= delay < float("inf"):
        raise Invalid("delay must be a finite number of seconds, 0 or more")
    queue = queue_name(name)
    token = caller.token()
    context = trace_context.parse(options.get("traceparent"), options.get("tracestate"))
    # Checked once, by the save actor as it decodes the add (its fields' checks).
    await caller.service.run(token, Add(queue=queue, body=body,
                                        content_type=options.get("content_type") or content_type,
                                        due=now + delay if delay else None,
                                        dedup_id=options.get("dedup_id"),
                                        attributes=context or None))
    return "ok"


async def pull(caller: Caller, params: list):
    """pull(name[, timeout]) -> message | "empty": claim the oldest ready message."""
    name, timeout = arguments("pull", params, ("name", "timeout"), 1)
    queue, wait = queue_name(name), seconds(timeout)
    token = caller.token()
    sent = []

    def on_sent(cancel):
        sent.append(cancel)
        caller.polls.add(cancel)

    if caller.gone:
        return "empty"
    try:
        result = await caller.service.run(token, Fetch(queue=queue, wait=wait), on_sent=on_sent)
    finally:
        caller.polls.difference_update(sent)
    return "empty" if result.get("empty") else message(result, queue)


async def pull_any(caller: Caller, params: list):
    """pull_any(regexp[, timeout]) -> message | "empty": the oldest ready message of the queues
    whose names match."""
    pattern, timeout = arguments("pull_any", params, ("regexp", "timeout"), 1)
    token = caller.token()
    result = await caller.service.run(token, PullAny(pattern=pattern, wait=seconds(timeout)),
                                      gone=lambda: caller.gone)
    return "empty" if result.get("empty") else message(result, result["queue"])


async def push_all(caller: Caller, params: list):
    """push_all(regexp, content) -> "ok": add a message to every queue whose name matches."""
    pattern, content = arguments("push_all", params, ("regexp", "content"), 2)
    body, content_type = encode_content(content)
    await caller.service.run(caller.token(), FanOut(pattern=pattern, body=body,
                                                    content_type=content_type or ""))
    return "ok"


async def reply(caller: Caller, params: list, method: str, op: type[Ack | Extend | Nack]):
    """done, retain and release: ack, extend or nack a delivery (by its receipt, if given)."""
    name, message_id, receipt = arguments(method, params, ("name", "id", "receipt"), 2)
    queue = queue_name(name)
    fmt.validate_id(message_id)
    if receipt is not None and not isinstance(receipt, str):
        raise Invalid("receipt must be a string")
    request: Operation = op(queue=queue, id=message_id, receipt=receipt)
    await caller.service.run(caller.token(), request)
    return "ok"


async def done(caller: Caller, params: list):
    """done(name, id[, receipt]) -> "ok": the message is processed; remove it."""
    return await reply(caller, params, "done", Ack)


async def retain(caller: Caller, params: list):
    """retain(name, id[, receipt]) -> "ok": restart the delivery's timer (the queue's timeout)."""
    return await reply(caller, params, "retain", Extend)


async def release(caller: Caller, params: list):
    """release(name, id[, receipt]) -> "ok": give the message back for another delivery now."""
    return await reply(caller, params, "release", Nack)


async def delete(caller: Caller, params: list):
    """delete(name) -> "ok": delete the queue and all its messages."""
    (name,) = arguments("delete", params, ("name",), 1)
    queue = queue_name(name)
    await caller.service.run(caller.token(), QueueDelete(queue=queue))
    return "ok"


async def update_props(caller: Caller, params: list):
    """update_props(name[, property]) -> "ok": create the queue if needed and set its own
    properties to exactly these (none given: back to the defaults)."""
    name, props = arguments("update_props", params, ("name", "property"), 1)
    queue = queue_name(name)
    token = caller.token()
    # The properties first: their check covers the dead-letter queue they name too, so a
    # refused call changes nothing (the queue's creation is checked on the queue alone).
    if props is None:
        await caller.service.run(token, PropsDelete(queue=queue))
    else:
        await caller.service.run(token, PropsPut(queue=queue, properties=props))
    await caller.service.run(token, QueuePut(queue=queue))
    return "ok"


async def set_default_props(caller: Caller, params: list):
    """set_default_props(props_list) -> "ok": replace the default rules [[regexp, property]]."""
    (rules,) = arguments("set_default_props", params, ("props_list",), 1)
    await caller.service.run(caller.token(), RulesPut(rules=rules))
    return "ok"


async def get_default_props(caller: Caller, params: list):
    """get_default_props() -> props_list: the default rules."""
    arguments("get_default_props", params, (), 0)
    return (await caller.service.run(caller.token(), RulesGet()))["rules"]


async def auth(caller: Caller, params: list):
    """auth(token) -> "ok": the connection's later calls act with this token (any token is
    "ok" while access control is off); unauthorized when the token file does not hold it."""
    (secret,) = arguments("auth", params, ("token",), 1)
    if not isinstance(secret, str) or not secret:
        raise Invalid("auth(token) takes the token as a string")
    if caller.tokens is None:
        return "ok"
    digest = digest_of(secret)
    token = find_digest(caller.tokens.current(), digest)
    if token is None:
        caller.digest = caller.token_name = None  # A failed auth leaves no token at all.
        raise Unauthorized("the token is not valid")
    caller.digest, caller.token_name = digest, token.name
    return "ok"


METHODS = {
    "auth": auth, "push": push, "pull": pull, "pull_any": pull_any, "push_all": push_all,
    "done": done, "retain": retain, "release": release, "delete": delete,
    "update_props": update_props, "set_default_props": set_default_props,
    "get_default_props": get_default_props,
}


#: (how many ops were declared when it was made, RPC method -> the op that declares it).
_declared: tuple[int, dict[str, type[Operation]]] = (-1, {})


def declared_methods() -> dict[str, type[Operation]]:
    """The RPC methods the ops declare (`rpc=`), by name; made again when an op is declared."""
    global _declared
    if _declared[0] != len(OPS):
        _declared = (len(OPS), {op.rpc.method: op for op in OPS.values() if op.rpc is not None})
    return _declared[1]


async def declared_method(caller: Caller, op: type[Operation], params: list):
    """Run the op an RPC method declares: its parameters are the op's fields of their names."""
    rpc = op.rpc
    assert rpc is not None, "only ops with an RPC method get one"
    shown = rpc.shown()
    values = arguments(rpc.method, params, shown, len(shown) if rpc.required is None else rpc.required)
    token = caller.token()
    # A nil parameter is an absent field: the op's check answers when it is required.
    result = await caller.service.run(token, op.from_payload(dict(zip(rpc.params, values))))
    return result if rpc.reply else "ok"


async def call_method(caller: Caller, method: str, params: list):
    """Run one method; its error (MqError) is raised, Invalid for an unknown method."""
    function = METHODS.get(method)
    if function is not None:
        return await function(caller, params)
    op = declared_methods().get(method)
    if op is None:
        known = sorted([*METHODS, *declared_methods()])
        raise Invalid(f"no such method {method!r}; known: {', '.join(known)}")
    return await declared_method(caller, op, params)

