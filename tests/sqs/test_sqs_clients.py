"""Real clients against a daemon that checks signatures (--sqs-credentials) and serves the SQS
API on a port of its own (--sqs-port) with a public base URL and account of its own: boto3
with right and wrong keys, the aws command (awscli), and Celery running a task through kombu's
SQS transport with a worker this test starts."""

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
from botocore.exceptions import ClientError

from sqs_support import ACCESS_KEY, REGION, SECRET_KEY, boto_client, unique_name
from support import free_port, request


SQS_PORT = free_port()
BASE_URL, ACCOUNT = "http://sqs.mq.test:9324", "123456789012"
MAX_BODY_BYTES = 600_000

# One worker runs the whole module, so its daemon is started once, not once per worker.
pytestmark = pytest.mark.xdist_group("sqs_clients")


def DAEMON_ARGS(workdir):
    """Check signatures against a credentials file holding the test keys; SQS on SQS_PORT;
    a message size limit below SQS's."""
    path = workdir / "credentials"
    path.write_text(f"[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = x\n\n"
                    f"[default]\naws_access_key_id = {ACCESS_KEY}\n"
                    f"aws_secret_access_key = {SECRET_KEY}\n")
    return (f"--sqs-credentials={path}", f"--sqs-port={SQS_PORT}", f"--sqs-base-url={BASE_URL}",
            f"--sqs-account={ACCOUNT}", f"--max-body-bytes={MAX_BODY_BYTES}")


@pytest.fixture(scope="module")
def endpoint(sqs_daemon) -> str:
    """The SQS API's own port."""
    return f"http://127.0.0.1:{SQS_PORT}"


def test_the_sqs_port_base_url_and_account(sqs, sqs_daemon):
    name = unique_name("elsewhere")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{BASE_URL}/{ACCOUNT}/{name}"
    sqs.send_message(QueueUrl=url, MessageBody="via the sqs port")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
    # The daemon's --max-body-bytes bounds SQS's MaximumMessageSize, and says so.
    size = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])
    assert size["Attributes"] == {"MaximumMessageSize": str(MAX_BODY_BYTES)}
    assert sqs.send_message(QueueUrl=url, MessageBody="y" * (MAX_BODY_BYTES - 1000))["MessageId"]
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x" * MAX_BODY_BYTES, MessageAttributes={
            "name": {"DataType": "String", "StringValue": "value"}})
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert f"shorter than {MAX_BODY_BYTES} bytes" in caught.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as caught:  # Over what any message can make of a call.
        sqs.send_message(QueueUrl=url, MessageBody="x" * (7 * MAX_BODY_BYTES))
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "the request is longer than" in caught.value.response["Error"]["Message"]
    # The main port serves mq's own API only.
    main = sqs_daemon.request("POST", "/", b"{}", {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
    assert main.status == 404 and main.json()["error"] == "not_found"
    assert sqs_daemon.request("GET", f"/{name}/messages").body == b"via the sqs port"
    assert sqs_daemon.request("GET", f"/{name}/messages").body == b"y" * (MAX_BODY_BYTES - 1000)


def test_signatures_are_checked_with_the_configured_keys(sqs, endpoint, sqs_daemon):
    url = sqs.create_queue(QueueName=unique_name("signed"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="signed")
    for key, secret, code in ((ACCESS_KEY, "wrong-secret", "SignatureDoesNotMatch"),
                              ("AKIDUNKNOWN000000000", SECRET_KEY, "InvalidClientTokenId")):
        with pytest.raises(ClientError) as caught:
            boto_client(endpoint, key=key, secret=secret).send_message(QueueUrl=url, MessageBody="x")
        error = caught.value.response
        assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, 403)
    unsigned = request(SQS_PORT, "POST", "/", b"{}", {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
    assert unsigned.status == 403 and unsigned.json()["__type"].endswith("#MissingAuthenticationToken")
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "1"


def aws(endpoint: str, *args: str) -> dict:
    """Run one `aws sqs` command of awscli against the endpoint; its JSON output.

    The command runs in this process through awscli's own driver (what the `aws` script
    calls), so its imports are paid once, not once per command.
    """
    from awscli.clidriver import create_clidriver
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = create_clidriver().main(["--endpoint-url", endpoint, "--output", "json",
                                              "sqs", *args])
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    assert status == 0, err.getvalue()
    return json.loads(out.getvalue()) if out.getvalue().strip() else {}


@pytest.mark.slow
def test_the_aws_command_creates_sends_receives_and_deletes(endpoint, sqs):
    url = aws(endpoint, "create-queue", "--queue-name", unique_name("cli"))["QueueUrl"]
    sent = aws(endpoint, "send-message", "--queue-url", url, "--message-body", "from the cli")
    got = aws(endpoint, "receive-message", "--queue-url", url, "--wait-time-seconds", "1",
              "--attribute-names", "All")["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(sent["MessageId"], "from the cli")]
    aws(endpoint, "delete-message", "--queue-url", url, "--receipt-handle", got[0]["ReceiptHandle"])
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == counts["ApproximateNumberOfMessagesNotVisible"] == "0"


class Sent(Exception):
    """Raised by a before-send hook once it has seen where a request would go."""


def test_only_sdks_and_not_the_aws_command_of_version_1_read_the_endpoint_variable(endpoint, monkeypatch):
    # docs/SQS.md tells aws-cli 1.x users to pass --endpoint-url: its own rule sends SQS commands
    # to queue.amazonaws.com whatever AWS_ENDPOINT_URL_SQS says. The request is stopped before
    # it leaves, so nothing reaches AWS.
    import boto3
    from awscli.clidriver import create_clidriver

    for name, value in {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
                        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                        "AWS_ENDPOINT_URL_SQS": endpoint}.items():
        monkeypatch.setenv(name, value)
    urls = []

    def stop(request, **_):
        urls.append(request.url)
        raise Sent

    driver = create_clidriver()
    driver.session.register("before-send.sqs", stop)
    with contextlib.redirect_stderr(io.StringIO()):
        assert driver.main(["sqs", "list-queues"]) != 0
    assert urls and urls[0].startswith("https://queue.amazonaws.com/"), urls
    # boto3 reads the variable and reaches mq.
    name = unique_name("by-variable")
    url = boto3.client("sqs").create_queue(QueueName=name)["QueueUrl"]
    assert url.endswith(f"/{name}")
    assert boto3.client("sqs", endpoint_url=endpoint).get_queue_url(QueueName=name)["QueueUrl"] == url


CELERY_APP = """
import os
from celery import Celery

app = Celery("mqtasks", broker=os.environ["MQ_TEST_BROKER"],
             backend="file://" + os.environ["MQ_TEST_RESULTS"])
app.conf.broker_transport_options = {{
    "region": "{region}", "is_secure": False, "queue_name_prefix": os.environ["MQ_TEST_PREFIX"],
    "wait_time_seconds": 1, "polling_interval": 0.1, "visibility_timeout": 60}}
app.conf.worker_enable_remote_control = False
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x, y):
    return x + y
"""


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_celery_runs_a_task_through_mq(tmp_path, sqs_daemon, sqs):
    (tmp_path / "mqtasks.py").write_text(textwrap.dedent(CELERY_APP.format(region=REGION)))
    (tmp_path / "results").mkdir()
    prefix = unique_name("celery") + "-"
    env = {**os.environ, "MQ_TEST_BROKER": f"sqs://{ACCESS_KEY}:{SECRET_KEY}@127.0.0.1:{SQS_PORT}",
           "MQ_TEST_RESULTS": str(tmp_path / "results"), "MQ_TEST_PREFIX": prefix,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "mqtasks", "worker", "--pool=solo", "--concurrency=1",
         "--without-heartbeat", "--without-mingle", "--without-gossip", "--loglevel=INFO"],
        cwd=tmp_path, env=env, stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT)
    try:
        sys.path.insert(0, str(tmp_path))
        os.environ.update({k: env[k] for k in ("MQ_TEST_BROKER", "MQ_TEST_RESULTS", "MQ_TEST_PREFIX")})
        import mqtasks
        result = mqtasks.add.delay(2, 3)
        assert result.get(timeout=60) == 5, (tmp_path / "worker.log").read_text()
        queues = sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"]
        assert queues == [f"{BASE_URL}/{ACCOUNT}/{prefix}celery"]
    finally:
        sys.path.remove(str(tmp_path))
        worker.terminate()
        worker.wait(timeout=20)
