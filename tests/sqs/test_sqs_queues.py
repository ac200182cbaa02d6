"""SQS queue operations with boto3 against a live daemon: create, find, list, delete, purge,
attributes, tags, dead-letter sources, and the errors SQS answers them with."""

import json
import time

import pytest
from botocore.exceptions import ClientError

from sqs_support import unique_name
from support import poll_for


def error_of(call, *args, **kwargs) -> dict:
    """The Error of a ClientError the call raises (with its HTTP status)."""
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    response = caught.value.response
    return {**response["Error"], "Status": response["ResponseMetadata"]["HTTPStatusCode"]}


def test_create_get_list_and_delete_a_queue(sqs, endpoint):
    name = unique_name("life")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{endpoint}/000000000000/{name}"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url  # Same attributes: the same queue.
    assert url in sqs.list_queues(QueueNamePrefix="life-")["QueueUrls"]
    sqs.delete_queue(QueueUrl=url)
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name)
    error = error_of(sqs.get_queue_url, QueueName=name)
    assert (error["Code"], error["Status"]) == ("AWS.SimpleQueueService.NonExistentQueue", 400)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.delete_queue(QueueUrl=url)
    error = error_of(sqs.create_queue, QueueName=name)  # The name is free again after 60 s.
    assert (error["Code"], error["Status"]) == ("AWS.SimpleQueueService.QueueDeletedRecently", 400)
    with pytest.raises(sqs.exceptions.QueueDeletedRecently):
        sqs.create_queue(QueueName=name)
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name)


def test_list_queues_by_prefix_a_page_at_a_time(sqs):
    prefix = unique_name("page")
    urls = sorted(sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(5))
    first = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    assert first["QueueUrls"] == urls[:2] and first["NextToken"]
    second = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=first["NextToken"])
    third = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=second["NextToken"])
    assert second["QueueUrls"] == urls[2:4] and third["QueueUrls"] == urls[4:]
    assert "NextToken" not in third
    paginated = [u for p in sqs.get_paginator("list_queues").paginate(
        QueueNamePrefix=prefix, PaginationConfig={"PageSize": 2}) for u in p.get("QueueUrls", [])]
    assert paginated == urls
    error = error_of(sqs.list_queues, MaxResults=0)
    assert error["Code"] == "InvalidParameterValue"


def test_bad_names_and_differing_attributes_are_refused(sqs):
    for name in ("has space", "x" * 81, "dots.not.allowed"):
        assert error_of(sqs.create_queue, QueueName=name)["Code"] == "InvalidParameterValue"
    error = error_of(sqs.create_queue, QueueName="plain", Attributes={"FifoQueue": "true"})
    assert error["Code"] == "InvalidParameterValue"
    assert error_of(sqs.create_queue, QueueName="no-attribute.fifo")["Code"] == "InvalidParameterValue"
    name = unique_name("differ")
    sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "40"})
    error = error_of(sqs.create_queue, QueueName=name, Attributes={"VisibilityTimeout": "41"})
    assert (error["Code"], error["Status"]) == ("QueueAlreadyExists", 400)
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "41"})


def test_attributes_read_and_written_as_sqs_names_them(sqs):
    name = unique_name("attrs")
    url = sqs.create_queue(QueueName=name, Attributes={
        "VisibilityTimeout": "45", "DelaySeconds": "2", "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "600", "ReceiveMessageWaitTimeSeconds": "3"})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: got[k] for k in ("VisibilityTimeout", "DelaySeconds", "MaximumMessageSize",
                                "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
                                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                "ApproximateNumberOfMessagesDelayed")} == {
        "VisibilityTimeout": "45", "DelaySeconds": "2", "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "600", "ReceiveMessageWaitTimeSeconds": "3",
        "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
        "ApproximateNumberOfMessagesDelayed": "0"}
    assert got["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{name}"
    assert int(got["CreatedTimestamp"]) > 1_600_000_000 and "FifoQueue" not in got
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "7", "DelaySeconds": "0"})
    only = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert only["Attributes"] == {"VisibilityTimeout": "7"}
    error = error_of(sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["Nope"])
    assert (error["Code"], error["Message"]) == ("InvalidAttributeName", "Unknown Attribute Nope.")
    error = error_of(sqs.set_queue_attributes, QueueUrl=url, Attributes={"VisibilityTimeout": "43201"})
    assert error["Code"] == "InvalidAttributeValue"
    error = error_of(sqs.set_queue_attributes, QueueUrl=url, Attributes={"QueueArn": "x"})
    assert error["Code"] == "InvalidAttributeName"
    error = error_of(sqs.create_queue, QueueName=unique_name(), Attributes={"DeduplicationScope": "queue"})
    assert error["Message"] == "You can specify the DeduplicationScope only when FifoQueue is set to true."
    fifo = sqs.create_queue(QueueName=unique_name() + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "true"})
    error = error_of(sqs.set_queue_attributes, QueueUrl=fifo, Attributes={"FifoQueue": "false"})
    assert (error["Code"], error["Message"]) == ("InvalidAttributeValue", "Invalid value for the "
                                                 "parameter FifoQueue. Reason: Modifying queue type is not supported.")


def test_the_same_properties_through_mq_s_own_api(sqs, sqs_daemon):
    name = unique_name("props")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "12"})["QueueUrl"]
    props = sqs_daemon.request("GET", f"/{name}/properties").json()["properties"]
    assert props["timeout"] == 12.0 and props["max_body_bytes"] == 1048576
    assert props["retry"] == -1  # No RedrivePolicy: redelivered forever, as in SQS.
    sqs_daemon.request("PATCH", f"/{name}/properties", json.dumps({"delay": 4}).encode())
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"]
    assert got == {"DelaySeconds": "4"}


def test_message_retention_period_is_mq_s_retention(sqs, sqs_daemon):
    name = unique_name("retain")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    props = sqs_daemon.request("GET", f"/{name}/properties").json()["properties"]
    assert props["retention"] == 345600.0
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    assert sqs_daemon.request("GET", f"/{name}/properties").json()["properties"]["retention"] == 60.0
    for bad in ("30", "1209601", "soon"):
        error = error_of(sqs.set_queue_attributes, QueueUrl=url, Attributes={"MessageRetentionPeriod": bad})
        assert (error["Code"], error["Status"]) == ("InvalidAttributeValue", 400)
    # Below SQS's minimum only through mq's API: a message sent then is gone a second later.
    sqs_daemon.request("PATCH", f"/{name}/properties", json.dumps({"retention": 1}).encode())
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])
    assert got["Attributes"] == {"MessageRetentionPeriod": "1"}
    sent = time.time()
    sqs.send_message(QueueUrl=url, MessageBody="short-lived")
    poll_for(lambda: time.time() > sent + 1.1, timeout=5, what="a second and more")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_tags(sqs, queue_url):
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue_url)
    sqs.tag_queue(QueueUrl=queue_url, Tags={"team": "core", "env": "test"})
    sqs.untag_queue(QueueUrl=queue_url, TagKeys=["env"])
    assert sqs.list_queue_tags(QueueUrl=queue_url)["Tags"] == {"team": "core"}
    name = unique_name("tagged")
    url = sqs.create_queue(QueueName=name, tags={"a": "1"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1"}


def test_a_redrive_policy_names_the_dead_letter_queue_and_its_sources(sqs):
    dead = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 3})
    source = sqs.create_queue(QueueName=unique_name("src"), Attributes={"RedrivePolicy": policy})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"]) == {"deadLetterTargetArn": dead_arn, "maxReceiveCount": 3}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == [source]
    missing = json.dumps({"deadLetterTargetArn": dead_arn + "-gone", "maxReceiveCount": 3})
    error = error_of(sqs.set_queue_attributes, QueueUrl=source, Attributes={"RedrivePolicy": missing})
    assert error["Code"] == "InvalidParameterValue"
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["All"])["Attributes"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == []



def test_a_max_receive_count_above_mq_s_most_deliveries_reads_back_as_given(sqs, sqs_daemon):
    dead = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    attributes = {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1000})}
    name = unique_name("patient")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    assert sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"] == url
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"])["maxReceiveCount"] == 1000
    assert sqs_daemon.request("GET", f"/{name}/properties").json()["properties"]["retry"] == 100
    assert sqs.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == [url]


def test_purge_empties_a_queue_in_every_state(sqs, queue_url):
    for i in range(3):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=60)
    sqs.receive_message(QueueUrl=queue_url)
    counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"],
            counts["ApproximateNumberOfMessagesDelayed"]) == ("2", "1", "1")
    sqs.purge_queue(QueueUrl=queue_url)
    counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"],
            counts["ApproximateNumberOfMessagesDelayed"]) == ("0", "0", "0")
    error = error_of(sqs.purge_queue, QueueUrl=queue_url)  # One purge a minute.
    assert (error["Code"], error["Status"]) == ("AWS.SimpleQueueService.PurgeQueueInProgress", 400)


def test_purge_forgets_fifo_deduplication_ids(sqs):
    url = sqs.create_queue(QueueName=unique_name("pdedup") + ".fifo",
                           Attributes={"FifoQueue": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g",
                             MessageDeduplicationId="same")["MessageId"]
    again = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g",
                             MessageDeduplicationId="same")["MessageId"]
    assert again == first
    sqs.purge_queue(QueueUrl=url)
    after = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g",
                             MessageDeduplicationId="same")["MessageId"]
    assert after != first
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(after, "b")]
