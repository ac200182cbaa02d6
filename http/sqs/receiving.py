"""ReceiveMessage and the replies to a delivery (DeleteMessage, ChangeMessageVisibility and
their batches): the same fetch, ack, nack and extend ops mq's own routes send to the queue's
fetch actor. A receipt handle is mq's receipt, {id}.{delivery}."""

import asyncio
import time
from collections.abc import Callable

from mq import trace_context
from mq.delivery import parse_receipt
from mq.errors import Conflict, Invalid, MqError, NotFound
from mq.http.messages import connection_closed
from mq.http.sqs import batches
from mq.http.sqs.attributes import MIN_TIMEOUT, is_fifo
from mq.http.sqs.errors import SqsError, from_mq, invalid, missing, queue_missing
from mq.http.sqs.md5 import md5_of_attributes, md5_of_body
from mq.http.sqs.message_attributes import BAD_CHARACTER, as_sent, selected
from mq.http.sqs.names import Caller, integer, names_list, queue_from_url
from mq.http.sqs.sending import sequence_number
from mq.http.sqs.service import SqsService
from mq.operations import Ack, Extend, Fetch, Fetched, Nack

SYSTEM_ATTRIBUTES = ("SenderId", "SentTimestamp", "ApproximateReceiveCount",
                     "ApproximateFirstReceiveTimestamp", "SequenceNumber", "MessageDeduplicationId",
                     "MessageGroupId", "AWSTraceHeader")
MAX_VISIBILITY = 43200
#: Seconds between checks that the client of a waiting long poll is still connected.
CLIENT_CHECK_SECONDS = 0.5


def receipt_of(handle) -> tuple[str, int]:
    """(message id, delivery) of a receipt handle (mq.delivery.parse_receipt reads it);
    ReceiptHandleIsInvalid when it is not one."""
    if handle is None or handle == "":
        raise missing("ReceiptHandle")
    try:
        return parse_receipt(handle)
    except Invalid:
        raise SqsError("ReceiptHandleIsInvalid",
                       f'The input receipt handle "{handle}" is not a valid receipt handle.') from None


def system_attributes(result: Fetched, names: list[str], caller: Caller, fifo: bool) -> dict:
    """The system attributes of a received message that the receive asked for."""
    wanted = SYSTEM_ATTRIBUTES if "All" in names else [n for n in names if n in SYSTEM_ATTRIBUTES]
    stored = result.get("attributes") or {}
    values = {
        "SenderId": caller.account,
        "SentTimestamp": str(result["created_ms"]),
        "ApproximateReceiveCount": str(result["attempts"]),
        "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000) if result["attempts"] == 1
                                                else result["created_ms"]),
    }
    if result.get("group"):
        values["MessageGroupId"] = result["group"]
    if stored.get("d"):
        values["MessageDeduplicationId"] = stored["d"]
    if fifo:
        values["SequenceNumber"] = sequence_number(result["id"])
    sent = (stored.get("s") or {}).get("AWSTraceHeader")
    if sent:
        values["AWSTraceHeader"] = sent["StringValue"]
    elif traced := trace_context.parse(stored.get("tp")):  # Added with a W3C traceparent:
        values["AWSTraceHeader"] = trace_context.to_xray(traced["tp"])  # its X-Ray form.
    return {name: values[name] for name in wanted if name in values}


def as_message(result: Fetched, caller: Caller, system_names: list, attribute_names: list,
               fifo: bool) -> dict:
    """A fetched message in the shape of ReceiveMessage's Messages."""
    # A body added through mq's API may hold what no SQS body does: bytes that are not UTF-8,
    # characters XML 1.0 cannot carry (the query protocol's answer would not parse).
    body = BAD_CHARACTER.sub("\ufffd", result["body"].decode("utf-8", errors="replace"))
    message: dict = {"MessageId": result["id"], "ReceiptHandle": result["receipt"],
               "MD5OfBody": md5_of_body(body), "Body": body}
    chosen = selected((result.get("attributes") or {}).get("m") or {}, attribute_names)
    if chosen:
        message["MessageAttributes"] = as_sent(chosen)
        message["MD5OfMessageAttributes"] = md5_of_attributes(chosen)
    system = system_attributes(result, system_names, caller, fifo)
    if system:
        message["Attributes"] = system
    return message


async def receive_message(service: SqsService, caller: Caller, params: dict) -> dict:
    """ReceiveMessage: up to MaxNumberOfMessages, waiting up to WaitTimeSeconds for the first."""
    queue = queue_from_url(params)
    count = integer(params, "MaxNumberOfMessages", 1, 1, 10)
    visibility = integer(params, "VisibilityTimeout", None, 0, MAX_VISIBILITY)
    wait = integer(params, "WaitTimeSeconds", None, 0, 20, "Must be >= 0 and <= 20, if provided.")
    system_names = names_list(params, "AttributeNames") + names_list(params, "MessageSystemAttributeNames")
    attribute_names = names_list(params, "MessageAttributeNames")
    props = (await service.queue(queue))["properties"]
    if wait is None:
        wait = int((props.get("attributes") or {}).get("ReceiveMessageWaitTimeSeconds", 0))
    fetched: list[Fetched] = []
    holder: str | None = None
    while len(fetched) < count:
        seconds = 0 if fetched else wait
        watch: list[asyncio.Future] = []

        def watching(cancel: Callable[[], None], watch=watch, seconds=seconds) -> None:
            watch.append(asyncio.ensure_future(watch_client(caller.connection, seconds, cancel)))

        try:
            result = await service.queues.run(
                service.token, Fetch(queue=queue, wait=seconds, holder=holder),
                on_sent=watching if seconds and caller.connection is not None else None)
        except NotFound:
            raise queue_missing() from None
        except MqError as err:
            if fetched:
                break  # Answer with what was claimed; the next receive meets the error.
            raise from_mq(err) from None
        finally:
            for task in watch:
                task.cancel()
        if result.get("empty") or result.get("cancelled"):
            break
        holder = result.get("holder", holder)
        fetched.append(result)
    if visibility is not None:
        await asyncio.gather(*(set_visibility(service, queue, r["id"], r["receipt"], visibility)
                               for r in fetched), return_exceptions=True)
    fifo = is_fifo(queue, props)
    messages = [as_message(r, caller, system_names, attribute_names, fifo) for r in fetched]
    if len(fetched) == 1:
        traceparent = trace_context.of_message(fetched[0].get("attributes")).get("traceparent")
        if traceparent:
            caller.log_fields["traceparent"] = traceparent
    return {"Messages": messages} if messages else {}


async def watch_client(connection, wait: float, cancel) -> None:
    """While a long poll waits, look every CLIENT_CHECK_SECONDS whether its client hung up, and
    then cancel the poll, so its fetch actor claims no message for nobody (Tornado reads
    nothing during a request, so it would not notice by itself)."""
    sock = getattr(getattr(connection, "stream", None), "socket", None)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        await asyncio.sleep(CLIENT_CHECK_SECONDS)
        if connection_closed(sock):
            cancel()
            return


async def set_visibility(service: SqsService, queue: str, message_id: str, receipt: str,
                         seconds: int) -> None:
    """Hide an in-flight delivery for `seconds` from now; 0 makes it visible at once."""
    if seconds == 0:
        await service.queues.run(service.token, Nack(queue=queue, id=message_id, receipt=receipt))
    else:
        await service.queues.run(service.token, Extend(
            queue=queue, id=message_id, receipt=receipt, seconds=float(max(seconds, MIN_TIMEOUT))))


def expired(error: Conflict, delivery: int) -> bool:
    """Whether a stale receipt's delivery timed out and nobody has received the message since
    (the fetch actor says it is ready with this delivery's count)."""
    return f"now ready (delivery {delivery})" in error.message


async def delete_one(service: SqsService, queue: str, handle) -> None:
    """Delete a delivery, as SQS deletes: a receipt whose visibility timeout ran out while
    nobody received the message since still deletes it in a standard queue and is refused in
    a FIFO queue; a receipt of an earlier delivery succeeds and deletes nothing."""
    message_id, delivery = receipt_of(handle)
    try:
        await service.queues.run(service.token, Ack(queue=queue, id=message_id, receipt=handle))
    except Conflict as err:
        if not expired(err, delivery):
            return
        if is_fifo(queue, (await service.queue(queue))["properties"]):
            raise invalid(f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The "
                          "receipt handle has expired.") from None
        await delete_ready(service, queue, message_id)
    except NotFound:
        await service.queue(queue)  # QueueDoesNotExist, or the message is already gone: done.
    except MqError as err:
        raise from_mq(err) from None


async def delete_ready(service: SqsService, queue: str, message_id: str) -> None:
    """Delete a message whatever its state (mq's delete by id); one already gone is done."""
    try:
        await service.queues.run(service.token, Ack(queue=queue, id=message_id))
    except NotFound:
        pass
    except MqError as err:
        raise from_mq(err) from None


async def change_one(service: SqsService, queue: str, handle, params: dict) -> None:
    """Change the visibility timeout of an in-flight delivery."""
    message_id, delivery = receipt_of(handle)
    seconds = integer(params, "VisibilityTimeout", None, 0, MAX_VISIBILITY)
    if seconds is None:
        raise missing("VisibilityTimeout")
    try:
        await set_visibility(service, queue, message_id, handle, seconds)
    except NotFound:
        await service.queue(queue)
        raise not_changeable(handle) from None
    except Conflict as err:
        if expired(err, delivery):
            return  # Visible again and not received since: SQS accepts the change.
        raise not_changeable(handle) from None
    except MqError as err:
        raise from_mq(err) from None


def not_changeable(handle) -> SqsError:
    """SQS's answer to a visibility change of a deleted message or of an earlier delivery."""
    return invalid(f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message "
                   "does not exist or is not available for visibility timeout change.")


async def delete_message(service: SqsService, caller: Caller, params: dict) -> None:
    """DeleteMessage."""
    await delete_one(service, queue_from_url(params), params.get("ReceiptHandle"))


async def change_message_visibility(service: SqsService, caller: Caller, params: dict) -> None:
    """ChangeMessageVisibility."""
    await change_one(service, queue_from_url(params), params.get("ReceiptHandle"), params)


async def _batch(service: SqsService, params: dict, kind: str, apply) -> dict:
    """Apply one reply to each entry of a batch; each fails alone."""
    queue = queue_from_url(params)
    entries = batches.check_entries(params.get("Entries"), kind)
    await service.queue(queue)
    outcomes = await asyncio.gather(*(apply(queue, e) for e in entries), return_exceptions=True)
    successful, failed = [], []
    for entry, outcome in zip(entries, outcomes):
        if isinstance(outcome, SqsError):
            failed.append(batches.failure(entry["Id"], outcome))
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            successful.append({"Id": entry["Id"]})
    return batches.answer(successful, failed)


async def delete_message_batch(service: SqsService, caller: Caller, params: dict) -> dict:
    """DeleteMessageBatch."""
    return await _batch(service, params, "DeleteMessageBatch",
                        lambda queue, e: delete_one(service, queue, e.get("ReceiptHandle")))


async def change_message_visibility_batch(service: SqsService, caller: Caller, params: dict) -> dict:
    """ChangeMessageVisibilityBatch."""
    return await _batch(service, params, "ChangeMessageVisibilityBatch",
                        lambda queue, e: change_one(service, queue, e.get("ReceiptHandle"), e))
