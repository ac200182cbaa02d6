"""How an operation is declared and how its payload is checked: once per class, not per request.

An operation is a slotted, frozen, keyword-only dataclass whose field types say what the
payload may hold (`Annotated[T, check, ...]` adds checks of range or form; a `Sequence[T]`
is a list on the wire whose default may be an immutable `()`). `operation(name)`
registers it and compiles, from its fields, the one list of (name, check, default) its
`from_payload` walks: no reflection per request. A field with a default takes it when the
payload lacks the field or holds nil; one without is required.

The class is the op's whole contract (docs/ARCHITECTURE.md, "How to add an operation"):
`operation(name, scope=..., actor=...)` says which token scope runs it and which actor
serves it, the class's base names its reply type (`OnQueue[Acked]`), and the queues it
touches are its fields typed as queues (`Queue`, a list of queues, `Properties`' dead-letter
queue): each such type carries a `Touches` mark, and `touched()` walks the marked fields, so
an access check cannot miss a queue field, whatever it is called. A field marked `Reaches`
(a pattern of queue names, mq.operations.patterns) makes the op one the front runs on the
queues the pattern reaches that the token may use: only its scope is checked.
"""

import dataclasses
import operator
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from mq.errors import Invalid
from mq.operations.wire import Rest, Rpc, check_wire
from mq.store import validate_id, validate_queue

#: op name -> its request class, filled by operation().
OPS: dict[str, type["Operation"]] = {}

#: The token scopes an op may need (mq.tokens.RANKS), lowest first.
READ, WRITE, ADMIN = "read", "write", "admin"
#: Which actor serves an op: the save actor with room, the fetch actor that owns its queue
#: (fetch actor 0 when it names none), every actor (the statistics), the mover; or the front
#: itself, on the queues its pattern reaches: as the op its `over(queues)` makes (FRONT), or
#: on the fetch actors of those queues together, the oldest ready message among them (ANY).
SAVE, FETCH, EVERY, MOVER, FRONT, ANY = "save", "fetch", "every", "mover", "front", "any"

_REQUIRED = object()

#: An op's reply type.
R = TypeVar("R")


class Touches:
    """A field type's mark: the value checked as `check` does, and the queues it names are
    queues the op touches (`names(value)`), each of which its access check tests."""

    __slots__ = ("check", "names")

    def __init__(self, check: Callable[[Any], Any], names: Callable[[Any], Any]):
        self.check = check
        self.names = names

    def __call__(self, value):
        """The value, checked."""
        return self.check(value)


class Reaches:
    """A field type's mark: the value (checked as `check` does) is a pattern of queue names,
    and the op is run on the queues it reaches, those the caller's token may use."""

    __slots__ = ("check",)

    def __init__(self, check: Callable[[Any], Any]):
        self.check = check

    def __call__(self, value):
        """The value, checked."""
        return self.check(value)


class Operation(Generic[R]):
    """Base of every request type: its op name, its fields, their payload form, and its
    contract (scope, actor, reply type, the queues it touches)."""

    __slots__ = ()
    #: The op's name on the wire ("op" of the payload).
    op: ClassVar[str] = ""
    #: The token scope it needs (READ, WRITE, ADMIN).
    scope: ClassVar[str] = ADMIN
    #: Which actor serves it (SAVE, FETCH, EVERY, MOVER, FRONT, ANY).
    actor: ClassVar[str] = FETCH
    #: A FETCH op a busy fetch actor of its queue may hand to the next (ActorPool.taker):
    #: a claim, or a reply by receipt (any fetch actor can rename a delivery away).
    spread: ClassVar[bool] = False
    #: Its reply's type (the class's type argument: `Operation[Fetched]`), dict when untyped.
    reply: ClassVar[Any] = dict
    #: (field, names) per field whose type is marked Touches, compiled by operation().
    queue_fields: ClassVar[tuple] = ()
    #: The field whose type is marked Reaches (a pattern of queues), compiled by operation().
    reaches: ClassVar[str | None] = None
    #: (field, check, default) per field, compiled by operation().
    spec: ClassVar[tuple] = ()
    #: The field names, in declaration order.
    names: ClassVar[tuple] = ()
    #: field -> its declared Limit (a field with one), compiled by operation().
    limits: ClassVar[dict] = {}
    #: Its REST route and RPC method, when the front ends serve it as declared (wire.py).
    rest: ClassVar[Rest | None] = None
    rpc: ClassVar[Rpc | None] = None

    @classmethod
    def from_payload(cls, payload: dict):
        """The request a payload holds, checked; Invalid naming the first field that is wrong."""
        return cls(**cls.checked(payload, cls.spec))

    @classmethod
    def checked(cls, payload: dict, spec: tuple | list) -> dict:
        """The values of the fields of spec (some of cls.spec) in payload, each checked as
        the op declares it (a missing one: its default); Invalid naming the first wrong."""
        values = {}
        get = payload.get
        for name, check, default in spec:
            value = get(name)
            if value is None:
                if default is _REQUIRED:
                    raise Invalid(f"{cls.op}: {name} is required")
                values[name] = default
            else:
                values[name] = check(value) if check is not None else value
        return values

    def touched(self) -> list[str] | None:
        """The queues the op touches, for its access check: those its queue-typed fields name
        (a nil field names none); none when a pattern names them (the queues it reaches are
        the token's); None when it has no such field: it is about every queue."""
        if not self.queue_fields:
            return [] if self.reaches else None
        queues: list[str] = []
        for name, names in self.queue_fields:
            value = getattr(self, name)
            if value is not None:
                queues += names(value)
        return queues

    def over(self, queues: list[str]) -> "Operation":
        """The op a FRONT op comes to on the queues its pattern reached."""
        raise TypeError(f"{self.op}: the front does not run it over queues")

    def weight(self) -> int:
        """How many adds it counts as in a save actor's load (a batch add: its messages)."""
        return 1

    def to_payload(self) -> dict:
        """The request's fields as the payload map (without "v" and "op")."""
        return dict(zip(self.names, self.values(self)))

    @staticmethod
    def values(request) -> tuple:
        """The request's field values in the order of `names` (compiled by operation())."""
        return ()


class OnQueue(Operation[R]):
    """Base of the operations about one queue, which their `queue` field names (and which
    routes them to the queue's fetch actor)."""

    __slots__ = ()
    queue: str


def operation(name: str, scope: str = ADMIN, actor: str = FETCH, rest: Rest | None = None,
              rpc: Rpc | None = None, spread: bool = False):
    """Class decorator: register a request dataclass under its op name, with the scope that
    runs it, the actor that serves it, whether another fetch actor may serve it (spread),
    and (optional) its REST route and RPC method, and compile its checks and its queue
    fields."""
    if scope not in (READ, WRITE, ADMIN) or actor not in (SAVE, FETCH, EVERY, MOVER, FRONT, ANY):
        raise TypeError(f"op {name!r}: no scope {scope!r} or no actor {actor!r}")
    if spread and actor != FETCH:
        raise TypeError(f"op {name!r}: only a fetch actor's op is spread over fetch actors")

    def register(cls: Any) -> Any:
        # Any: what is compiled below replaces Operation's defaults (`values` a method there).
        if not is_operation(cls):
            raise TypeError(f"{cls.__qualname__} must be an Operation dataclass")
        if name in OPS:
            raise TypeError(f"op {name!r} is declared twice")
        hints = typing.get_type_hints(cls, include_extras=True)
        spec = []
        for field in dataclasses.fields(cls):
            if field.default_factory is not dataclasses.MISSING:
                # One default serves every request decoded: a mutable one would be shared.
                raise TypeError(f"{cls.__qualname__}.{field.name}: give an immutable default")
            if field.default is not dataclasses.MISSING:
                default = field.default
            else:
                default = _REQUIRED
            spec.append((field.name, checker(f"{name}: {field.name}", hints[field.name]), default))
        cls.op, cls.spec, cls.scope, cls.actor, cls.spread = name, tuple(spec), scope, actor, spread
        cls.reply = reply_type(cls)
        cls.names = tuple(field[0] for field in spec)
        cls.queue_fields = tuple((name, mark.names) for name in cls.names
                                 for mark in marks(hints[name]))
        patterns = [name for name in cls.names
                    if any(isinstance(mark, Reaches) for mark in metadata(hints[name]))]
        if (len(patterns) == 1) != (actor in (FRONT, ANY)) or patterns and cls.queue_fields:
            # The front runs an op on its pattern's queues, and only such an op.
            raise TypeError(f"{cls.__qualname__}: the front runs an op with one pattern "
                            "field and no queue field, and no other")
        cls.reaches = patterns[0] if patterns else None
        for field_name in cls.names:
            if validate_queue in metadata(hints[field_name]):
                # Checked as a queue's name but not marked: the access check would miss it.
                raise TypeError(f"{cls.__qualname__}.{field_name}: type a queue as Queue")
        cls.limits = {name: limit for name in cls.names for limit in declared_limits(hints[name])}
        check_wire(cls.__qualname__, cls.names, rest, rpc)
        cls.rest, cls.rpc = rest, rpc
        if len(cls.names) > 1:
            cls.values = staticmethod(operator.attrgetter(*cls.names))
        elif cls.names:
            only = cls.names[0]
            cls.values = staticmethod(lambda request: (getattr(request, only),))
        OPS[name] = cls
        return cls
    return register


def is_operation(cls: object) -> bool:
    """Whether cls is a dataclass that subclasses Operation."""
    return isinstance(cls, type) and dataclasses.is_dataclass(cls) and issubclass(cls, Operation)


def reply_type(cls) -> Any:
    """The reply type an op class names as its base's type argument (`OnQueue[Acked]`)."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if args and not isinstance(args[0], TypeVar):
                return args[0]
    return dict


def metadata(hint) -> list:
    """The checks and marks of a field type (Annotated, also inside T | None)."""
    found: list = []
    while True:
        if typing.get_origin(hint) is Annotated:
            hint, *more = typing.get_args(hint)
            found += more
        elif isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint, = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        else:
            return found


def marks(hint) -> list[Touches]:
    """The Touches marks of a field type: the field names queues the op touches."""
    return [mark for mark in metadata(hint) if isinstance(mark, Touches)]


def checker(label: str, hint):
    """The function that checks (and may normalize) one field's value, None when any goes."""
    extra: list = []
    while True:
        if typing.get_origin(hint) is Annotated:
            hint, *more = typing.get_args(hint)
            extra = more + extra
        elif isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            # Nil is handled before the check (it means the default), so T | None checks as T.
            hint, = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        else:
            break
    base = _type_check(label, typing.get_origin(hint) or hint)
    if not extra:
        return base
    # A mark checks as its own check does: called directly, one call fewer per value.
    extra = [more.check if isinstance(more, (Touches, Reaches)) else more for more in extra]
    if len(extra) == 1:  # the usual case: no loop per value
        only = extra[0]
        if base is None:
            return only
        return lambda value: only(base(value))

    def check(value):
        if base is not None:
            value = base(value)
        for more in extra:
            value = more(value)
        return value
    return check


def _type_check(label: str, kind):
    """A check that the value is of a wire type: str, bytes, bool, int, float, list, dict."""
    if kind is Any or kind is object:
        return None
    if kind is abc.Sequence:
        # A list on the wire, typed Sequence so that its default can be () (operation()
        # refuses a mutable default, which every request decoded would share).
        kind = list
    if kind is float:
        def check(value):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise Invalid(f"{label} must be a number, not {value!r}")
            return value
    elif kind is int:
        def check(value):
            if isinstance(value, bool) or not isinstance(value, int):
                raise Invalid(f"{label} must be a whole number, not {value!r}")
            return value
    elif kind in (str, bytes, bool, list, dict):
        what = {str: "a string", bytes: "bytes", bool: "true or false", list: "a list",
                dict: "a map"}[kind]

        def check(value):
            if not isinstance(value, kind):
                raise Invalid(f"{label} must be {what}")
            return value
    else:
        raise TypeError(f"{label}: no wire check for {kind!r}")
    return check


@dataclasses.dataclass(frozen=True)
class Limit:
    """A field's declared limit, which checks it: a number from low to high, or (counts) a list
    of low to high items (a string: characters), both ends included. Each op lists its own in
    `limits`, so that the limits can be documented and walked (tests) without reading the
    checks."""

    low: float
    high: float
    #: What the field is, in errors.
    what: str
    counts: bool = False
    #: The check, when it is not the plain one (its error in its own words).
    check: Callable[[Any], Any] | None = None

    def __call__(self, value):
        """The value, checked; Invalid when it is out of the limit."""
        if self.check is not None:
            return self.check(value)
        if self.counts:
            if not self.low <= len(value) <= self.high:
                raise Invalid(f"{self.what} must be a list of {self.low:g} to {self.high:g}, "
                              f"not {len(value)}")
        elif not self.low <= value <= self.high:
            raise Invalid(f"{self.what} must be from {self.low:g} to {self.high:g}, not {value!r}")
        return value


def between(low: float, high: float, what: str) -> Limit:
    """A check that a number is from low to high (both included); what names it in errors."""
    return Limit(low, high, what)


def count(high: int, what: str) -> Limit:
    """A check that a list holds 1 to high items; what names them in errors."""
    return Limit(1, high, what, counts=True)


def declared_limits(hint) -> list[Limit]:
    """The Limits among a field type's checks (Annotated, also inside T | None)."""
    return [check for check in metadata(hint) if isinstance(check, Limit)]


def each(item_check):
    """A check of a list's every item (returns the list)."""
    def check(value):
        for item in value:
            item_check(item)
        return value
    return check


#: A queue the op touches: its name checked (mq.store's rules), and checked against the
#: caller's token.
Queue = Annotated[str, Touches(validate_queue, lambda queue: (queue,))]
#: The check of a list of queues the op touches (`Annotated[list, count(...), EACH_QUEUE]`):
#: each name checked, and each checked against the caller's token.
EACH_QUEUE = Touches(each(validate_queue), tuple)
#: A message id (a lower-case UUID).
MessageId = Annotated[str, validate_id]
