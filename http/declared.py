"""The REST routes the ops declare (`rest=Rest(...)` in `operation`, mq.operations.wire): one
handler class per declared path, made from the declarations, so that such an op needs no
handler or route written for it.

A request's path segments, query parameters and JSON body become the op's fields by name; the
op is built with `from_payload` (its own checks: a bad value is a 400 naming it), run by the
queue service (the access check on every queue it touches) and its reply answered as JSON.
"""

from collections import defaultdict
from typing import ClassVar

from mq.http.api import ApiHandler, accepts
from mq.operations import OPS, Operation


class DeclaredHandler(ApiHandler):
    """The route of one declared path: each of its HTTP methods runs the op declared for it."""

    #: HTTP method -> the op it runs (filled per route by `handler_for`).
    ops: ClassVar[dict[str, type[Operation]]] = {}

    async def run_op(self, *segments: str) -> None:
        """Build the op of the request's method from the request, run it, answer its reply."""
        op = self.ops[self.request.method or ""]
        rest = op.rest
        assert rest is not None, "only ops with a REST route get one"
        payload: dict = dict(zip(rest.path_fields, segments))
        for name in ("queue", "id"):
            if name in payload:
                self.log_fields[name] = payload[name]
        if self.request.query:
            for parameter, name in rest.query.items():
                value = self.get_query_argument(parameter, None)
                if value is not None:
                    payload[name] = value
        if rest.body is not None:
            payload[rest.body] = self.json_body()
        # A missing field goes as absent: the op's check answers that it is required.
        result = await self.service.run(self.token, op.from_payload(payload))
        self.write_json(rest.status, result)


def handler_for(path: str, ops: dict[str, type[Operation]]) -> type[DeclaredHandler]:
    """The handler class of one declared path, with a method per HTTP method declared on it
    (each taking the query parameters its op declares, `accepts`)."""
    methods = {}
    for method, op in ops.items():
        assert op.rest is not None

        async def handle(self, *segments: str) -> None:
            await self.run_op(*segments)
        handle.__doc__ = (op.__doc__ or op.op).splitlines()[0]
        methods[method.lower()] = accepts(*op.rest.query)(handle)
    return type(f"Declared{path.replace('/', '_')}", (DeclaredHandler,),
                {"ops": ops, "__doc__": f"{', '.join(ops)} {path}.", **methods})


def routes(args: dict) -> list[tuple]:
    """A route for each path the ops declare, with args (the queue service and the options)."""
    by_path: dict[str, dict[str, type[Operation]]] = defaultdict(dict)
    for op in OPS.values():
        if op.rest is not None:
            if op.rest.method in by_path[op.rest.path]:
                raise TypeError(f"{op.rest.method} {op.rest.path} is declared by two ops")
            by_path[op.rest.path][op.rest.method] = op
    found = []
    for path, ops in by_path.items():
        rest = next(iter(ops.values())).rest
        assert rest is not None
        found.append((rest.pattern(), handler_for(path, ops), args))
    return found
