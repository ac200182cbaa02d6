"""The SQS operations on queues: create, find, list, delete, purge, attributes, tags, dead-letter
sources and message move tasks (redrive)."""

import base64
import time
import uuid

import orjson

from mq.http import access
from mq.http.sqs import attributes, authorization
from mq.http.sqs.errors import SqsError, invalid, missing, queue_missing
from mq.http.sqs.names import (
    Caller,
    check_new_name,
    existing_name,
    integer,
    names_list,
    queue_from_arn,
    queue_from_url,
    text,
)
from mq.http.sqs.service import SqsService
from mq.operations import PropsPut, Purge, QueueDelete, QueuePut, Redrive
from mq.properties import named_queues

MAX_TAGS = 50
MAX_TAG_KEY, MAX_TAG_VALUE = 128, 256
TAG_KEYS = "Tag keys must be between 1 and 128 characters in length."
#: Seconds after a purge in which another purge of the queue is refused.
PURGE_SECONDS = 60
#: Seconds after a DeleteQueue in which CreateQueue of the same name is refused.
DELETED_SECONDS = 60


async def create_queue(service: SqsService, caller: Caller, params: dict) -> dict:
    """CreateQueue: a new queue with the attributes given, or the URL of an identical one."""
    given = params.get("Attributes") or {}
    if not isinstance(given, dict):
        raise invalid("Attributes must be a map of names to values.")
    name = params.get("QueueName")
    fifo = str(given.get("FifoQueue", "false")).lower() == "true"
    name = check_new_name(name, fifo)
    if name.endswith(".fifo") and not fifo:
        raise invalid("Can only include alphanumeric characters, hyphens, or underscores. "
                      "1 to 80 in length")
    authorization.check(caller.token, "CreateQueue", [name])
    authorization.check_attributes(caller.token, "CreateQueue", given)
    props, kept = await attributes.to_properties(given, fifo, service.fifo_or_none, creating=True,
                                                  caller=caller)
    authorization.check(caller.token, "CreateQueue", named_queues(props))
    tags = check_tags(params.get("tags") or params.get("Tags") or {}, name)
    try:
        info = await service.queue(name)
    except SqsError as err:
        if err.name != "QueueDoesNotExist":
            raise
        info = None
    deleted = service.deleted.get(name)
    if info is None and deleted is not None and time.monotonic() - deleted < DELETED_SECONDS:
        raise SqsError("QueueDeletedRecently", "You must wait 60 seconds after deleting a queue "
                       "before you can create another with the same name.")
    if info is not None:
        now = attributes.current(caller, name, info)
        for key, value in given.items():
            if not same_value(key, value, now):
                raise SqsError("QueueNameExists", "A queue already exists with the same name and "
                               f"a different value for attribute {key}")
        return {"QueueUrl": caller.queue_url(name)}
    await service.call(PropsPut(
        queue=name, properties=attributes.new_queue_properties(props, kept, fifo, tags)))
    await service.call(QueuePut(queue=name))
    return {"QueueUrl": caller.queue_url(name)}


def same_value(key: str, value, now: dict) -> bool:
    """Whether an attribute given to CreateQueue equals the existing queue's."""
    have = now.get(key)
    if key == "RedrivePolicy":
        if value in ("", None, "{}"):
            return have is None
        try:
            want = orjson.loads(value) if isinstance(value, str) else value
            mine = orjson.loads(have) if have else {}
            return (str(want["deadLetterTargetArn"]).rsplit(":", 1)[-1]
                    == mine.get("deadLetterTargetArn", "").rsplit(":", 1)[-1]
                    and int(str(want["maxReceiveCount"])) == mine.get("maxReceiveCount"))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return False
    if key in ("FifoQueue", "ContentBasedDeduplication", "SqsManagedSseEnabled"):
        return (have or "false") == str(value).lower()
    if key in attributes.REMOVABLE:
        return (have or "") == str(value)  # "" is the attribute's absence.
    return have == str(value)


async def get_queue_url(service: SqsService, caller: Caller, params: dict) -> dict:
    """GetQueueUrl: the URL of an existing queue."""
    name = existing_name(text(params, "QueueName", required=True))
    authorization.check(caller.token, "GetQueueUrl", [name])
    if text(params, "QueueOwnerAWSAccountId") not in (None, caller.account):
        raise queue_missing()  # Another account's queue: none is here.
    await service.queue(name)
    return {"QueueUrl": caller.queue_url(name)}


def page(names: list[str], params: dict) -> tuple[list[str], str | None]:
    """One page of sorted names: MaxResults (1 to 1000) from after NextToken."""
    limit = integer(params, "MaxResults", None, 1, 1000,
                    "MaxResults must be an integer between 1 and 1000.")
    token = params.get("NextToken")
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise invalid("Invalid NextToken value.") from None
        names = [n for n in names if n > after]
    if limit is None:
        return names[:1000], None
    return names[:limit], (base64.urlsafe_b64encode(names[limit - 1].encode()).decode()
                           if len(names) > limit else None)


async def list_queues(service: SqsService, caller: Caller, params: dict) -> dict:
    """ListQueues: queue URLs, by prefix, a page at a time."""
    prefix = text(params, "QueueNamePrefix") or ""
    names, token = page(access.allowed(caller.token, [n for n in service.queue_names()
                                                      if n.startswith(prefix)]), params)
    result: dict[str, list[str] | str] = {}
    if names:
        result["QueueUrls"] = [caller.queue_url(n) for n in names]
    if token:
        result["NextToken"] = token
    return result


async def delete_queue(service: SqsService, caller: Caller, params: dict) -> None:
    """DeleteQueue: the queue and every message in it."""
    name = queue_from_url(params)
    await service.call(QueueDelete(queue=name))
    service.purges.pop(name, None)
    now = time.monotonic()
    # In place: the dict is shared by every request's SqsService (acting).
    for gone in [q for q, t in service.deleted.items() if now - t >= DELETED_SECONDS]:
        del service.deleted[gone]
    service.deleted[name] = now


async def purge_queue(service: SqsService, caller: Caller, params: dict) -> None:
    """PurgeQueue: every message of the queue, in every state; one purge a minute, as in SQS."""
    name = queue_from_url(params)
    last = service.purges.get(name)
    if last is not None and time.monotonic() - last < PURGE_SECONDS:
        await service.queue(name)
        raise SqsError("PurgeQueueInProgress", f"Only one PurgeQueue operation on {name} is "
                       f"allowed every {PURGE_SECONDS} seconds.")
    await service.call(Purge(queue=name, keys=True))  # SQS forgets de-duplication ids on a purge.
    service.purges[name] = time.monotonic()


async def get_queue_attributes(service: SqsService, caller: Caller, params: dict) -> dict:
    """GetQueueAttributes: the attributes named (All for every one)."""
    name = queue_from_url(params)
    wanted = names_list(params, "AttributeNames")
    attributes.check_names(wanted)
    info = await service.queue(name, hidden=attributes.wants_counts(wanted))
    values = attributes.current(caller, name, info)
    chosen = values if "All" in wanted else {k: values[k] for k in wanted if k in values}
    return {"Attributes": chosen} if chosen else {}


async def set_queue_attributes(service: SqsService, caller: Caller, params: dict) -> None:
    """SetQueueAttributes: change the attributes given."""
    name = queue_from_url(params)
    given = params.get("Attributes")
    if given is None:
        raise missing("Attributes")
    authorization.check_attributes(caller.token, "SetQueueAttributes", given)
    info = await service.queue(name)
    fifo = attributes.is_fifo(name, info["properties"])
    props, kept = await attributes.to_properties(given, fifo, service.fifo_or_none, creating=False,
                                                  caller=caller)
    authorization.check(caller.token, "SetQueueAttributes", named_queues(props))
    if props.get("dead_letter_queue") == name:
        raise invalid("Value for parameter RedrivePolicy is invalid. Reason: A queue cannot be "
                      "its own dead-letter queue.")
    own = await service.own(name)
    kept_now = attributes.merged(own.get("attributes", {}), kept,
                                 {"LastModifiedTimestamp": str(int(time.time()))})
    await service.patch(name, {**props, "attributes": kept_now})


def check_tags(tags, queue: str) -> dict:
    """Tags as SQS takes them: at most 50, keys 1 to 128 characters, values up to 256 (with
    SQS's messages)."""
    if not isinstance(tags, dict):
        raise invalid("Tags must be a map of keys to values.")
    for key, value in tags.items():
        if not 0 < len(key) <= MAX_TAG_KEY:
            raise invalid(TAG_KEYS)
        if not isinstance(value, str) or len(value) > MAX_TAG_VALUE:
            raise invalid("Tag values may only be between 0 and 256 characters in length.")
    if len(tags) > MAX_TAGS:
        raise invalid(f"Too many tags added for queue {queue}.")
    return dict(tags)


async def tag_queue(service: SqsService, caller: Caller, params: dict) -> None:
    """TagQueue: add or replace tags."""
    name = queue_from_url(params)
    tags = params.get("Tags")
    if not tags:
        raise missing("Tags")
    await service.queue(name)  # QueueDoesNotExist before any properties are written.
    own = await service.own(name)
    await service.patch(name, {"tags": check_tags({**own.get("tags", {}), **check_tags(tags, name)},
                                                  name)})


async def untag_queue(service: SqsService, caller: Caller, params: dict) -> None:
    """UntagQueue: remove tags by key."""
    name = queue_from_url(params)
    keys = names_list(params, "TagKeys")
    if not keys or not all(0 < len(k) <= MAX_TAG_KEY for k in keys):
        raise invalid(TAG_KEYS)
    await service.queue(name)
    own = await service.own(name)
    await service.patch(name, {"tags": {k: v for k, v in own.get("tags", {}).items() if k not in keys}})


async def list_queue_tags(service: SqsService, caller: Caller, params: dict) -> dict:
    """ListQueueTags: the queue's tags."""
    info = await service.queue(queue_from_url(params))
    tags = info["properties"].get("tags") or {}
    return {"Tags": tags} if tags else {}


def sources_of(service: SqsService, dead_letter_queue: str) -> list[str]:
    """The queues whose dead letters go to a queue (a redrive policy naming it)."""
    sources = []
    for name in service.queue_names():
        props = service.props.effective(name)
        if props["dead_letter_queue"] == dead_letter_queue and attributes.has_redrive_policy(props) \
                and name != dead_letter_queue:
            sources.append(name)
    return sources


async def list_dead_letter_source_queues(service: SqsService, caller: Caller, params: dict) -> dict:
    """ListDeadLetterSourceQueues: the queues whose redrive policy names this one."""
    name = queue_from_url(params)
    await service.queue(name)
    names, token = page(access.allowed(caller.token, sources_of(service, name)), params)
    result: dict[str, list[str] | str] = {"queueUrls": [caller.queue_url(n) for n in names]}
    if token:
        result["NextToken"] = token
    return result


async def check_arn_exists(service: SqsService, caller: Caller, arn: str, parameter: str) -> None:
    """ResourceNotFoundException when the queue an ARN names does not exist (a queue of another
    account or region never does here)."""
    if not caller.owns_arn(arn) or await service.fifo_or_none(queue_from_arn(arn, parameter)) is None:
        raise SqsError("ResourceNotFoundException", f"The resource that you specified for the "
                       f"{parameter} parameter doesn't exist.")


async def start_message_move_task(service: SqsService, caller: Caller, params: dict) -> dict:
    """StartMessageMoveTask: move a dead-letter queue's messages back (done at once)."""
    source_arn = text(params, "SourceArn", required=True)
    source = queue_from_arn(source_arn, "SourceArn")
    destination_arn = text(params, "DestinationArn")
    # Both queues are checked before either is looked up.
    authorization.check(caller.token, "StartMessageMoveTask", [source] + (
        [queue_from_arn(destination_arn, "DestinationArn")] if destination_arn else []))
    await check_arn_exists(service, caller, source_arn, "SourceArn")
    rate = integer(params, "MaxNumberOfMessagesPerSecond", None, 1, 500)
    sources = sources_of(service, source)
    if not sources:
        raise invalid("Source queue must be configured as a Dead Letter Queue.")
    if destination_arn:
        target = queue_from_arn(destination_arn, "DestinationArn")
        await check_arn_exists(service, caller, destination_arn, "DestinationArn")
    elif len(sources) == 1:
        target = sources[0]
    else:
        # mq does not record which queue a dead letter came from, so it cannot split them.
        raise invalid("Source queue is the Dead Letter Queue of several queues: give the "
                      "DestinationArn to move its messages to.")
    if target == source:
        raise invalid("The destination queue must not be the source queue.")
    authorization.check(caller.token, "StartMessageMoveTask", [target])
    moved = (await service.call(Redrive(queue=target, source=source)))["moved"]
    handle = base64.b64encode(orjson.dumps({"id": str(uuid.uuid4()), "source": source_arn})).decode()
    task = {"Status": "COMPLETED", "SourceArn": source_arn,
            "ApproximateNumberOfMessagesMoved": moved, "ApproximateNumberOfMessagesToMove": moved,
            "StartedTimestamp": int(time.time() * 1000)}
    if destination_arn:
        task["DestinationArn"] = destination_arn
    if rate is not None:
        task["MaxNumberOfMessagesPerSecond"] = rate
    service.tasks[source] = task
    return {"TaskHandle": handle}


async def list_message_move_tasks(service: SqsService, caller: Caller, params: dict) -> dict:
    """ListMessageMoveTasks: the last task of a dead-letter queue (tasks finish at once)."""
    source_arn = text(params, "SourceArn", required=True)
    source = queue_from_arn(source_arn, "SourceArn")
    authorization.check(caller.token, "ListMessageMoveTasks", [source])
    await check_arn_exists(service, caller, source_arn, "SourceArn")
    task = service.tasks.get(source)
    return {"Results": [task] if task else []}


async def cancel_message_move_task(service: SqsService, caller: Caller, params: dict) -> dict:
    """CancelMessageMoveTask: tasks finish at once, so there is never one to cancel."""
    handle = text(params, "TaskHandle", required=True)
    try:
        source_arn = orjson.loads(base64.b64decode(handle, validate=True))["source"]
    except (ValueError, KeyError, TypeError):
        raise invalid("Value for parameter TaskHandle is invalid.") from None
    source = queue_from_arn(source_arn, "SourceArn")
    authorization.check(caller.token, "CancelMessageMoveTask", [source])
    await check_arn_exists(service, caller, source_arn, "SourceArn")
    raise SqsError("ResourceNotFoundException", "Task does not exist.")
