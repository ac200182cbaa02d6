"""POST and GET /_mq/messages?qre=REGEX: fan-out (add one message to every queue whose name
matches) and pull-any (fetch one message from whichever of them has the oldest), through
QueueService (http/service.py), which MessagePack-RPC shares."""

import time

import tornado.web

from mq import trace_context
from mq.errors import Invalid
from mq.http import batches, compound
from mq.http.api import accepts
from mq.http.messages import StreamedBodyHandler, connection_closed
from mq.numbers import parse_number
from mq.operations import FanOut, PullAny
from mq.schedule import due_time


@tornado.web.stream_request_body
class RoutedMessagesHandler(StreamedBodyHandler):
    """POST and GET /_mq/messages?qre=REGEX (the body is streamed in as for one queue)."""

    # Of the queues that match, only those the token may use are reached (QueueService.reaching).

    def pattern(self) -> str:
        """The qre parameter: a regular expression of whole queue names."""
        pattern = self.get_query_argument("qre", None)
        self.log_fields["qre"] = pattern
        if not pattern:
            raise Invalid("give the queues as a regular expression: ?qre=REGEX")
        return pattern

    @accepts("qre", "delay", "at")
    async def post(self) -> None:
        """Fan-out: 201 with each queue and the id of its copy, once every copy is durable;
        404 when no queue matches."""
        pattern = self.pattern()
        body = self.received_body()
        if self.param("dedup_id", "X-Dedup-Id"):
            raise Invalid("dedup_id is not supported on a fan-out add")
        due = due_time(self.param("delay", "X-Delay"), self.param("at", "X-At"), time.time())
        context = trace_context.parse(self.header("traceparent"), self.header("tracestate"))
        messages = (await self.service.run(self.token, FanOut(
            pattern=pattern, body=body, content_type=self.content_type or "", due=due,
            attributes=context or None)))["messages"]
        self.log_fields["queues"] = len(messages)
        if context:
            self.log_fields["traceparent"] = context["tp"]
        self.write_json(201, {"messages": [
            {"queue": m["queue"], **batches.added_record(m)} for m in messages]})

    @accepts("qre", "wait", "cf")
    async def get(self) -> None:
        """Pull-any: the oldest ready message of the matching queues, its queue in X-Queue;
        204 when none came within ?wait=N seconds; 404 when no queue matches."""
        pattern = self.pattern()
        wait = parse_number("wait", self.param("wait", "X-Wait"), 0.0)
        cf = compound.compound_format(self.param("cf", "X-Compound-Format"))
        sock = self.http_connection().stream.socket
        result = await self.service.run(self.token, PullAny(pattern=pattern, wait=wait),
                                        gone=lambda: connection_closed(sock))
        if result.get("empty"):
            self.set_status(204)
            self.finish()
            return
        self.log_fields["queue"] = result["queue"]
        self.set_header("X-Queue", result["queue"])
        self.send_message(result, cf)
