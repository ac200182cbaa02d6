"""The routes of queues: create, inspect, delete, peek, redrive, properties and the default
property rules (purge is the route its op declares, http/declared.py)."""

import base64

from mq import trace_context
from mq.http.api import ApiHandler, accepts
from mq.numbers import parse_number
from mq.operations import (
    Peek,
    PropsDelete,
    PropsGet,
    PropsPatch,
    PropsPut,
    QueueDelete,
    QueueGet,
    QueuePut,
    Redrive,
    RulesDelete,
    RulesGet,
    RulesPut,
)


class QueueHandler(ApiHandler):
    """GET, PUT and DELETE /{queue}."""


    async def get(self, name: str) -> None:
        """200 when the queue exists, 404 when not."""
        queue = self.queue_name(name)
        result = await self.service.run(self.token, QueueGet(queue=queue))
        self.write_json(200, result)

    async def put(self, name: str) -> None:
        """Create the queue: 201 when created, 200 when it already existed."""
        queue = self.queue_name(name)
        result = await self.service.run(self.token, QueuePut(queue=queue))
        self.write_json(201 if result["created"] else 200, {"queue": queue, "created": result["created"]})

    async def delete(self, name: str) -> None:
        """Delete the queue and all its messages, in every state: 204."""
        queue = self.queue_name(name)
        await self.service.run(self.token, QueueDelete(queue=queue))
        self.set_status(204)
        self.finish()


class RedriveHandler(ApiHandler):
    """POST /{queue}/redrive: move the queue's dead letters back into it."""


    async def post(self, name: str) -> None:
        """Answer how many messages came back."""
        queue = self.queue_name(name)
        # The actor is told the very dead-letter queue the service checks the token on (the
        # move reads it), so a property changed meanwhile moves nothing unchecked.
        props = await self.service.run(self.token, PropsGet(queue=queue))
        source = props["effective"]["dead_letter_queue"]
        self.write_json(200, await self.service.run(self.token, Redrive(queue=queue, source=source)))


class PeekHandler(ApiHandler):
    """GET /{queue}/peek?max=N&after=ID: the oldest ready messages, none claimed."""


    @accepts("max", "after")
    async def get(self, name: str) -> None:
        """Up to max (default 10) messages, bodies in base64, oldest first."""
        queue = self.queue_name(name)
        count = parse_number("max", self.get_query_argument("max", None), 10, int, 1)
        # A frame carries 64-bit integers at most; the actor refuses any max over its own limit.
        count = min(count, 1 << 31)
        after = self.get_query_argument("after", None)
        result = await self.service.run(self.token, Peek(queue=queue, max=count, after=after))
        for message in result["messages"]:
            message["body"] = base64.b64encode(message["body"]).decode()
            # Of a protocol layer's metadata, only the trace context is shown, as a fetch does.
            message.update(trace_context.of_message(message.pop("attributes", None)))
        self.write_json(200, {"queue": queue, "messages": result["messages"]})


class PropertiesHandler(ApiHandler):
    """GET|PUT|PATCH|DELETE /{queue}/properties."""


    async def props(self, request: PropsGet | PropsPut | PropsPatch | PropsDelete) -> None:
        """Send the properties op and answer the queue's properties after it."""
        result = await self.service.run(self.token, request)
        self.write_json(200, {"queue": request.queue, "properties": result["effective"],
                              "own": result["own"]})

    async def get(self, name: str) -> None:
        """The queue's effective properties and the ones set on it."""
        await self.props(PropsGet(queue=self.queue_name(name)))

    async def put(self, name: str) -> None:
        """Replace the queue's own properties (a body that is no JSON object: 400)."""
        await self.props(PropsPut(queue=self.queue_name(name), properties=self.json_body()))

    async def patch(self, name: str) -> None:
        """Change some of the queue's own properties (a body that is no JSON object: 400)."""
        await self.props(PropsPatch(queue=self.queue_name(name), properties=self.json_body()))

    async def delete(self, name: str) -> None:
        """Reset the queue's own properties (rules and system defaults apply again)."""
        await self.props(PropsDelete(queue=self.queue_name(name)))


class DefaultRulesHandler(ApiHandler):
    """GET|PUT|DELETE /_mq/properties: the ordered [regex, properties] default rules."""


    async def get(self) -> None:
        """The rules."""
        self.write_json(200, (await self.service.run(self.token, RulesGet()))["rules"])

    async def put(self) -> None:
        """Replace the rules."""
        rules = RulesPut(rules=self.json_body())
        self.write_json(200, (await self.service.run(self.token, rules))["rules"])

    async def delete(self) -> None:
        """Remove every rule."""
        self.write_json(200, (await self.service.run(self.token, RulesDelete()))["rules"])
