"""Scenarios where AWS documents what SQS does, run with boto3 and, where the difference could
lie in the wire format, the query protocol: explicit delays, receive counts and receipt handles
across a dead-letter queue, FIFO batch errors, statuses and wording of errors, attribute name
wildcards, permissions kept in the Policy attribute, and STS's GetCallerIdentity."""

import json
import xml.etree.ElementTree as ET
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError

from sqs_support import ACCESS_KEY, REGION, SECRET_KEY, unique_name
from support import poll_for

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


def error_of(call, *args, **kwargs) -> dict:
    """The Error of a ClientError the call raises, with its HTTP status."""
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    response = caught.value.response
    return {**response["Error"], "Status": response["ResponseMetadata"]["HTTPStatusCode"]}


def query(daemon, params: dict):
    """A query-protocol POST: (status, parsed XML root)."""
    resp = daemon.request("POST", "/", urlencode({**params, "Version": "2012-11-05"}).encode(), FORM)
    return resp.status, ET.fromstring(resp.body)


def bodies(root) -> list[str]:
    """The bodies of a query-protocol ReceiveMessage answer."""
    return [m.find("sqs:Body", NS).text for m in root.findall("sqs:ReceiveMessageResult/sqs:Message", NS)]


def test_an_explicit_delay_of_zero_overrides_the_queue_s_delay(sqs, sqs_daemon):
    url = sqs.create_queue(QueueName=unique_name("delay"), Attributes={"DelaySeconds": "3"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="queue delay")  # No DelaySeconds: the queue's.
    sqs.send_message(QueueUrl=url, MessageBody="json zero", DelaySeconds=0)
    query(sqs_daemon, {"Action": "SendMessage", "QueueUrl": url, "MessageBody": "query zero",
                       "DelaySeconds": "0"})
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "batch zero", "DelaySeconds": 0}])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    seen = {m["Body"] for m in got}
    if len(seen) < 3:  # A long poll answers with what is ready at its first message.
        seen |= {m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                        WaitTimeSeconds=1).get("Messages", [])}
    assert seen == {"json zero", "query zero", "batch zero"}
    late = poll_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"), 10)
    assert [m["Body"] for m in late] == ["queue delay"]


def test_a_dead_letter_counts_receives_across_queues_with_a_new_handle_each(sqs):
    dead = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = sqs.create_queue(QueueName=unique_name("src"), Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 2})})["QueueUrl"]
    sqs.send_message(QueueUrl=source, MessageBody="nacked")
    handles = []
    for _ in range(2):  # Made visible again at once: the fetch actor dead-letters it.
        message = sqs.receive_message(QueueUrl=source, WaitTimeSeconds=2)["Messages"][0]
        handles.append(message["ReceiptHandle"])
        sqs.change_message_visibility(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"],
                                      VisibilityTimeout=0)
    sqs.send_message(QueueUrl=source, MessageBody="timed out")
    for _ in range(2):  # Left to time out: the mover dead-letters it.
        message = poll_for(lambda: sqs.receive_message(
            QueueUrl=source, WaitTimeSeconds=1, VisibilityTimeout=1).get("Messages"), 10)[0]
        handles.append(message["ReceiptHandle"])
    got = {}
    poll_for(lambda: got.update({m["Body"]: m for m in sqs.receive_message(
        QueueUrl=dead, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]).get(
        "Messages", [])}) or len(got) == 2, 15, what="both dead letters")
    for body in ("nacked", "timed out"):
        assert got[body]["Attributes"]["ApproximateReceiveCount"] == "3"
        assert got[body]["ReceiptHandle"] not in handles
    sqs.delete_message(QueueUrl=dead, ReceiptHandle=got["nacked"]["ReceiptHandle"])


def test_a_fifo_batch_entry_without_a_group_is_missing_parameter(sqs, sqs_daemon):
    url = sqs.create_queue(QueueName=unique_name("fb") + ".fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    error = error_of(sqs.send_message_batch, QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "x", "MessageGroupId": "g"}, {"Id": "b", "MessageBody": "y"}])
    assert (error["Code"], error["Status"]) == ("MissingParameter", 400)
    assert error["Message"] == "The request must contain the parameter MessageGroupId."
    status, root = query(sqs_daemon, {"Action": "SendMessageBatch", "QueueUrl": url,
                                      "SendMessageBatchRequestEntry.1.Id": "a",
                                      "SendMessageBatchRequestEntry.1.MessageBody": "x"})
    assert (status, root.find("sqs:Error/sqs:Code", NS).text) == (400, "MissingParameter")
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # The whole batch was refused.


def test_every_sqs_error_is_400(sqs, sqs_daemon, queue_url):
    error = error_of(sqs.get_queue_url, QueueName=unique_name("missing"))
    assert (error["Code"], error["Status"]) == ("AWS.SimpleQueueService.NonExistentQueue", 400)
    status, root = query(sqs_daemon, {"Action": "GetQueueUrl", "QueueName": unique_name("missing")})
    assert (status, root.find("sqs:Error/sqs:Code", NS).text) == (400, "AWS.SimpleQueueService.NonExistentQueue")
    error = error_of(sqs.delete_message, QueueUrl=queue_url, ReceiptHandle="not-a-handle")
    assert (error["Code"], error["Status"]) == ("ReceiptHandleIsInvalid", 400)
    assert error["Message"] == 'The input receipt handle "not-a-handle" is not a valid receipt handle.'
    for handle in ("01a20000-0000-7000-8000-000000000000.\u00b2", "x.1"):  # int() refuses "²"
        error = error_of(sqs.delete_message, QueueUrl=queue_url, ReceiptHandle=handle)
        assert (error["Code"], error["Status"]) == ("ReceiptHandleIsInvalid", 400), handle
    error = error_of(sqs.list_message_move_tasks, SourceArn=f"arn:aws:sqs:{REGION}:000000000000:{unique_name()}")
    assert (error["Code"], error["Status"]) == ("ResourceNotFoundException", 400)
    error = error_of(sqs.send_message, QueueUrl="http://127.0.0.1/12/34/56", MessageBody="x")
    assert (error["Code"], error["Status"]) == ("InvalidAddress", 400)


def test_prefix_wildcards_choose_message_attributes(sqs, sqs_daemon, queue_url):
    text = {"DataType": "String", "StringValue": "v"}
    sqs.send_message(QueueUrl=queue_url, MessageBody="m", MessageAttributes={
        "Custom.a": text, "Custom.b": text, "Customer": text, "Other": text})
    got = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["Custom.*"],
                              VisibilityTimeout=0)["Messages"][0]
    assert sorted(got["MessageAttributes"]) == ["Custom.a", "Custom.b"]
    status, root = poll_for(lambda: (lambda r: r if bodies(r[1]) else None)(query(sqs_daemon, {
        "Action": "ReceiveMessage", "QueueUrl": queue_url, "MessageAttributeName.1": "Custom.*",
        "MessageAttributeName.2": "Other"})), 10)
    names = [a.find("sqs:Name", NS).text
             for a in root.findall("sqs:ReceiveMessageResult/sqs:Message/sqs:MessageAttribute", NS)]
    assert sorted(names) == ["Custom.a", "Custom.b", "Other"]


def test_permissions_are_kept_in_the_policy_attribute(sqs, sqs_daemon, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="senders", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    query(sqs_daemon, {"Action": "AddPermission", "QueueUrl": queue_url, "Label": "readers",
                       "AWSAccountId.1": "111122223333", "AWSAccountId.2": "444455556666",
                       "ActionName.1": "ReceiveMessage", "ActionName.2": "DeleteMessage"})
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert policy["Version"] == "2012-10-17" and policy["Id"] == f"{arn}/SQSDefaultPolicy"
    assert policy["Statement"] == [
        {"Sid": "senders", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
         "Action": "SQS:SendMessage", "Resource": arn},
        {"Sid": "readers", "Effect": "Allow",
         "Principal": {"AWS": ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]},
         "Action": ["SQS:ReceiveMessage", "SQS:DeleteMessage"], "Resource": arn}]
    error = error_of(sqs.add_permission, QueueUrl=queue_url, Label="senders",
                     AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    assert (error["Code"], error["Message"]) == (
        "InvalidParameterValue", "Value senders for parameter Label is invalid. Reason: Already exists.")
    error = error_of(sqs.add_permission, QueueUrl=queue_url, Label="owner",
                     AWSAccountIds=["111122223333"], Actions=["CreateQueue"])
    assert error["Message"] == ("Value SQS:CreateQueue for parameter ActionName is invalid. "
                                "Reason: Only the queue owner is allowed to invoke this action.")
    sqs.remove_permission(QueueUrl=queue_url, Label="senders")
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])
    assert [s["Sid"] for s in policy["Statement"]] == ["readers"]
    error = error_of(sqs.remove_permission, QueueUrl=queue_url, Label="senders")
    assert error["Message"] == ("Value senders for parameter Label is invalid. Reason: can't find "
                                "label on existing policy.")
    sqs.remove_permission(QueueUrl=queue_url, Label="readers")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])
    error = error_of(sqs.add_permission, QueueUrl=queue_url + "-gone", Label="x",
                     AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    assert error["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_sts_get_caller_identity_answers_the_configured_account(endpoint):
    import boto3
    sts = boto3.client("sts", endpoint_url=endpoint, region_name=REGION,
                       aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    identity = sts.get_caller_identity()
    assert (identity["Account"], identity["Arn"]) == ("000000000000", "arn:aws:iam::000000000000:root")


def test_errors_use_aws_s_wording(sqs, sqs_daemon, queue_url):
    name = queue_url.rsplit("/", 1)[1]
    error = error_of(sqs.tag_queue, QueueUrl=queue_url, Tags={f"k{i}": "v" for i in range(51)})
    assert (error["Code"], error["Message"]) == ("InvalidParameterValue",
                                                 f"Too many tags added for queue {name}.")
    error = error_of(sqs.untag_queue, QueueUrl=queue_url, TagKeys=[])
    assert error["Message"] == "Tag keys must be between 1 and 128 characters in length."
    error = error_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "a": {"DataType": "Text", "StringValue": "v"}})
    assert error["Message"] == ("The message attribute 'a' has an invalid message attribute type, "
                                "the set of supported type prefixes is Binary, Number, and String.")
    status, root = query(sqs_daemon, {
        "Action": "SendMessage", "QueueUrl": queue_url, "MessageBody": "x",
        "MessageAttribute.1.Name": "a", "MessageAttribute.1.Value.DataType": "Number",
        "MessageAttribute.1.Value.StringValue": ""})
    assert status == 400 and root.find("sqs:Error/sqs:Message", NS).text == (
        "Message (user) attribute 'a' must contain a non-empty value of type 'Number'.")
