"""The model tests run with no AWS settings of the developer's (model_runs.py starts their
daemons and sets how long they run)."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def no_aws_environment():
    """boto3 must not pick up a developer's AWS settings or real endpoints."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"):
        os.environ.pop(name, None)
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
