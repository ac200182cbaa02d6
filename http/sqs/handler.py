"""The Tornado side of the SQS API: which requests are SQS's (a route matcher), the handler that
decodes a call, runs its operation and answers in the protocol it came in, and the table of
operations."""

import uuid

import tornado.routing
import tornado.web

from mq import logs
from mq.config import Options
from mq.errors import MqError
from mq.http.api import ApiHandler
from mq.http.disk_errors import disk_error
from mq.http.messages import UNLIMITED_CHUNKED_BODY
from mq.http.service import QueueService
from mq.http.sqs import attributes, authorization, permissions, protocol, queues, receiving, sending
from mq.http.sqs.errors import SqsError, from_mq, queue_missing
from mq.http.sqs.names import DEFAULT_REGION, Caller
from mq.http.sqs.service import SqsService
from mq.http.sqs.signatures import SignatureCheck, signed_region

#: Operation name -> async function(service, caller, params) -> result or None.
OPERATIONS = {
    "CreateQueue": queues.create_queue,
    "GetQueueUrl": queues.get_queue_url,
    "ListQueues": queues.list_queues,
    "DeleteQueue": queues.delete_queue,
    "PurgeQueue": queues.purge_queue,
    "GetQueueAttributes": queues.get_queue_attributes,
    "SetQueueAttributes": queues.set_queue_attributes,
    "TagQueue": queues.tag_queue,
    "UntagQueue": queues.untag_queue,
    "ListQueueTags": queues.list_queue_tags,
    "ListDeadLetterSourceQueues": queues.list_dead_letter_source_queues,
    "StartMessageMoveTask": queues.start_message_move_task,
    "ListMessageMoveTasks": queues.list_message_move_tasks,
    "CancelMessageMoveTask": queues.cancel_message_move_task,
    "AddPermission": permissions.add_permission,
    "RemovePermission": permissions.remove_permission,
    # STS's, on the same endpoint: tools ask it for the account before they call SQS.
    "GetCallerIdentity": permissions.get_caller_identity,
    "SendMessage": sending.send_message,
    "SendMessageBatch": sending.send_message_batch,
    "ReceiveMessage": receiving.receive_message,
    "DeleteMessage": receiving.delete_message,
    "DeleteMessageBatch": receiving.delete_message_batch,
    "ChangeMessageVisibility": receiving.change_message_visibility,
    "ChangeMessageVisibilityBatch": receiving.change_message_visibility_batch,
}


#: Operations that name no queue, refused when sent to a queue's URL (as SQS refuses them).
QUEUELESS = ("CreateQueue", "ListQueues", "GetCallerIdentity")
#: STS's operation speaks STS's protocol, the query protocol, only.
QUERY_ONLY = ("GetCallerIdentity",)


class SqsRequests(tornado.routing.PathMatches):
    """Matches a path only for requests meant for the SQS API (an SQS content type or target
    header, or an Action parameter), so mq's own routes on the same paths keep theirs."""

    def match(self, request):
        """The path's groups for an SQS request, else None."""
        # The path first: it rules out mq's own requests at once (these rules come first).
        groups = super().match(request)
        if groups is None or not protocol.is_sqs(request.method, request.headers,
                                                 request.query_arguments):
            return None
        return groups


def request_limit(options: Options) -> int:
    """The largest SQS request body: the largest message with every byte escaped as JSON
    escapes a control character (six bytes), and room for the rest of the call."""
    return 6 * min(options.max_body_bytes, attributes.MAPPED["MaximumMessageSize"][1]) + 65536


@tornado.web.stream_request_body
class SqsHandler(ApiHandler):
    """POST / (and GET /?Action=), and the query protocol's POST to a queue URL.

    The body is streamed in under a limit of its own (request_limit), so that a message over
    the queue's MaximumMessageSize is answered as SQS answers it, whatever --max-body-bytes
    makes of the server's limit on other routes.
    """

    # SQS clients sign their requests (SigV4) and send no bearer token: with --sqs-credentials
    # the signature is the check, and with --token-file too the signing key's token decides
    # (http/sqs/authorization.py); with --token-file alone, serve() refuses every call.
    open_methods = frozenset({"GET", "POST"})
    # The query string is AWS's query protocol (Action=...), checked as SQS checks it.
    checks_query = False

    def initialize(self, service: QueueService, options: Options, sqs: SqsService | None = None,
                   signatures: SignatureCheck | None = None) -> None:
        """Take the SQS service the operations use and the signature check, if any."""
        super().initialize(service, options)
        # A default only as ApiHandler.initialize takes two arguments: every route gives it.
        assert sqs is not None, "the SQS routes give their handler the SqsService"
        self.sqs = sqs
        self.signatures = signatures

    def prepare(self) -> None:
        """Set the body limit of SQS calls before the body is read."""
        super().prepare()
        self.chunks: list[bytes] = []
        self.received = 0
        self.limit = request_limit(self.config)
        length = self.request.headers.get("Content-Length", "")
        # A body over the limit is read and dropped (data_received), then refused as SQS
        # refuses a call; a chunked one declares no length and is counted as it comes.
        self.http_connection().set_max_body_size(
            max(int(length), self.limit) if length.isdigit() else UNLIMITED_CHUNKED_BODY)

    def data_received(self, chunk: bytes) -> None:
        """Collect the body, up to the limit (the rest is dropped and the call refused)."""
        self.received += len(chunk)
        if self.received <= self.limit:
            self.chunks.append(chunk)

    async def post(self, account: str | None = None, queue: str | None = None) -> None:
        """Run the call the request makes."""
        self.request.body = b"".join(self.chunks)
        if self.received > self.limit:
            kind = protocol.JSON if "X-Amz-Target" in self.request.headers else protocol.QUERY
            return self.answer_error(kind, SqsError("InvalidParameterValue", "One or more "
                                     f"parameters are invalid. Reason: the request is longer "
                                     f"than {self.limit} bytes."), str(uuid.uuid4()))
        await self.serve(queue, account)

    async def get(self, account: str | None = None, queue: str | None = None) -> None:
        """A query-protocol call in the query string."""
        await self.serve(queue, account)

    def caller(self) -> Caller:
        """The base of queue URLs, the account and the region this request speaks for."""
        base = self.config.sqs_base_url.rstrip("/") or f"{self.request.protocol}://{self.request.host}"
        return Caller(base, self.config.sqs_account,
                      signed_region(self.request.headers) or DEFAULT_REGION, self.request.connection,
                      self.log_fields)

    async def serve(self, queue: str | None, account: str | None = None) -> None:
        """Decode, check the signature, run the operation, answer; every failure as SQS's."""
        request = self.request
        request_id = str(uuid.uuid4())
        kind = protocol.JSON if "X-Amz-Target" in request.headers else protocol.QUERY
        try:
            if self.signatures is None and self.application.tokens is not None:
                raise SqsError("MissingAuthenticationToken", "this daemon checks bearer tokens "
                               "(--token-file): the SQS API needs --sqs-credentials to check "
                               "signatures")
            key = None
            if self.signatures is not None:
                key = self.signatures.check(
                    request.method, f"{request.protocol}://{request.host}{request.uri}",
                    request.headers, request.body)
            call = protocol.decode(request.method, request.headers, request.query, request.body)
            kind = call.protocol
            self.log_fields["sqs"] = call.operation
            if isinstance(call.params.get("QueueUrl"), str):
                self.log_fields["queue"] = call.params["QueueUrl"].rstrip("/").rpartition("/")[2]
            operation = OPERATIONS.get(call.operation)
            if operation is None or (queue is not None and call.operation in QUEUELESS) or \
                    (kind == protocol.JSON and call.operation in QUERY_ONLY):
                raise SqsError("UnknownOperationException" if kind == protocol.JSON else "InvalidAction",
                               f"The action {call.operation} is not valid for this endpoint.")
            if queue is not None and "QueueUrl" not in call.params:
                call.params["QueueUrl"] = f"/{account}/{queue}"
            caller = self.caller()
            caller.token = authorization.token_of(self.application.tokens, key)
            if caller.token is not None:
                self.log_fields["token"] = caller.token.name
            authorization.authorize(caller.token, call.operation, call.params)
            url = call.params.get("QueueUrl")
            if isinstance(url, str) and not caller.owns_url(url):
                raise queue_missing()
            result = await operation(self.sqs.acting(caller.token), caller, call.params)
        except SqsError as err:
            return self.answer_error(kind, err, request_id)
        except MqError as err:
            return self.answer_error(kind, from_mq(err), request_id)
        except OSError as err:  # A read of the root (the queue list, properties) that failed.
            error = disk_error(err, f"cannot {self.log_fields.get('sqs', 'answer')}", self.config.root)
            return self.answer_error(kind, from_mq(error), request_id)
        except Exception:
            logs.get().exception("sqs.error", path=request.path)
            return self.answer_error(kind, SqsError("InternalFailure", "internal error"), request_id)
        content_type, body = protocol.encode(call, result, request_id)
        self.set_header("Content-Type", content_type)
        self.set_header("x-amzn-RequestId", request_id)
        self.finish(body)

    def answer_error(self, kind: str, error: SqsError, request_id: str) -> None:
        """An error in the protocol of the request."""
        headers, body = protocol.encode_error(kind, error, request_id)
        self.set_status(error.status)
        for name, value in headers.items():
            self.set_header(name, value)
        self.set_header("x-amzn-RequestId", request_id)
        if error.status == 503:
            self.set_header("Retry-After", "1")
        self.log_fields["sqs_error"] = error.code
        self.finish(body)
