"""Access control of the SQS API (docs/SQS.md, "Access control"): with --token-file and
--sqs-credentials, a request acts as the token whose aws_access_key_id is the key that signed
it, and each operation needs a scope, as mq's own route that does the same work does, on every
queue it touches (http/access.py's check; AccessDenied when refused).

The handler checks the scope and the queue of the request's QueueUrl; an operation that names
other queues (a RedrivePolicy's target, a move task's source and destination, a QueueName)
checks those itself, and a listing shows only the queues the token may use.
"""

import orjson

from mq.http import access
from mq.http.sqs.errors import SqsError
from mq.http.sqs.names import queue_from_url
from mq.tokens import Token, TokenFile, find_access_key

READ, WRITE, ADMIN = "read", "write", "admin"

#: Operation -> the scope it needs; an operation not named here needs admin.
SCOPES = {
    "GetQueueUrl": READ, "ListQueues": READ, "GetQueueAttributes": READ, "ListQueueTags": READ,
    "ListDeadLetterSourceQueues": READ, "ListMessageMoveTasks": READ,
    "SendMessage": WRITE, "SendMessageBatch": WRITE, "ReceiveMessage": WRITE,
    "DeleteMessage": WRITE, "DeleteMessageBatch": WRITE, "ChangeMessageVisibility": WRITE,
    "ChangeMessageVisibilityBatch": WRITE,
    "CreateQueue": ADMIN, "DeleteQueue": ADMIN, "PurgeQueue": ADMIN, "SetQueueAttributes": ADMIN,
    "TagQueue": ADMIN, "UntagQueue": ADMIN, "StartMessageMoveTask": ADMIN,
    "CancelMessageMoveTask": ADMIN, "AddPermission": ADMIN, "RemovePermission": ADMIN,
    # STS's, answered with the account alone: any token may ask who it is.
    "GetCallerIdentity": READ,
}


def token_of(tokens: TokenFile | None, key: str | None) -> Token | None:
    """The token a request acts as (None: access control is off); AccessDenied when the key
    that signed it is no token's."""
    if tokens is None:
        return None
    token = find_access_key(tokens.current(), key) if key else None
    if token is None:
        raise SqsError("AccessDenied", f"The access key {key} is not allowed by this daemon's "
                       "token file: no token names it as its aws_access_key_id.")
    return token


def authorize(token: Token | None, operation: str, params: dict) -> None:
    """The check every operation gets: its scope, on the queue of its QueueUrl if any."""
    queues = [queue_from_url(params)] if params.get("QueueUrl") else []
    access.check(token, SCOPES.get(operation, ADMIN), queues)


def check(token: Token | None, operation: str, queues: list[str]) -> None:
    """The check of more queues an operation touches, with the operation's scope."""
    access.check(token, SCOPES.get(operation, ADMIN), queues)


def check_attributes(token: Token | None, operation: str, given) -> None:
    """Check the queue a RedrivePolicy attribute names, before the attributes are validated or
    any queue looked up: a refused caller learns nothing of the target (whether it exists, is
    FIFO). A policy that does not parse names no queue here; its validation refuses it."""
    try:
        policy = given.get("RedrivePolicy")
        policy = orjson.loads(policy) if isinstance(policy, str) else policy
        arn = policy["deadLetterTargetArn"]
    except (AttributeError, orjson.JSONDecodeError, KeyError, TypeError):
        return
    if isinstance(arn, str) and arn.count(":") == 5 and arn.rpartition(":")[2]:
        check(token, operation, [arn.rpartition(":")[2]])
