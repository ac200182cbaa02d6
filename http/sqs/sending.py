"""SendMessage and SendMessageBatch: a message checked as SQS checks it, then the same `add`
mq's own POST /{queue}/messages sends to a save actor, with its group, de-duplication key and
attributes (kept in the message file's header)."""

import hashlib
import re
import time
from dataclasses import dataclass

from mq import trace_context
from mq.errors import MqError, NotFound
from mq.http.sqs import batches
from mq.http.sqs.attributes import is_fifo, max_message_size
from mq.http.sqs.errors import SqsError, from_mq, invalid, missing, queue_missing
from mq.http.sqs.md5 import md5_of_attributes, md5_of_body
from mq.http.sqs.message_attributes import BAD_CHARACTER, check_attributes, check_system_attributes, size
from mq.http.sqs.names import Caller, integer, queue_from_url
from mq.http.sqs.service import SqsService
from mq.operations import Add

#: Group and de-duplication ids: 1 to 128 printable ASCII characters.
FIFO_ID = re.compile(r"[!-~]{1,128}")
CONTENT_TYPE = "text/plain; charset=utf-8"
#: Most bytes of bodies in one SendMessageBatch, whatever the queue's MaximumMessageSize (1 MiB
#: since 2025, as a message).
MAX_BATCH_BYTES = 1048576


@dataclass
class Outgoing:
    """A checked message, ready to add."""

    body: str
    attributes: dict
    system_attributes: dict
    delay: int | None
    group: str | None
    dedup_id: str | None
    dedup_key: str | None


def sequence_number(message_id: str) -> str:
    """The SequenceNumber of a FIFO message: its id (time-ordered) as a decimal number."""
    return str(int(message_id.replace("-", ""), 16))


def _fifo_id(params: dict, name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not FIFO_ID.fullmatch(value):
        raise invalid(f"Value {value} for parameter {name} is invalid. Reason: {name} can only "
                      "include alphanumeric and punctuation characters. 1 to 128 in length.")
    return value


def check_message(params: dict, queue: str, props: dict) -> Outgoing:
    """A SendMessage (or batch entry) checked against its queue's attributes."""
    body = params.get("MessageBody")
    if body is None or body == "":
        raise missing("MessageBody")
    if not isinstance(body, str):
        raise invalid("Value for parameter MessageBody is invalid. Reason: must be a string.")
    bad = BAD_CHARACTER.search(body)
    if bad:
        raise SqsError("InvalidMessageContents", f"Invalid binary character '#x{ord(bad.group()):X}' "
                       "was found in the message body, the set of allowed characters is #x9 | "
                       "#xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
    attributes = check_attributes(params.get("MessageAttributes"))
    system_attributes = check_system_attributes(params.get("MessageSystemAttributes"))
    limit = max_message_size(props)
    if len(body.encode("utf-8")) + size(attributes) > limit:
        raise invalid("One or more parameters are invalid. Reason: Message must be shorter than "
                      f"{limit} bytes.")
    delay = integer(params, "DelaySeconds", None, 0, 900, "DelaySeconds must be >= 0 and <= 900.")
    group, dedup = _fifo_id(params, "MessageGroupId"), _fifo_id(params, "MessageDeduplicationId")
    key = None
    if is_fifo(queue, props):
        kept = props.get("attributes") or {}
        if delay:
            raise invalid(f"Value {delay} for parameter DelaySeconds is invalid. Reason: The "
                          "request include parameter that is not valid for this queue type.")
        if not group:
            raise missing("MessageGroupId")
        if not dedup:
            if kept.get("ContentBasedDeduplication") != "true":
                raise invalid("The queue should either have ContentBasedDeduplication enabled or "
                              "MessageDeduplicationId provided explicitly")
            dedup = hashlib.sha256(body.encode("utf-8")).hexdigest()
        key = dedup if kept.get("DeduplicationScope") != "messageGroup" else \
            hashlib.sha256(f"{group}\0{dedup}".encode()).hexdigest()
    elif dedup:
        raise invalid(f"Value {dedup} for parameter MessageDeduplicationId is invalid. Reason: "
                      "The request include parameter that is not valid for this queue type.")
    return Outgoing(body, attributes, system_attributes, delay, group, dedup, key)


async def add(service: SqsService, queue: str, message: Outgoing, fifo: bool) -> dict:
    """Store a checked message through a save actor; its SendMessage result."""
    stored: dict[str, object] = {}
    if message.attributes:
        stored["m"] = message.attributes
    if message.system_attributes:
        stored["s"] = message.system_attributes
    if message.dedup_id:
        stored["d"] = message.dedup_id
    # An explicit DelaySeconds, 0 too, overrides the queue's: a due time not ahead means now,
    # without the queue's delay; only an absent one (None) lets the save actor apply it.
    due = None if message.delay is None else time.time() + message.delay
    try:
        result = await service.queues.run(service.token, Add(
            queue=queue, body=message.body.encode("utf-8"), content_type=CONTENT_TYPE,
            due=due, dedup_id=message.dedup_key, group=message.group, attributes=stored or None))
    except NotFound:
        raise queue_missing() from None
    except MqError as err:
        raise from_mq(err) from None
    reply = {"MD5OfMessageBody": md5_of_body(message.body), "MessageId": result["id"]}
    if message.attributes:
        reply["MD5OfMessageAttributes"] = md5_of_attributes(message.attributes)
    if message.system_attributes:
        reply["MD5OfMessageSystemAttributes"] = md5_of_attributes(message.system_attributes)
    if fifo:
        reply["SequenceNumber"] = sequence_number(result["id"])
    return reply


async def send_message(service: SqsService, caller: Caller, params: dict) -> dict:
    """SendMessage."""
    queue = queue_from_url(params)
    props = (await service.queue(queue))["properties"]
    message = check_message(params, queue, props)
    traceparent = trace_context.of_message({"s": message.system_attributes}).get("traceparent")
    if traceparent:
        caller.log_fields["traceparent"] = traceparent
    return await add(service, queue, message, is_fifo(queue, props))


async def send_message_batch(service: SqsService, caller: Caller, params: dict) -> dict:
    """SendMessageBatch: each entry stored or failed alone, in order (FIFO order holds)."""
    queue = queue_from_url(params)
    entries = batches.check_entries(params.get("Entries"), "SendMessageBatch")
    props = (await service.queue(queue))["properties"]
    total = sum(len(str(e.get("MessageBody") or "").encode("utf-8")) for e in entries)
    if total > MAX_BATCH_BYTES:
        raise SqsError("BatchRequestTooLong", f"Batch requests cannot be longer than "
                       f"{MAX_BATCH_BYTES} bytes. You have sent {total} bytes.")
    fifo = is_fifo(queue, props)
    checked: list[Outgoing | SqsError] = []
    for entry in entries:
        try:
            checked.append(check_message(entry, queue, props))
        except SqsError as err:
            if fifo and ("MessageGroupId" in err.message or "MessageDeduplicationId provided" in err.message):
                raise  # The whole batch, with the entry's own code, as SQS answers it.
            checked.append(err)
    successful, failed = [], []
    for entry, message in zip(entries, checked):
        try:
            if isinstance(message, SqsError):
                raise message
            reply = await add(service, queue, message, fifo)
        except SqsError as err:
            if err.name == "QueueDoesNotExist":
                raise
            failed.append(batches.failure(entry["Id"], err))
            continue
        successful.append({"Id": entry["Id"], **reply})
    return batches.answer(successful, failed)
