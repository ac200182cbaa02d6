"""Edges where AWS's API reference (and SQS itself) says what happens: receipts whose
visibility timeout ran out or that belong to an earlier delivery, attributes given empty,
message attribute wildcards and wording, and queue URLs and ARNs of another region or account,
run with boto3 and, where the wire could differ, the query protocol."""

import json
import xml.etree.ElementTree as ET
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError

from sqs_support import REGION, unique_name
from support import poll_for

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
NOT_CHANGEABLE = ("Value {} for parameter ReceiptHandle is invalid. Reason: Message does not "
                  "exist or is not available for visibility timeout change.")


def error_of(call, **kwargs) -> dict:
    """The Error of the ClientError a call raises, with its HTTP status."""
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    return {**response["Error"], "Status": response["ResponseMetadata"]["HTTPStatusCode"]}


def query(daemon, params: dict, path: str = "/"):
    """A query-protocol POST: (status, parsed XML root)."""
    resp = daemon.request("POST", path, urlencode({**params, "Version": "2012-11-05"}).encode(), FORM)
    return resp.status, ET.fromstring(resp.body)


def counts(sqs, url: str) -> tuple[str, str]:
    """(ready, in flight) as GetQueueAttributes counts them."""
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesNotVisible"]


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_a_receipt_whose_timeout_ran_out_still_deletes_in_a_standard_queue(sqs, queue_url, batch):
    sqs.send_message(QueueUrl=queue_url, MessageBody="late")
    handle = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=1)["Messages"][0]["ReceiptHandle"]
    poll_for(lambda: counts(sqs, queue_url) == ("1", "0"), 15, what="the message to be visible again")
    if batch:
        got = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[{"Id": "a", "ReceiptHandle": handle}])
        assert [e["Id"] for e in got["Successful"]] == ["a"] and not got.get("Failed")
    else:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=handle)
    assert counts(sqs, queue_url) == ("0", "0")
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_a_visibility_change_with_an_earlier_delivery_s_receipt_is_invalid_parameter_value(
        sqs, queue_url, batch):
    sqs.send_message(QueueUrl=queue_url, MessageBody="twice")
    first = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    second = poll_for(lambda: sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages"), 10)
    assert second[0]["ReceiptHandle"] != first
    if batch:
        got = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
            {"Id": "a", "ReceiptHandle": first, "VisibilityTimeout": 5}])
        assert not got.get("Successful")
        assert got["Failed"] == [{"Id": "a", "SenderFault": True, "Code": "InvalidParameterValue",
                                  "Message": NOT_CHANGEABLE.format(first)}]
    else:
        error = error_of(sqs.change_message_visibility, QueueUrl=queue_url, ReceiptHandle=first,
                         VisibilityTimeout=5)
        assert (error["Code"], error["Status"], error["Message"]) == (
            "InvalidParameterValue", 400, NOT_CHANGEABLE.format(first))
    assert counts(sqs, queue_url) == ("0", "1")  # The current delivery is untouched.


@pytest.mark.parametrize("attribute, value", [
    ("Policy", json.dumps({"Version": "2012-10-17", "Statement": []})),
    ("RedriveAllowPolicy", json.dumps({"redrivePermission": "denyAll"})),
    ("KmsMasterKeyId", "alias/aws/sqs"),
])
def test_an_empty_value_removes_a_policy_or_key_attribute(sqs, attribute, value):
    name = unique_name("empty")
    url = sqs.create_queue(QueueName=name, Attributes={attribute: ""})["QueueUrl"]
    assert attribute not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={attribute: value})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][attribute] == value
    sqs.set_queue_attributes(QueueUrl=url, Attributes={attribute: ""})
    assert attribute not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
    assert sqs.create_queue(QueueName=name, Attributes={attribute: ""})["QueueUrl"] == url


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_an_asterisk_asks_for_every_message_attribute(sqs, sqs_daemon, queue_url, protocol):
    text = {"DataType": "String", "StringValue": "v"}
    sqs.send_message(QueueUrl=queue_url, MessageBody="m", MessageAttributes={"a": text, "b.c": text})
    if protocol == "json":
        got = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["*"])["Messages"][0]
        names = sorted(got["MessageAttributes"])
    else:
        status, root = query(sqs_daemon, {"Action": "ReceiveMessage", "QueueUrl": queue_url,
                                          "MessageAttributeName.1": "*"})
        assert status == 200
        names = sorted(a.find("sqs:Name", NS).text for a in root.findall(
            "sqs:ReceiveMessageResult/sqs:Message/sqs:MessageAttribute", NS))
    assert names == ["a", "b.c"]


@pytest.mark.parametrize("data_type", ["String", "Number", "String.label"])
def test_an_empty_attribute_value_is_refused_with_sqs_s_words(sqs, queue_url, data_type):
    error = error_of(sqs.send_message, QueueUrl=queue_url, MessageBody="x", MessageAttributes={
        "Detail": {"DataType": data_type, "StringValue": ""}})
    assert (error["Code"], error["Status"], error["Message"]) == (
        "InvalidParameterValue", 400,
        f"Message (user) attribute 'Detail' must contain a non-empty value of type '{data_type}'.")


@pytest.mark.parametrize("where", ["aws host of another region", "older aws host of another region",
                                   "another account", "query post to another account's path",
                                   "GetQueueUrl of another account"])
def test_a_queue_url_of_another_region_or_account_names_no_queue(sqs, sqs_daemon, queue_url, where):
    name = queue_url.rsplit("/", 1)[1]
    sqs.send_message(QueueUrl=queue_url, MessageBody="kept")
    here = f"https://sqs.{REGION}.amazonaws.com/000000000000/{name}"  # This region's host: the queue.
    assert counts(sqs, here) == ("1", "0")
    url = {"aws host of another region": f"https://sqs.eu-west-1.amazonaws.com/000000000000/{name}",
           "older aws host of another region": f"https://eu-west-1.queue.amazonaws.com/000000000000/{name}",
           "another account": queue_url.replace("/000000000000/", "/111122223333/")}.get(where)
    if where == "GetQueueUrl of another account":
        error = error_of(sqs.get_queue_url, QueueName=name, QueueOwnerAWSAccountId="111122223333")
        assert (error["Code"], error["Status"]) == ("AWS.SimpleQueueService.NonExistentQueue", 400)
        assert sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId="000000000000")["QueueUrl"] == queue_url
    elif url is None:
        status, root = query(sqs_daemon, {"Action": "GetQueueAttributes", "AttributeName.1": "All"},
                             path=f"/111122223333/{name}")
        assert (status, root.find("sqs:Error/sqs:Code", NS).text) == (
            400, "AWS.SimpleQueueService.NonExistentQueue")
    else:
        for call, kwargs in ((sqs.get_queue_attributes, {"AttributeNames": ["All"]}),
                             (sqs.send_message, {"MessageBody": "lost"}),
                             (sqs.purge_queue, {})):
            error = error_of(call, QueueUrl=url, **kwargs)
            assert (error["Code"], error["Status"], error["Message"]) == (
                "AWS.SimpleQueueService.NonExistentQueue", 400, "The specified queue does not exist.")
    assert counts(sqs, queue_url) == ("1", "0")


@pytest.mark.parametrize("region, account", [("eu-west-1", "000000000000"), (REGION, "111122223333")],
                         ids=["another region", "another account"])
def test_an_arn_of_another_region_or_account_names_no_queue(sqs, queue_url, region, account):
    dead = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    arn = f"arn:aws:sqs:{region}:{account}:{dead.rsplit('/', 1)[1]}"
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    error = error_of(sqs.set_queue_attributes, QueueUrl=queue_url, Attributes={"RedrivePolicy": policy})
    assert (error["Code"], error["Message"]) == (
        "InvalidParameterValue", f"Value {policy} for parameter RedrivePolicy is invalid. Reason: "
        "Dead letter target does not exist.")
    for call in (sqs.list_message_move_tasks, sqs.start_message_move_task):
        error = error_of(call, SourceArn=arn)
        assert (error["Code"], error["Status"], error["Message"]) == (
            "ResourceNotFoundException", 400,
            "The resource that you specified for the SourceArn parameter doesn't exist.")
