"""What the batch operations share: the checks of their entries, and an entry's failure."""

import re

from mq.http.sqs.errors import SqsError

#: Most entries in one batch.
MAX_ENTRIES = 10
ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")


def check_entries(entries, kind: str) -> list[dict]:
    """The entries of a batch, checked as SQS checks them (kind: SendMessageBatch, ...)."""
    if not entries:
        raise SqsError("EmptyBatchRequest", f"There should be at least one {kind}RequestEntry "
                       "in the request.")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise SqsError("InvalidParameterValue", "Entries must be a list of structures.")
    if len(entries) > MAX_ENTRIES:
        raise SqsError("TooManyEntriesInBatchRequest", "Maximum number of entries per request "
                       f"are {MAX_ENTRIES}. You have sent {len(entries)}.")
    seen = set()
    for entry in entries:
        entry_id = entry.get("Id")
        if not isinstance(entry_id, str) or not ENTRY_ID.fullmatch(entry_id):
            raise SqsError("InvalidBatchEntryId", "A batch entry id can only contain "
                           "alphanumeric characters, hyphens and underscores. It can be at most "
                           "80 letters long.")
        if entry_id in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def failure(entry_id: str, error: SqsError) -> dict:
    """The Failed entry of an entry that failed alone."""
    return {"Id": entry_id, "SenderFault": error.sender, "Code": error.code, "Message": error.message}


def answer(successful: list, failed: list) -> dict:
    """A batch's result."""
    return {"Successful": successful, "Failed": failed}
