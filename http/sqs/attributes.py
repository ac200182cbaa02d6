"""Queue attributes of the SQS API on mq's queue properties (docs/SQS.md, "Queue attributes").

VisibilityTimeout is `timeout`, DelaySeconds `delay`, MaximumMessageSize `max_body_bytes`,
RedrivePolicy `retry` (maxReceiveCount - 1) and `dead_letter_queue`, FifoQueue `fifo`,
MessageRetentionPeriod `retention`; the others (ReceiveMessageWaitTimeSeconds, the timestamps,
ContentBasedDeduplication, Policy, ...) are kept in the property `attributes`.
"""

import time

import orjson

from mq.http.sqs.errors import SqsError, invalid
from mq.http.sqs.names import Caller, queue_from_arn
from mq.properties import MAX_RETRY, UNLIMITED_RETRY

#: The smallest timeout mq keeps: a VisibilityTimeout of 0 is stored as this.
MIN_TIMEOUT = 0.001
#: Settable attributes kept as given in the `attributes` property, with their checks.
KEPT = {
    "ReceiveMessageWaitTimeSeconds": (0, 20),
    "KmsDataKeyReusePeriodSeconds": (60, 86400),
    "KmsMasterKeyId": None,
    "Policy": None,
    "RedriveAllowPolicy": None,
    "SqsManagedSseEnabled": "bool",
}
#: Kept attributes that an empty value removes (SQS no longer shows them).
REMOVABLE = ("Policy", "RedriveAllowPolicy", "KmsMasterKeyId")
FIFO_ONLY = {"ContentBasedDeduplication": "bool", "DeduplicationScope": ("queue", "messageGroup"),
             "FifoThroughputLimit": ("perQueue", "perMessageGroupId")}
MAPPED = {"VisibilityTimeout": (0, 43200), "DelaySeconds": (0, 900),
          "MaximumMessageSize": (1024, 1048576), "MessageRetentionPeriod": (60, 1209600)}
READ_ONLY = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
             "QueueArn")
#: Every name GetQueueAttributes knows.
KNOWN = ("All", "Policy", *MAPPED, *KEPT, *FIFO_ONLY, *READ_ONLY, "RedrivePolicy", "FifoQueue")
#: What SQS gives a new queue.
DEFAULTS = {"VisibilityTimeout": "30", "DelaySeconds": "0", "MaximumMessageSize": "1048576",
            "MessageRetentionPeriod": "345600", "ReceiveMessageWaitTimeSeconds": "0"}
MAX_RECEIVE_COUNT = 1000
#: Key in `attributes` of the maxReceiveCount given: mq keeps at most MAX_RETRY + 1 deliveries,
#: so a larger count is applied as that and shown as given.
RECEIVE_COUNT = "RedriveMaxReceiveCount"


def _bad(name: str, reason: str = "") -> SqsError:
    return SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}."
                    + (f" Reason: {reason}" if reason else ""))


def _int(name: str, value, low: int, high: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise _bad(name) from None
    if not low <= number <= high:
        raise _bad(name)
    return number


def _bool(name: str, value) -> str:
    text = str(value).lower() if not isinstance(value, bool) else ("true" if value else "false")
    if text not in ("true", "false"):
        raise _bad(name)
    return text


async def redrive_properties(value, fifo: bool, exists, caller: Caller) -> tuple[dict, str]:
    """(the properties a RedrivePolicy sets, its maxReceiveCount or ""); `exists(queue)` tells
    whether its target exists (never one of another account or region)."""
    if value in ("", "{}", None):
        return {"retry": UNLIMITED_RETRY, "dead_letter_queue": ""}, ""
    try:
        policy = orjson.loads(value) if isinstance(value, str) else value
    except orjson.JSONDecodeError:
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Redrive "
                      "policy is not a dict or valid json.") from None
    if not isinstance(policy, dict):
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Redrive "
                      "policy is not a dict or valid json.")
    for key in ("deadLetterTargetArn", "maxReceiveCount"):
        if key not in policy:
            raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: "
                          f"Redrive policy does not contain mandatory attribute: {key}.")
    try:
        count = int(str(policy["maxReceiveCount"]))
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_RECEIVE_COUNT:
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Invalid "
                      f"value for maxReceiveCount: {policy['maxReceiveCount']}, valid values "
                      f"are from 1 to {MAX_RECEIVE_COUNT} both inclusive.")
    target = queue_from_arn(policy["deadLetterTargetArn"], "RedrivePolicy")
    target_fifo = await exists(target) if caller.owns_arn(policy["deadLetterTargetArn"]) else None
    if target_fifo is None:
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Dead "
                      "letter target does not exist.")
    if target_fifo != fifo:
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Dead-letter "
                      "queue must be same type of queue as the source.")
    return {"retry": min(count - 1, MAX_RETRY), "dead_letter_queue": target}, str(count)


async def to_properties(given: dict, fifo: bool, exists, creating: bool,
                        caller: Caller) -> tuple[dict, dict]:
    """(properties, kept attributes) that queue attributes given to CreateQueue or
    SetQueueAttributes set; InvalidAttributeName/Value as SQS answers them."""
    if not isinstance(given, dict):
        raise invalid("Attributes must be a map of names to values.")
    props, kept = {}, {}
    for name, value in given.items():
        if name in MAPPED:
            number = _int(name, value, *MAPPED[name])
            if name == "VisibilityTimeout":
                props["timeout"] = float(max(number, MIN_TIMEOUT))
            elif name == "DelaySeconds":
                props["delay"] = float(number)
            elif name == "MessageRetentionPeriod":
                props["retention"] = float(number)
            else:
                props["max_body_bytes"] = number
        elif name == "RedrivePolicy":
            redrive, kept[RECEIVE_COUNT] = await redrive_properties(value, fifo, exists, caller)
            props.update(redrive)
        elif name in KEPT:
            check = KEPT[name]
            kept[name] = (_bool(name, value) if check == "bool" else
                          str(_int(name, value, *check)) if isinstance(check, tuple) else str(value))
        elif name in FIFO_ONLY and fifo:
            allowed = FIFO_ONLY[name]
            if allowed == "bool":
                kept[name] = _bool(name, value)
            elif str(value) not in allowed:
                raise _bad(name)
            else:
                kept[name] = str(value)
        elif name == "FifoQueue" and (creating or fifo):
            if _bool(name, value) != ("true" if fifo else "false"):
                raise _bad(name) if creating else SqsError(
                    "InvalidAttributeValue", "Invalid value for the parameter FifoQueue. Reason: "
                    "Modifying queue type is not supported.")
        elif name in ("DeduplicationScope", "FifoThroughputLimit"):
            raise SqsError("InvalidAttributeName", f"You can specify the {name} only when "
                           "FifoQueue is set to true.")
        else:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
    return props, kept


def merged(*layers: dict) -> dict:
    """The property `attributes` from layers of kept attributes, later ones winning; an empty
    value of a REMOVABLE attribute removes it."""
    attributes = {k: v for layer in layers for k, v in layer.items()}
    return {k: v for k, v in attributes.items() if not (k in REMOVABLE and v == "")}


def new_queue_properties(props: dict, kept: dict, fifo: bool, tags: dict) -> dict:
    """The whole set of own properties of a queue CreateQueue makes (SQS's defaults filled in)."""
    now = str(int(time.time()))
    attributes = merged({"ReceiveMessageWaitTimeSeconds": DEFAULTS["ReceiveMessageWaitTimeSeconds"],
                         "CreatedTimestamp": now, "LastModifiedTimestamp": now}, kept)
    if fifo:
        attributes.setdefault("ContentBasedDeduplication", "false")
    return {"timeout": 30.0, "delay": 0.0, "max_body_bytes": int(DEFAULTS["MaximumMessageSize"]),
            "retry": UNLIMITED_RETRY, "dead_letter_queue": "",
            "retention": float(DEFAULTS["MessageRetentionPeriod"]), **props, "fifo": fifo,
            "attributes": attributes, "tags": tags}


def is_fifo(name: str, props: dict) -> bool:
    """Whether a queue is a FIFO queue to SQS clients: its property `fifo`."""
    return bool(props.get("fifo"))


def max_message_size(props: dict) -> int:
    """The largest message (body and attributes) the queue takes through the SQS API."""
    return min(props["max_body_bytes"], MAPPED["MaximumMessageSize"][1])


def current(caller: Caller, name: str, info: dict) -> dict:
    """Every attribute of a queue, as text, from queue_get's answer (with its hidden counts)."""
    props = info["properties"]
    kept = props.get("attributes") or {}
    fifo = is_fifo(name, props)
    now = str(int(time.time()))
    values = {
        "QueueArn": caller.arn(name),
        "ApproximateNumberOfMessages": str(info.get("ready", 0)),
        "ApproximateNumberOfMessagesNotVisible": str(info.get("in_flight", 0)),
        "ApproximateNumberOfMessagesDelayed": str(info.get("delayed", 0)),
        "CreatedTimestamp": kept.get("CreatedTimestamp", now),
        "LastModifiedTimestamp": kept.get("LastModifiedTimestamp", now),
        "VisibilityTimeout": str(int(round(props["timeout"]))),
        "MaximumMessageSize": str(max_message_size(props)),
        # A queue without a retention (mq's default) keeps messages at least as long as any.
        "MessageRetentionPeriod": str(int(props["retention"]) or MAPPED["MessageRetentionPeriod"][1]),
        "DelaySeconds": str(int(props["delay"])),
        "ReceiveMessageWaitTimeSeconds": kept.get("ReceiveMessageWaitTimeSeconds", "0"),
        "SqsManagedSseEnabled": kept.get("SqsManagedSseEnabled", "true"),
    }
    if has_redrive_policy(props):
        values["RedrivePolicy"] = orjson.dumps({
            "deadLetterTargetArn": caller.arn(props["dead_letter_queue"]),
            "maxReceiveCount": receive_count(props["retry"], kept)}).decode()
    for key in ("Policy", "RedriveAllowPolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"):
        if kept.get(key):
            values[key] = kept[key]
    if fifo:
        values["FifoQueue"] = "true"
        values["ContentBasedDeduplication"] = kept.get("ContentBasedDeduplication", "false")
        values["DeduplicationScope"] = kept.get("DeduplicationScope", "queue")
        values["FifoThroughputLimit"] = kept.get("FifoThroughputLimit", "perQueue")
    return values


def has_redrive_policy(props: dict) -> bool:
    """Whether a queue shows a RedrivePolicy: whether it dead-letters."""
    return props["retry"] >= 0


def receive_count(retry: int, kept: dict) -> int:
    """The maxReceiveCount of a queue: the one given, when `retry` is still what it made."""
    given = kept.get(RECEIVE_COUNT, "")
    if given.isdigit() and min(int(given) - 1, MAX_RETRY) == retry:
        return int(given)
    return retry + 1


def check_names(names: list[str]) -> None:
    """InvalidAttributeName for a name GetQueueAttributes does not know."""
    for name in names:
        if name not in KNOWN:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")


def wants_counts(names: list[str]) -> bool:
    """Whether the answer needs the in-flight and delayed counts (a listing of delay/)."""
    return any(n in ("All", "ApproximateNumberOfMessagesNotVisible",
                     "ApproximateNumberOfMessagesDelayed") for n in names)
