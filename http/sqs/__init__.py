"""The SQS-compatible API (docs/SQS.md): AWS JSON 1.0 and query protocol requests on mq's
queues, through the same actors as mq's own routes.

handler (routes, the operation table), protocol and query (the two wire formats), errors,
names (queue URLs, ARNs, parameters), attributes (queue attributes on properties), queues,
sending, receiving and batches (the operations), permissions (Policy statements, STS's
GetCallerIdentity), authorization (the token of a signing key, the scope and queues each
operation needs), message_attributes, md5, signatures.
"""

import tornado.routing

from mq.config import Options
from mq.http.service import QueueService
from mq.http.sqs.handler import SqsHandler, SqsRequests
from mq.http.sqs.service import SqsService
from mq.http.sqs.signatures import SignatureCheck


def routes(service: QueueService, options: Options) -> list:
    """The SQS routes, to put before mq's own: POST / and the queue URLs /{account}/{queue},
    matched only for requests meant for SQS."""
    args = {"service": service, "options": options, "sqs": SqsService(service, options),
            "signatures": SignatureCheck(options.sqs_credentials) if options.sqs_credentials else None}
    return [tornado.routing.Rule(SqsRequests(path), SqsHandler, args)
            for path in (r"/", r"/(\d{12})/([^/]+)")]
