"""What the SQS tests share: the test credentials, a boto3 client of an endpoint, queue names."""

import uuid

#: Credentials every client signs with; the daemon checks them only with --sqs-credentials.
ACCESS_KEY, SECRET_KEY, REGION = "AKIDMQTESTS00000000", "mq-test-secret-key", "us-east-1"


def boto_client(endpoint: str, **kwargs):
    """A boto3 SQS client of the endpoint, signing with the test credentials."""
    import boto3
    from botocore.config import Config
    return boto3.client("sqs", endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=kwargs.pop("key", ACCESS_KEY),
                        aws_secret_access_key=kwargs.pop("secret", SECRET_KEY),
                        config=Config(retries={"max_attempts": 0}, **kwargs))


def unique_name(prefix: str = "q") -> str:
    """A queue name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
