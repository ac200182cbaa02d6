"""Telling the two protocols apart and speaking each: AWS JSON 1.0 (`X-Amz-Target:
AmazonSQS.{Operation}`, a JSON body) and the query protocol (`Action=...` form parameters or
query string, XML answers, http/sqs/query.py)."""

from dataclasses import dataclass
from urllib.parse import parse_qsl

import orjson

from mq.http.sqs import query
from mq.http.sqs.errors import JSON_TYPES, QUERY_MESSAGES, SqsError

JSON = "json"
QUERY = "query"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
TARGET_PREFIX = "AmazonSQS."


@dataclass
class Call:
    """A decoded request: its protocol, operation and parameters (in the JSON shapes)."""

    protocol: str
    operation: str
    params: dict


def is_sqs(method: str, headers, query_arguments: dict) -> bool:
    """Whether a request is meant for the SQS API (decided before its body is read)."""
    if method == "GET":
        return "Action" in query_arguments
    if method != "POST":
        return False
    content_type = headers.get("Content-Type", "").split(";")[0].strip().lower()
    return ("X-Amz-Target" in headers or content_type.startswith("application/x-amz-json")
            or content_type == FORM_CONTENT_TYPE or "Action" in query_arguments)


def decode(method: str, headers, query_string: str, body: bytes) -> Call:
    """The call a request makes; SqsError when it cannot be read."""
    target = headers.get("X-Amz-Target")
    if target is not None:
        if not target.startswith(TARGET_PREFIX) or len(target) == len(TARGET_PREFIX):
            raise SqsError("UnknownOperationException", f"Unknown operation {target}")
        try:
            params = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError:
            raise SqsError("SerializationException", "Start of structure or map found where "
                           "not expected.") from None
        if not isinstance(params, dict):
            raise SqsError("SerializationException", "Start of structure or map found where "
                           "not expected.")
        return Call(JSON, target[len(TARGET_PREFIX):], params)
    form = dict(parse_qsl(query_string, keep_blank_values=True))
    if method == "POST":
        try:
            form.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
        except UnicodeDecodeError:
            raise SqsError("MalformedQueryString", "The request body is not UTF-8.") from None
    operation, params = query.decode(form)
    return Call(QUERY, operation, params)


def encode(call: Call, result: dict | None, request_id: str) -> tuple[str, bytes]:
    """(content type, body) of a successful answer."""
    if call.protocol == JSON:
        return JSON_CONTENT_TYPE, orjson.dumps(result or {})
    return "text/xml", query.encode(call.operation, result, request_id)


def encode_error(protocol: str, error: SqsError, request_id: str) -> tuple[dict, bytes]:
    """(headers, body) of an error answer; its status is error.status."""
    fault = "Sender" if error.sender else "Receiver"
    headers = {"x-amzn-query-error": f"{error.code};{fault}"}
    if protocol == JSON:
        headers["Content-Type"] = JSON_CONTENT_TYPE
        return headers, orjson.dumps({"__type": f"com.amazonaws.sqs#{JSON_TYPES.get(error.name, error.name)}",
                                      "message": error.message})
    headers["Content-Type"] = "text/xml"
    if error.name in QUERY_MESSAGES:
        error = SqsError(error.name, QUERY_MESSAGES[error.name])
    return headers, query.encode_error(error, request_id)
