"""Who may do what, as far as SQS clients ask: AddPermission and RemovePermission keep their
statements in the queue's Policy attribute (a JSON policy document, stored, not enforced), and
STS's GetCallerIdentity answers with the configured account, for tools that ask it first."""

import re
import time

import orjson

from mq.http.sqs.errors import SqsError, invalid, missing
from mq.http.sqs.names import Caller, names_list, queue_from_url, text
from mq.http.sqs.service import SqsService

#: A permission's label: SQS's grammar.
LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
#: The actions AddPermission may grant (the batch actions come with their single ones).
ACTIONS = ("*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
           "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue")
MAX_ACTIONS = 7
ACCOUNT = re.compile(r"\d{12}")


def _policy(kept: dict, caller: Caller, queue: str) -> dict:
    """The queue's policy document, or a new empty one as SQS starts it."""
    given = kept.get("Policy")
    if not given:
        return {"Version": "2012-10-17", "Id": f"{caller.arn(queue)}/SQSDefaultPolicy",
                "Statement": []}
    try:
        policy = orjson.loads(given)
    except orjson.JSONDecodeError:
        policy = None
    if not isinstance(policy, dict) or not isinstance(policy.get("Statement", []), list):
        raise invalid("The queue's Policy attribute is not a policy document with a list of "
                      "statements: set it again with SetQueueAttributes.")
    policy.setdefault("Statement", [])
    return policy


async def _save(service: SqsService, queue: str, own: dict, policy: dict) -> None:
    """Keep the policy (none once its last statement is gone) in the queue's attributes."""
    attributes = {**own.get("attributes", {}), "LastModifiedTimestamp": str(int(time.time()))}
    if policy["Statement"]:
        attributes["Policy"] = orjson.dumps(policy).decode()
    else:
        attributes.pop("Policy", None)
    await service.patch(queue, {"attributes": attributes})


async def add_permission(service: SqsService, caller: Caller, params: dict) -> None:
    """AddPermission: a statement allowing accounts some actions on the queue, in its Policy."""
    queue = queue_from_url(params)
    label = text(params, "Label", required=True)
    if not LABEL.fullmatch(label):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: Can only include "
                      "alphanumeric characters, hyphens, or underscores. 1 to 80 in length.")
    accounts = names_list(params, "AWSAccountIds")
    actions = names_list(params, "Actions")
    if not accounts:
        raise missing("AWSAccountIds")
    if not actions:
        raise missing("Actions")
    if len(actions) > MAX_ACTIONS:
        raise SqsError("OverLimit", f"{len(actions)} Actions were found, maximum allowed is "
                       f"{MAX_ACTIONS}.")
    for account in accounts:
        if not ACCOUNT.fullmatch(account):
            raise invalid(f"Value {account} for parameter PrincipalId is invalid. Reason: Unable "
                          "to verify.")
    for action in actions:
        if action not in ACTIONS:
            raise invalid(f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only "
                          "the queue owner is allowed to invoke this action.")
    await service.queue(queue)  # QueueDoesNotExist before any properties are written.
    own = await service.own(queue)
    policy = _policy(own.get("attributes", {}), caller, queue)
    if any(isinstance(s, dict) and s.get("Sid") == label for s in policy["Statement"]):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: Already exists.")
    principals = [f"arn:aws:iam::{a}:root" for a in accounts]
    granted = [f"SQS:{a}" for a in actions]
    policy["Statement"].append({
        "Sid": label, "Effect": "Allow",
        "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
        "Action": granted[0] if len(granted) == 1 else granted,
        "Resource": caller.arn(queue)})
    await _save(service, queue, own, policy)


async def remove_permission(service: SqsService, caller: Caller, params: dict) -> None:
    """RemovePermission: the statement of a label, out of the queue's Policy."""
    queue = queue_from_url(params)
    label = text(params, "Label", required=True)
    await service.queue(queue)  # QueueDoesNotExist before any properties are written.
    own = await service.own(queue)
    policy = _policy(own.get("attributes", {}), caller, queue)
    kept = [s for s in policy["Statement"] if not (isinstance(s, dict) and s.get("Sid") == label)]
    if len(kept) == len(policy["Statement"]):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: can't find label "
                      "on existing policy.")
    policy["Statement"] = kept
    await _save(service, queue, own, policy)


async def get_caller_identity(service: SqsService, caller: Caller, params: dict) -> dict:
    """STS GetCallerIdentity: the configured account, as its root user (keys are not users)."""
    return {"UserId": caller.account, "Account": caller.account,
            "Arn": f"arn:aws:iam::{caller.account}:root"}
