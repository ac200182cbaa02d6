"""How an op is served on the front ends, declared with the op: its REST route and its
MessagePack-RPC method (`operation(name, rest=Rest(...), rpc=Rpc(...))`).

The front ends read these instead of a handler written for each op: the REST routes of
http/declared.py, the RPC methods of http/rpc_methods.py (`declared_method`) and the Python
client's calls (mq.client.calls, `declared`) all turn the wire's values into the op's fields
by name and build the op with `from_payload`, so its checks are the op's own.
"""

import re
from dataclasses import dataclass, field

#: A path parameter of a route: `{field}`, one segment of the path.
_PATH_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Rest:
    """A REST route: `method path`, each `{field}` of the path one segment that is the op's
    field of that name; `query` maps each query parameter the route takes onto the field it
    fills (text fields: a query parameter is text); `body`, when set, names the field the
    request's JSON body is. The answer is the op's reply as JSON, with `status`."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    status: int = 200

    @property
    def path_fields(self) -> tuple[str, ...]:
        """The fields the path's segments fill, in order."""
        return tuple(_PATH_FIELD.findall(self.path))

    def pattern(self) -> str:
        """The route's regular expression, one group per path field (Tornado's routing)."""
        return _PATH_FIELD.sub("([^/]+)", self.path)

    def fields(self) -> tuple[str, ...]:
        """Every field the route fills: from the path, the query and the body."""
        return self.path_fields + tuple(self.query.values()) + ((self.body,) if self.body else ())


@dataclass(frozen=True)
class Rpc:
    """A MessagePack-RPC method: `method(params...)`, each parameter the op's field of that
    name (shown as `name` for the `queue` field, as every method names its queue), the first
    `required` of them required (None: all); it answers "ok", or the op's reply with `reply`."""

    method: str
    params: tuple[str, ...]
    required: int | None = None
    reply: bool = False

    def shown(self) -> tuple[str, ...]:
        """The parameters as the method's signature names them."""
        return tuple("name" if param == "queue" else param for param in self.params)


def check_wire(label: str, names: tuple, rest: Rest | None, rpc: Rpc | None) -> None:
    """TypeError when a declared route or method names a field the op does not have."""
    for name in (rest.fields() if rest else ()) + (rpc.params if rpc else ()):
        if name not in names:
            raise TypeError(f"{label}: its wire names {name!r}, which is not one of its fields")
