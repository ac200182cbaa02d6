"""One real mq daemon per test module for the SQS API, and clients of it (boto3, raw HTTP).

A module may set DAEMON_ARGS (extra flags for its daemon). Each test names its own queues
(unique_name), so the tests of a module share the daemon without sharing state.
"""

import os

import pytest

from sqs_support import boto_client, unique_name
from support import Daemon

@pytest.fixture(scope="module")
def sqs_daemon(tmp_path_factory, request):
    """A ready daemon, with the module's DAEMON_ARGS."""
    workdir = tmp_path_factory.mktemp("sqs")
    args = getattr(request.module, "DAEMON_ARGS", lambda workdir: ())(workdir)
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30, args=tuple(args))
    try:
        daemon.start()
        daemon.wait_ready()
        yield daemon
    finally:
        daemon.cleanup()


@pytest.fixture(scope="module")
def endpoint(sqs_daemon) -> str:
    """The SQS endpoint URL of the module's daemon."""
    return f"http://127.0.0.1:{sqs_daemon.port}"


@pytest.fixture(scope="module")
def sqs(endpoint):
    """A boto3 SQS client of the module's daemon."""
    return boto_client(endpoint)


@pytest.fixture
def queue_url(sqs):
    """A fresh standard queue."""
    return sqs.create_queue(QueueName=unique_name())["QueueUrl"]


@pytest.fixture(autouse=True, scope="session")
def no_aws_environment():
    """Clients must not pick up a developer's AWS settings or real endpoints."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(name, None)
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
