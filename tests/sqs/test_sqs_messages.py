"""SQS message operations with boto3 against a live daemon: send and receive with attributes
and digests (boto3 checks them), batches and their limits, visibility, delete, dead letters and
their redrive, FIFO groups and de-duplication, and one store shared with mq's own HTTP API."""

import hashlib
import json
import socket
import time

import pytest
from botocore.exceptions import ClientError

from sqs_support import unique_name
from support import poll_for


def code_of(call, *args, **kwargs) -> str:
    """The error code the call is refused with."""
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    return caught.value.response["Error"]["Code"]


def receive(sqs, url, **kwargs) -> list[dict]:
    """The messages one ReceiveMessage returns."""
    return sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])


def test_a_message_with_attributes_round_trips_with_sqs_digests(sqs, queue_url):
    attributes = {"color": {"DataType": "String", "StringValue": "blue"},
                  "size": {"DataType": "Number", "StringValue": "42"},
                  "raw": {"DataType": "Binary", "BinaryValue": b"\x00\xffbytes"},
                  "kind": {"DataType": "String.custom", "StringValue": "x"}}
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="héllo ✓", MessageAttributes=attributes,
                            MessageSystemAttributes={"AWSTraceHeader": {
                                "DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"}})
    assert sent["MD5OfMessageBody"] == hashlib.md5("héllo ✓".encode()).hexdigest()
    got = receive(sqs, queue_url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    assert len(got) == 1
    message = got[0]
    assert message["Body"] == "héllo ✓" and message["MessageId"] == sent["MessageId"]
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert message["Attributes"]["AWSTraceHeader"].startswith("Root=1-")
    assert abs(int(message["Attributes"]["SentTimestamp"]) - time.time() * 1000) < 60_000
    only = receive(sqs, queue_url, VisibilityTimeout=0)  # Not visible: nothing.
    assert only == []


#: Attributes and the digests Amazon SQS answers them with (as recorded in public SQS test
#: suites): custom type labels, numbers and a binary value.
KNOWN_DIGESTS = [
    ({"timestamp": {"DataType": "Number.java.lang.Long", "StringValue": "1493147359900"}},
     "2e2e4876d8e0bd6b8c2c8f556831c349"),
    ({"id": {"StringValue": "453ae55e-f03b-21a6-a4b1-70c2e2e8fe71", "DataType": "String"},
      "mybin": {"BinaryValue": b"kekchebukek", "DataType": "Binary"},
      "timestamp": {"StringValue": "1603134247654", "DataType": "Number.java.lang.Long"},
      "contentType": {"StringValue": "application/json", "DataType": "String"}},
     "049075255ebc53fb95f7f9f3cedf3c50"),
]


@pytest.mark.parametrize("attributes,digest", KNOWN_DIGESTS)
def test_digests_are_the_ones_sqs_gives(sqs, queue_url, attributes, digest):
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="derp", MessageAttributes=attributes)
    assert sent["MD5OfMessageBody"] == "58fd9edd83341c29f1aebba81c31e257"
    assert sent["MD5OfMessageAttributes"] == digest
    got = receive(sqs, queue_url, MessageAttributeNames=["All"])
    assert got[0]["MD5OfMessageAttributes"] == digest


def test_receive_filters_attributes_and_counts_receives(sqs):
    url = sqs.create_queue(QueueName=unique_name(), Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes={
        "trace.id": {"DataType": "String", "StringValue": "1"},
        "other": {"DataType": "String", "StringValue": "2"}})
    first = receive(sqs, url, MessageAttributeNames=["trace.*"], AttributeNames=["ApproximateReceiveCount"])
    assert list(first[0]["MessageAttributes"]) == ["trace.id"]
    second = poll_for(lambda: receive(sqs, url, AttributeNames=["All"], WaitTimeSeconds=1), 10)
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second[0]["ReceiptHandle"] != first[0]["ReceiptHandle"]
    assert "MessageAttributes" not in second[0]


def test_send_is_checked_as_sqs_checks_it(sqs, queue_url):
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="") == "MissingParameter"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="a\x00b") == "InvalidMessageContents"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x" * (1024 * 1024 + 1)) == \
        "InvalidParameterValue"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", DelaySeconds=901) == \
        "InvalidParameterValue"
    too_many = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x",
                   MessageAttributes=too_many) == "InvalidParameterValue"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "AWS.reserved": {"DataType": "String", "StringValue": "v"}}) == "InvalidParameterValue"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "n": {"DataType": "Number", "StringValue": "ten"}}) == "InvalidParameterValue"
    assert code_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "s": {"DataType": "String", "StringValue": "bad\x08"}}) == "InvalidParameterValue"
    assert sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "attr.1øßä": {"DataType": "String", "StringValue": "valid"}})["MD5OfMessageAttributes"]
    assert code_of(sqs.send_message, QueueUrl=queue_url + "-gone", MessageBody="x") == \
        "AWS.SimpleQueueService.NonExistentQueue"
    assert sqs.send_message(QueueUrl=queue_url, MessageBody="x" * (1024 * 1024))["MessageId"]


def test_batches_answer_each_entry_and_keep_sqs_limits(sqs, queue_url):
    result = sqs.send_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": ""},
        {"Id": "c", "MessageBody": "three", "DelaySeconds": 0}])
    assert [e["Id"] for e in result["Successful"]] == ["a", "c"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in result["Failed"]] == \
        [("b", "MissingParameter", True)]
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "MessageBody": "m"} for i in range(11)])
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": "x", "MessageBody": "m"}, {"Id": "x", "MessageBody": "m"}])
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": "bad id", "MessageBody": "m"}])
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[])
    with pytest.raises(sqs.exceptions.BatchRequestTooLong):
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "MessageBody": "x" * 400_000} for i in range(3)])
    got = receive(sqs, queue_url, MaxNumberOfMessages=10)
    assert sorted(m["Body"] for m in got) == ["one", "three"]
    deleted = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "r0", "ReceiptHandle": got[0]["ReceiptHandle"]},
        {"Id": "r1", "ReceiptHandle": got[1]["ReceiptHandle"]}, {"Id": "bad", "ReceiptHandle": "junk"}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["r0", "r1"]
    assert [(e["Id"], e["Code"]) for e in deleted["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    assert code_of(sqs.receive_message, QueueUrl=queue_url, MaxNumberOfMessages=11) == \
        "InvalidParameterValue"


def test_visibility_can_be_changed_and_a_delete_is_final(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="v")
    message = receive(sqs, queue_url)[0]
    handle = message["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    again = receive(sqs, queue_url, WaitTimeSeconds=2)[0]
    assert again["MessageId"] == message["MessageId"]
    # The first receipt is stale now: SQS refuses a visibility change, and accepts a delete
    # that deletes nothing.
    assert code_of(sqs.change_message_visibility, QueueUrl=queue_url, ReceiptHandle=handle,
                   VisibilityTimeout=5) == "InvalidParameterValue"
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=handle)
    changed = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
        {"Id": "now", "ReceiptHandle": again["ReceiptHandle"], "VisibilityTimeout": 60},
        {"Id": "old", "ReceiptHandle": handle, "VisibilityTimeout": 60}])
    assert [e["Id"] for e in changed["Successful"]] == ["now"]
    assert [e["Code"] for e in changed["Failed"]] == ["InvalidParameterValue"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=again["ReceiptHandle"])
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=again["ReceiptHandle"])  # Twice is fine.
    with pytest.raises(ClientError) as caught:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=again["ReceiptHandle"],
                                      VisibilityTimeout=5)
    assert caught.value.response["Error"]["Message"] == (
        f"Value {again['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: Message "
        "does not exist or is not available for visibility timeout change.")
    assert code_of(sqs.delete_message, QueueUrl=queue_url, ReceiptHandle="not-a-handle") == \
        "ReceiptHandleIsInvalid"
    counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == counts["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_long_poll_returns_as_soon_as_a_message_arrives(sqs, queue_url, sqs_daemon):
    import threading
    started = time.monotonic()
    threading.Timer(0.5, lambda: sqs_daemon.request(
        "POST", f"/{queue_url.rsplit('/', 1)[1]}/messages", b"late")).start()
    got = receive(sqs, queue_url, WaitTimeSeconds=10)
    assert [m["Body"] for m in got] == ["late"] and time.monotonic() - started < 8


def test_dead_letters_after_max_receive_count_and_their_redrive(sqs):
    dead = sqs.create_queue(QueueName=unique_name("dead"))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = sqs.create_queue(QueueName=unique_name("work"), Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "2"})})["QueueUrl"]
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    for _ in range(2):
        handle = receive(sqs, source, WaitTimeSeconds=2)[0]["ReceiptHandle"]
        sqs.change_message_visibility(QueueUrl=source, ReceiptHandle=handle, VisibilityTimeout=0)
    assert receive(sqs, source) == []
    assert [m["Body"] for m in receive(sqs, dead, VisibilityTimeout=0)] == ["poison"]
    task = sqs.start_message_move_task(SourceArn=dead_arn)
    assert task["TaskHandle"]
    tasks = sqs.list_message_move_tasks(SourceArn=dead_arn)["Results"]
    assert tasks[0]["Status"] == "COMPLETED" and tasks[0]["ApproximateNumberOfMessagesMoved"] == 1
    with pytest.raises(ClientError) as caught:
        sqs.cancel_message_move_task(TaskHandle="junk")
    assert caught.value.response["Error"]["Message"] == "Value for parameter TaskHandle is invalid."
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    with pytest.raises(ClientError) as caught:
        sqs.start_message_move_task(SourceArn=source_arn)
    assert caught.value.response["Error"]["Message"] == "Source queue must be configured as a Dead Letter Queue."
    back = receive(sqs, source, AttributeNames=["ApproximateReceiveCount"], WaitTimeSeconds=2)
    assert [m["Body"] for m in back] == ["poison"]
    assert back[0]["Attributes"]["ApproximateReceiveCount"] == "1"


def test_fifo_queues_deduplicate_and_keep_each_group_in_order(sqs):
    url = sqs.create_queue(QueueName=unique_name("order") + ".fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    again = sqs.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    assert again["MessageId"] == first["MessageId"] and first["SequenceNumber"]
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "1", "MessageBody": "a2", "MessageGroupId": "a"},
        {"Id": "2", "MessageBody": "b1", "MessageGroupId": "b"},
        {"Id": "3", "MessageBody": "a3", "MessageGroupId": "a", "MessageDeduplicationId": "k3"}])
    assert code_of(sqs.send_message, QueueUrl=url, MessageBody="x") == "MissingParameter"
    with pytest.raises(ClientError) as caught:  # A FIFO entry without a group fails the batch.
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "x"}])
    assert caught.value.response["Error"] == {
        "Code": "MissingParameter", "QueryErrorCode": "MissingRequiredParameterException",
        "Message": "The request must contain the parameter MessageGroupId.", "Type": "Sender"}
    assert code_of(sqs.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="a",
                   DelaySeconds=5) == "InvalidParameterValue"
    # One receive takes a group's messages in order; meanwhile the group is held.
    got = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId", "SequenceNumber"])
    assert [m["Body"] for m in got] == ["a1", "a2", "a3", "b1"]  # A group together, as SQS.
    assert receive(sqs, url) == []
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got[1]["ReceiptHandle"], VisibilityTimeout=0)
    # a2 is back, but a1 before it is still in flight: group a is held for it.
    assert receive(sqs, url) == []
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"], VisibilityTimeout=0)
    # a1 is back and nothing before it is in flight: it goes again (as SQS does), then a2.
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["a1", "a2"]


def test_a_receipt_whose_timeout_ran_out(sqs):
    for suffix, attributes in (("", {}), (".fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"})):
        url = sqs.create_queue(QueueName=unique_name("expire") + suffix,
                               Attributes={"VisibilityTimeout": "1", **attributes})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m", **({"MessageGroupId": "g"} if suffix else {}))
        handle = receive(sqs, url)[0]["ReceiptHandle"]
        poll_for(lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"] == "1", 10)
        # Not received since: SQS accepts a visibility change; a FIFO queue refuses a delete.
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=5)
        if suffix:
            with pytest.raises(ClientError) as caught:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
            assert caught.value.response["Error"]["Message"] == (
                f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt "
                "handle has expired.")
        else:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)


def test_fifo_group_held_against_a_second_consumer(sqs):
    url = sqs.create_queue(QueueName=unique_name("grp") + ".fifo", Attributes={
        "FifoQueue": "true"})["QueueUrl"]
    for i, group in enumerate("aab"):
        sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}", MessageGroupId=group,
                         MessageDeduplicationId=str(i))
    one = receive(sqs, url)
    two = receive(sqs, url)
    assert [m["Body"] for m in one + two] == ["a0", "b2"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=one[0]["ReceiptHandle"])
    assert [m["Body"] for m in receive(sqs, url)] == ["a1"]


def test_one_store_with_mq_s_own_http_api(sqs, queue_url, sqs_daemon):
    name = queue_url.rsplit("/", 1)[1]
    sqs.send_message(QueueUrl=queue_url, MessageBody="from sqs")
    fetched = sqs_daemon.request("GET", f"/{name}/messages")
    assert fetched.status == 200 and fetched.body == b"from sqs"
    # mq's receipt is the SQS receipt handle: an SQS delete acks mq's delivery.
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=fetched.header("X-Receipt"))
    assert sqs_daemon.request("GET", f"/{name}").json()["ready"] == 0
    added = sqs_daemon.request("POST", f"/{name}/messages", b"from mq").json()
    got = receive(sqs, queue_url)
    assert [(m["Body"], m["MessageId"]) for m in got] == [("from mq", added["id"])]
    reply = sqs_daemon.request(
        "POST", f"/{name}/messages/{added['id']}?reply=ack&receipt={got[0]['ReceiptHandle']}")
    assert reply.status == 204


def test_a_long_poll_whose_client_hangs_up_claims_nothing(sqs, queue_url, sqs_daemon):
    def receives():
        return [e for e in sqs_daemon.events("http.request") if e.get("sqs") == "ReceiveMessage"]

    before = len(receives())
    body = json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": 15}).encode()
    with socket.create_connection(("127.0.0.1", sqs_daemon.port)) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\n"
                     b"Content-Type: application/x-amz-json-1.0\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        # One more round trip to the front before hanging up, so it has read the request.
        poll_for(lambda: sqs_daemon.request("GET", "/_mq/health").status == 200, 30)
    # The poll ends (and is logged) when the front sees the client gone, long before 15 s.
    poll_for(lambda: len(receives()) > before, 10, what="the abandoned poll to end")
    sqs.send_message(QueueUrl=queue_url, MessageBody="kept")
    assert [m["Body"] for m in receive(sqs, queue_url, WaitTimeSeconds=5)] == ["kept"]
