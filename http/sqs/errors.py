"""The errors of the SQS API as SQS sends them: one table from the error's name to the code a
query-protocol client sees and the HTTP status, and the exception that carries one."""

from mq.errors import BY_NAME, MqError

#: name (the JSON protocol's `__type` after '#') -> (query-protocol code, HTTP status, sender's
#: fault). The JSON protocol also sends the query code, in `x-amzn-query-error`. SQS answers
#: every error of its own with 400 (the API reference lists no other status for them); only the
#: errors of authentication common to AWS APIs are 403.
ERRORS = {
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400, True),
    "QueueNameExists": ("QueueAlreadyExists", 400, True),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400, True),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 400, True),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400, True),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 400, True),
    "InvalidIdFormat": ("InvalidIdFormat", 400, True),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, True),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400, True),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, True),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400, True),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400, True),
    "InvalidAttributeName": ("InvalidAttributeName", 400, True),
    "InvalidAttributeValue": ("InvalidAttributeValue", 400, True),
    "InvalidMessageContents": ("InvalidMessageContents", 400, True),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400, True),
    "ResourceNotFoundException": ("ResourceNotFoundException", 400, True),
    "InvalidAddress": ("InvalidAddress", 400, True),
    "InvalidSecurity": ("AWS.SimpleQueueService.InvalidSecurity", 400, True),
    "OverLimit": ("OverLimit", 400, True),
    "RequestThrottled": ("RequestThrottled", 400, True),
    # Errors common to every AWS query API.
    "InvalidParameterValue": ("InvalidParameterValue", 400, True),
    "InvalidParameterCombination": ("InvalidParameterCombination", 400, True),
    "MissingParameter": ("MissingParameter", 400, True),
    "InvalidAction": ("InvalidAction", 400, True),
    "UnknownOperationException": ("InvalidAction", 400, True),
    "MalformedQueryString": ("MalformedQueryString", 400, True),
    "SerializationException": ("SerializationException", 400, True),
    "MissingAuthenticationToken": ("MissingAuthenticationToken", 403, True),
    "IncompleteSignature": ("IncompleteSignature", 400, True),
    "InvalidClientTokenId": ("InvalidClientTokenId", 403, True),
    "AccessDenied": ("AccessDenied", 403, True),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403, True),
    "InternalFailure": ("InternalError", 500, False),
    "ServiceUnavailable": ("ServiceUnavailable", 503, False),
}


#: The JSON protocol's `__type` of errors whose shape has another name than their code.
JSON_TYPES = {"AccessDenied": "AccessDeniedException",
              "InvalidParameterValue": "InvalidParameterValueException",
              "MissingParameter": "MissingRequiredParameterException"}
#: The query protocol's older wording of some messages.
QUERY_MESSAGES = {"QueueDoesNotExist": "The specified queue does not exist for this wsdl version."}


class SqsError(Exception):
    """An error answer: its name in ERRORS and the message SQS gives."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name
        self.message = message
        self.code, self.status, self.sender = ERRORS[name]


def queue_missing() -> SqsError:
    """The answer for a queue that does not exist."""
    return SqsError("QueueDoesNotExist", "The specified queue does not exist.")


def invalid(message: str) -> SqsError:
    """InvalidParameterValue with SQS's message."""
    return SqsError("InvalidParameterValue", message)


def missing(parameter: str) -> SqsError:
    """MissingParameter for a required parameter."""
    return SqsError("MissingParameter", f"The request must contain the parameter {parameter}.")


def from_mq(error: MqError) -> SqsError:
    """An mq error kind as the SQS error a client can act on (503: retry; 500: report): the
    one its kind names in mq.errors.TABLE."""
    name = BY_NAME.get(error.kind, BY_NAME["internal"]).sqs
    if name == "QueueDoesNotExist":
        return queue_missing()  # SQS's own words, whichever queue mq's message named.
    return SqsError(name, error.message)
