"""The ops that name their queues by a pattern: a fan-out adds one message to each queue the
pattern matches, a pull-any claims the oldest ready message among them (docs/DELIVERY.md,
"Fan-out and pull-any"). The front runs them itself (docs/PROTOCOL.md, "Run by the front"):
its queue service finds the existing queues the pattern reaches that the caller's token may
use, then runs a fan-out as the add_fanout `over(queues)` makes, and a pull-any (actor ANY)
on the fetch actors of those queues together.

Patterns are RE2 regular expressions matched against the whole name: RE2 runs in time linear
in the name, so no pattern can stall the front (Python's re can backtrack exponentially).
"""

from dataclasses import dataclass
from typing import Annotated, Any

import re2

from mq.errors import Invalid
from mq.operations.fetch import Fetched, Wait
from mq.operations.fields import ANY, FRONT, WRITE, Operation, Reaches, operation
from mq.operations.save import MAX_FANOUT_QUEUES, AddFanout, Attributes, ContentType, Due, FannedOut

#: Longest pattern accepted, in characters.
MAX_PATTERN = 1000

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # A bad pattern is the client's 400, not a line on stderr.


def compile_pattern(pattern) -> Any:
    """The compiled pattern; Invalid when it is missing, too long or not a regular expression."""
    if not isinstance(pattern, str) or not pattern:
        raise Invalid("give the queues as a regular expression (qre)")
    if len(pattern) > MAX_PATTERN:
        raise Invalid(f"the queue pattern is over {MAX_PATTERN} characters")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except (re2.error, ValueError, TypeError) as err:
        reason = err.args[0].decode(errors="replace") if err.args and isinstance(
            err.args[0], bytes) else str(err)
        raise Invalid(f"bad regular expression {pattern!r}: {reason}") from None


def check_pattern(pattern) -> str:
    """A pattern of whole queue names, checked (compile_pattern)."""
    compile_pattern(pattern)
    return pattern


#: A pattern of queue names: the op is run on the existing queues it matches that the
#: caller's token may use (a queue it may not use is, for it, one that does not exist).
Pattern = Annotated[str, Reaches(check_pattern)]


@operation("fan_out", scope=WRITE, actor=FRONT)
@dataclass(slots=True, frozen=True, kw_only=True)
class FanOut(Operation[FannedOut]):
    """Add one message to each queue the pattern reaches, durably together (an add_fanout)."""

    pattern: Pattern
    body: bytes
    content_type: ContentType = ""
    due: Due | None = None
    attributes: Attributes | None = None

    def over(self, queues: list[str]) -> AddFanout:
        """The add_fanout to the queues the pattern reached; Invalid past MAX_FANOUT_QUEUES."""
        if len(queues) > MAX_FANOUT_QUEUES:
            raise Invalid(f"{len(queues)} queues match {self.pattern!r}; a fan-out may add to "
                          f"at most {MAX_FANOUT_QUEUES}")
        return AddFanout(queues=queues, body=self.body, content_type=self.content_type,
                         due=self.due, attributes=self.attributes)


@operation("pull_any", scope=WRITE, actor=ANY)
@dataclass(slots=True, frozen=True, kw_only=True)
class PullAny(Operation[Fetched]):
    """Claim the oldest ready message among the queues the pattern reaches, waiting up to
    `wait` seconds for one: that message with its `queue`, or {"empty": True}."""

    pattern: Pattern
    wait: Wait = 0.0
