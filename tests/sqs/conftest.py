"""Real mq daemons for the SQS API tests, and clients of them (boto3).

A module that sets DAEMON_ARGS(workdir) -> flags gets a daemon of its own; the others share
one. Each test names its own queues (unique_name), so tests share a daemon, not state.
"""

import os

import pytest

from sqs_support import boto_client, unique_name
from support import Daemon


def started_daemon(workdir, args=()) -> Daemon:
    """A ready daemon on its own root under workdir (stopped again if it does not get ready)."""
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=30, args=tuple(args))
    try:
        daemon.start()
        daemon.wait_ready()
    except BaseException:
        daemon.cleanup()
        raise
    return daemon


@pytest.fixture(scope="package")
def shared_sqs_daemon(tmp_path_factory):
    """The daemon of every module that needs no options of its own (starting one costs seconds)."""
    daemon = started_daemon(tmp_path_factory.mktemp("sqs"))
    try:
        yield daemon
    finally:
        daemon.cleanup()


@pytest.fixture(scope="module")
def sqs_daemon(tmp_path_factory, request):
    """The module's daemon: its own when the module sets DAEMON_ARGS, else the shared one."""
    make_args = getattr(request.module, "DAEMON_ARGS", None)
    if make_args is None:
        yield request.getfixturevalue("shared_sqs_daemon")
        return
    workdir = tmp_path_factory.mktemp("sqs")
    daemon = started_daemon(workdir, make_args(workdir))
    try:
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
