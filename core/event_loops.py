"""The front's asyncio event loop (--event-loop): uvloop where it is installed, else asyncio's.

uvloop (libuv under asyncio's interface) took a fifth off the front's CPU per durable add on
16 cores, and a few percent off fetches on 2 (bench/RESULTS.md, "Many cores"). The actors and
the supervisor run no asyncio loop and are not concerned.
"""

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

from mq.errors import Invalid

if TYPE_CHECKING:
    # Imported where a loop is made or asked for: the options (mq.config) are read by mq.local
    # and mqctl too, which run no loop, and asyncio costs a tenth of a CPU second to import.
    import asyncio

UVLOOP = "uvloop"
ASYNCIO = "asyncio"
#: The values of --event-loop; "auto" is resolved by pick() when the options are read.
CHOICES = ("auto", UVLOOP, ASYNCIO)


def uvloop_installed() -> bool:
    """Whether uvloop can be imported here (it has no Windows build)."""
    return importlib.util.find_spec(UVLOOP) is not None


def pick() -> tuple[str, str]:
    """What --event-loop auto stands for here, and why (for --print-config)."""
    if uvloop_installed():
        return UVLOOP, "uvloop is installed"
    return ASYNCIO, "uvloop is not installed"


def check(name: str) -> None:
    """Raise Invalid unless name is a loop this interpreter can run."""
    if name not in CHOICES:
        raise Invalid(f"--event-loop must be auto, uvloop or asyncio, not {name!r}")
    if name == UVLOOP and not uvloop_installed():
        raise Invalid("--event-loop uvloop: uvloop is not installed (pip install uvloop; it has "
                      "no Windows build); --event-loop asyncio runs the standard loop")


def factory(name: str) -> Callable[[], "asyncio.AbstractEventLoop"]:
    """A new loop of the kind named, for asyncio.Runner(loop_factory=...)."""
    import asyncio

    if name == UVLOOP:
        import uvloop

        return uvloop.new_event_loop
    # The selector loop itself, not asyncio.new_event_loop(): that asks the loop policy, which
    # an installed policy (uvloop's, in a sitecustomize) would have changed.
    return asyncio.SelectorEventLoop


def running() -> str:
    """The kind of the loop running now: uvloop or asyncio (for the logs and /metrics)."""
    import asyncio

    module = type(asyncio.get_running_loop()).__module__
    return UVLOOP if module.startswith(UVLOOP) else ASYNCIO
