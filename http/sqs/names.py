"""Names of the SQS API: queue names, queue URLs {base}/{account}/{queue}, ARNs, and the
parameters a request gives (numbers arrive as text in the query protocol)."""

import re
from dataclasses import dataclass, field
from typing import Literal, overload
from urllib.parse import urlsplit

from mq import store as fmt
from mq.errors import Invalid
from mq.http.sqs.errors import SqsError, invalid, missing, queue_missing
from mq.tokens import Token

#: An SQS queue name: 1 to 80 characters, with `.fifo` at the end of a FIFO queue's.
QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
FIFO_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}\.fifo")
#: An account id: twelve digits.
ACCOUNT = re.compile(r"\d{12}")
#: The region an ARN names when the request's signature names none.
DEFAULT_REGION = "us-east-1"
#: The host of an AWS endpoint of SQS, which names a region: sqs.{region}.amazonaws.com, or
#: the older {region}.queue.amazonaws.com.
AWS_HOST = re.compile(r"(?:sqs\.([a-z0-9-]+)|([a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?")


@dataclass
class Caller:
    """Who asked and where: the base of queue URLs, the account id and the region for ARNs,
    the request's connection (a long poll stops waiting for a client that hung up), and the
    fields of its access log line, and the token its access key acts as (None: access control
    is off)."""

    base_url: str
    account: str
    region: str = DEFAULT_REGION
    connection: object = None
    log_fields: dict = field(default_factory=dict)
    token: Token | None = None

    def queue_url(self, queue: str) -> str:
        """The URL of a queue."""
        return f"{self.base_url}/{self.account}/{queue}"

    def arn(self, queue: str) -> str:
        """The ARN of a queue."""
        return f"arn:aws:sqs:{self.region}:{self.account}:{queue}"

    def owns_url(self, url: str) -> bool:
        """Whether a queue URL can name a queue here: not one of another account, nor one on
        an AWS host of another region (such a queue does not exist here, as in SQS)."""
        split = urlsplit(url) if "://" in url else None
        parts = [p for p in (split.path if split else url).split("/") if p]
        if len(parts) == 2 and ACCOUNT.fullmatch(parts[0]) and parts[0] != self.account:
            return False
        host = AWS_HOST.fullmatch((split.hostname or "") if split else "")
        return host is None or (host.group(1) or host.group(2)) == self.region

    def owns_arn(self, arn) -> bool:
        """Whether an ARN can name a queue here: not one of another account or region."""
        parts = arn.split(":") if isinstance(arn, str) else []
        return len(parts) != 6 or (parts[3], parts[4]) == (self.region, self.account)


def check_new_name(name, fifo: bool) -> str:
    """The name of a queue to create, checked as SQS checks it."""
    if not name:
        raise missing("QueueName")
    if not isinstance(name, str):
        raise invalid("Value for parameter QueueName is invalid.")
    if fifo:
        if not FIFO_QUEUE_NAME.fullmatch(name):
            raise invalid("The name of a FIFO queue can only include alphanumeric characters, "
                          "hyphens, or underscores, must end with .fifo suffix and be 1 to 80 "
                          "in length.")
    elif not QUEUE_NAME.fullmatch(name):
        raise invalid("Can only include alphanumeric characters, hyphens, or underscores. "
                      "1 to 80 in length")
    return name


def existing_name(name) -> str:
    """A queue name that may exist (any mq queue name); QueueDoesNotExist when it cannot."""
    try:
        return fmt.validate_queue(name)
    except Invalid:
        raise queue_missing() from None


def queue_from_url(params: dict, url: str | None = None) -> str:
    """The queue a request is about: its QueueUrl parameter (or the URL it was sent to)."""
    given = params.get("QueueUrl") or url
    if not given:
        raise missing("QueueUrl")
    if not isinstance(given, str):
        raise invalid("Value for parameter QueueUrl is invalid.")
    path = urlsplit(given).path if "://" in given else given
    parts = [p for p in path.split("/") if p]
    if not parts or len(parts) > 2 or (len(parts) == 2 and not ACCOUNT.fullmatch(parts[0])):
        raise SqsError("InvalidAddress", f"The address {given} is not valid for this endpoint.")
    return existing_name(parts[-1])


def queue_from_arn(arn, parameter: str) -> str:
    """The queue an ARN arn:aws:sqs:{region}:{account}:{queue} names."""
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[5]:
        raise invalid(f"Value {arn} for parameter {parameter} is invalid. Reason: Invalid ARN.")
    return existing_name(parts[5])


def integer(params: dict, name: str, default, low: int, high: int, reason: str = ""):
    """An integer parameter (a number, or text in the query protocol) between low and high."""
    value = params.get(name)
    if value is None:
        return default
    try:
        number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value))
    except ValueError:
        raise invalid(f"Value {value} for parameter {name} is invalid. Reason: must be an "
                      "integer.") from None
    if not low <= number <= high:
        raise invalid(f"Value {value} for parameter {name} is invalid. Reason: "
                      f"{reason or f'Must be between {low} and {high}, if provided.'}")
    return number


@overload
def text(params: dict, name: str, required: Literal[True]) -> str: ...


@overload
def text(params: dict, name: str, required: bool = False) -> str | None: ...


def text(params: dict, name: str, required: bool = False) -> str | None:
    """A string parameter; MissingParameter when required and absent."""
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise missing(name)
        return None
    if not isinstance(value, str):
        raise invalid(f"Value for parameter {name} is invalid. Reason: must be a string.")
    return value


def names_list(params: dict, name: str) -> list[str]:
    """A list-of-strings parameter ([] when absent)."""
    value = params.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"Value for parameter {name} is invalid. Reason: must be a list of strings.")
    return value
