"""The two wire protocols as SQS speaks them, checked on the bytes: the query protocol (form
parameters, XML answers and errors) and AWS JSON 1.0 errors (`__type`, `message`,
`x-amzn-query-error`); and aiobotocore, an async client, against the same daemon."""

import asyncio
import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlencode

from sqs_support import ACCESS_KEY, REGION, SECRET_KEY, unique_name

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


def query(daemon, params: dict, path: str = "/"):
    """A query-protocol POST; (status, headers, parsed XML root)."""
    resp = daemon.request("POST", path, urlencode({**params, "Version": "2012-11-05"}).encode(), FORM)
    return resp.status, resp, ET.fromstring(resp.body)


def text(root, path: str) -> str:
    """The text of the first element at path."""
    return root.find(path, NS).text


def test_query_protocol_end_to_end(sqs_daemon, endpoint):
    name = unique_name("query")
    status, _, root = query(sqs_daemon, {"Action": "CreateQueue", "QueueName": name,
                                         "Attribute.1.Name": "VisibilityTimeout", "Attribute.1.Value": "20",
                                         "Tag.1.Key": "team", "Tag.1.Value": "core"})
    assert status == 200 and root.tag == "{%s}CreateQueueResponse" % NS["sqs"]
    url = text(root, "sqs:CreateQueueResult/sqs:QueueUrl")
    assert url == f"{endpoint}/000000000000/{name}"
    assert text(root, "sqs:ResponseMetadata/sqs:RequestId")
    _, _, root = query(sqs_daemon, {
        "Action": "SendMessage", "QueueUrl": url, "MessageBody": "q <&> body",
        "MessageAttribute.1.Name": "k", "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "v"})
    assert text(root, "sqs:SendMessageResult/sqs:MD5OfMessageAttributes")
    # The query protocol may also be sent to the queue's URL, with no QueueUrl parameter.
    _, _, root = query(sqs_daemon, {"Action": "ReceiveMessage", "AttributeName.1": "All",
                                    "MessageAttributeName.1": "All"},
                       path=f"/000000000000/{name}")
    message = root.find("sqs:ReceiveMessageResult/sqs:Message", NS)
    assert text(message, "sqs:Body") == "q <&> body"
    attributes = {text(a, "sqs:Name"): text(a, "sqs:Value") for a in message.findall("sqs:Attribute", NS)}
    assert attributes["ApproximateReceiveCount"] == "1"
    value = message.find("sqs:MessageAttribute/sqs:Value", NS)
    assert (text(value, "sqs:DataType"), text(value, "sqs:StringValue")) == ("String", "v")
    _, _, root = query(sqs_daemon, {"Action": "DeleteMessageBatch", "QueueUrl": url,
                                    "DeleteMessageBatchRequestEntry.1.Id": "one",
                                    "DeleteMessageBatchRequestEntry.1.ReceiptHandle":
                                        text(message, "sqs:ReceiptHandle")})
    assert text(root, "sqs:DeleteMessageBatchResult/sqs:DeleteMessageBatchResultEntry/sqs:Id") == "one"
    resp = sqs_daemon.request("GET", "/?" + urlencode({"Action": "ListQueues", "QueueNamePrefix": name}))
    assert text(ET.fromstring(resp.body), "sqs:ListQueuesResult/sqs:QueueUrl") == url
    _, _, root = query(sqs_daemon, {"Action": "ListQueueTags", "QueueUrl": url})
    tag = root.find("sqs:ListQueueTagsResult/sqs:Tag", NS)
    assert (text(tag, "sqs:Key"), text(tag, "sqs:Value")) == ("team", "core")


def test_query_protocol_errors_are_sqs_error_documents(sqs_daemon):
    status, resp, root = query(sqs_daemon, {"Action": "GetQueueUrl", "QueueName": "no-such-queue"})
    assert status == 400
    assert resp.header("x-amzn-query-error") == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert root.tag == "{%s}ErrorResponse" % NS["sqs"]
    assert text(root, "sqs:Error/sqs:Code") == "AWS.SimpleQueueService.NonExistentQueue"
    assert text(root, "sqs:Error/sqs:Type") == "Sender"
    assert text(root, "sqs:Error/sqs:Message") == "The specified queue does not exist for this wsdl version."
    assert text(root, "sqs:RequestId")
    status, _, root = query(sqs_daemon, {"Action": "NoSuchAction"})
    assert (status, text(root, "sqs:Error/sqs:Code")) == (400, "InvalidAction")
    assert text(root, "sqs:Error/sqs:Message") == "The action NoSuchAction is not valid for this endpoint."
    name = unique_name("at-url")
    query(sqs_daemon, {"Action": "CreateQueue", "QueueName": name})
    status, _, root = query(sqs_daemon, {"Action": "ListQueues"}, path=f"/000000000000/{name}")
    assert (status, text(root, "sqs:Error/sqs:Code")) == (400, "InvalidAction")
    status, _, root = query(sqs_daemon, {"Action": "SendMessage"}, path=f"/000000000000/{name}")
    assert (status, text(root, "sqs:Error/sqs:Code")) == (400, "MissingParameter")
    assert text(root, "sqs:Error/sqs:Message") == "The request must contain the parameter MessageBody."


def json_call(daemon, operation: str, params: dict):
    """A raw AWS JSON 1.0 call: (status, headers, JSON body)."""
    resp = daemon.request("POST", "/", json.dumps(params).encode(), {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{operation}"})
    return resp.status, resp, resp.json()


def test_json_errors_carry_type_message_and_query_code(sqs_daemon):
    status, resp, body = json_call(sqs_daemon, "GetQueueUrl", {"QueueName": "no-such-queue"})
    assert status == 400
    assert body == {"__type": "com.amazonaws.sqs#QueueDoesNotExist",
                    "message": "The specified queue does not exist."}
    assert resp.header("x-amzn-query-error") == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert resp.header("Content-Type") == "application/x-amz-json-1.0"
    status, resp, body = json_call(sqs_daemon, "DeleteMessage", {
        "QueueUrl": "/000000000000/no-such-queue", "ReceiptHandle": "x"})
    assert status == 400 and body["__type"] == "com.amazonaws.sqs#ReceiptHandleIsInvalid"
    status, _, body = json_call(sqs_daemon, "Frobnicate", {})
    assert status == 400 and body["__type"].endswith("#UnknownOperationException")
    resp = sqs_daemon.request("POST", "/", b"{not json", {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
    assert resp.status == 400 and resp.json()["__type"].endswith("#SerializationException")


def test_mq_s_own_routes_are_untouched(sqs_daemon):
    # GET / without Action is not the SQS API's (it answers no x-amzn-RequestId).
    assert sqs_daemon.request("GET", "/").header("x-amzn-RequestId") is None
    assert sqs_daemon.request("POST", "/plain-queue/messages", b"a=1", FORM).status == 201


def test_aiobotocore_runs_the_operations(endpoint):
    from aiobotocore.session import get_session

    async def run():
        session = get_session()
        async with session.create_client("sqs", endpoint_url=endpoint, region_name=REGION,
                                         aws_access_key_id=ACCESS_KEY,
                                         aws_secret_access_key=SECRET_KEY) as client:
            url = (await client.create_queue(QueueName=unique_name("aio")))["QueueUrl"]
            await client.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
            got = await client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            bodies = sorted(m["Body"] for m in got["Messages"])
            await client.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got["Messages"])])
            attributes = await client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
            await client.delete_queue(QueueUrl=url)
            return bodies, attributes["Attributes"]

    bodies, attributes = asyncio.run(run())
    assert bodies == ["m0", "m1", "m2"]
    assert attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_the_readme_example_runs(endpoint):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## SQS API", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code.replace("http://127.0.0.1:8080", endpoint), "README.md", "exec"), {})


#: A body added through mq's API that an SQS answer must carry: markup, a CDATA end, CR and
#: CR LF (which an XML parser would turn into LF unless written as references), an astral
#: character; a control character and a byte that is not UTF-8, which no SQS body holds
#: (XML 1.0 cannot carry the one, UTF-8 text not the other), come back as U+FFFD.
SENT = "a<b>&amp;]]>\r\nx\ry\t\U0001f600 \x01 end".encode() + b" \xff"
RECEIVED = "a<b>&amp;]]>\r\nx\ry\t\U0001f600 \ufffd end \ufffd"


def test_a_body_added_through_mq_comes_back_whole_in_both_protocols(sqs_daemon):
    name = unique_name("edges")
    _, _, root = query(sqs_daemon, {"Action": "CreateQueue", "QueueName": name})
    url = text(root, "sqs:CreateQueueResult/sqs:QueueUrl")
    for _ in range(2):
        assert sqs_daemon.request("POST", f"/{name}/messages", SENT).status == 201
    status, _, root = query(sqs_daemon, {"Action": "ReceiveMessage", "QueueUrl": url})
    assert status == 200
    message = root.find("sqs:ReceiveMessageResult/sqs:Message", NS)
    assert text(message, "sqs:Body") == RECEIVED
    assert text(message, "sqs:MD5OfBody") == hashlib.md5(RECEIVED.encode()).hexdigest()
    status, _, answer = json_call(sqs_daemon, "ReceiveMessage", {"QueueUrl": url})
    assert status == 200
    assert answer["Messages"][0]["Body"] == RECEIVED
    assert answer["Messages"][0]["MD5OfBody"] == hashlib.md5(RECEIVED.encode()).hexdigest()
