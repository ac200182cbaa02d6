"""The HTTP client of mq: Client (sync) and AsyncClient (asyncio), Producer and Consumer."""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mq.client.aio import AsyncClient
    from mq.client.aio_consumer import AsyncConsumer
    from mq.client.api import DEFAULT_URL
    from mq.client.consumer import Consumer
    from mq.client.errors import (
                                  ClientError,
                                  ConflictError,
                                  ForbiddenError,
                                  InvalidError,
                                  NotFoundError,
                                  ServerError,
                                  StorageError,
                                  TooLargeError,
                                  TooLongError,
                                  UnauthorizedError,
                                  UnavailableError,
    )
    from mq.client.message import Message
    from mq.client.producer import Producer
    from mq.client.sync import Client

__all__ = ["AsyncClient", "AsyncConsumer", "Client", "ClientError", "ConflictError", "Consumer",
           "DEFAULT_URL", "InvalidError", "Message", "NotFoundError", "Producer", "ServerError",
           "StorageError", "TooLargeError", "TooLongError", "UnavailableError",
           "UnauthorizedError", "ForbiddenError"]

#: The module of each name above. A name is imported on first use: mq.local and mqctl's work
#: on a root take Message and the errors from here, and importing httpx and asyncio for the
#: clients besides cost them half a CPU second at every start.
_MODULES = {"AsyncClient": "aio", "AsyncConsumer": "aio_consumer", "DEFAULT_URL": "api",
            "Consumer": "consumer", "Message": "message", "Producer": "producer", "Client": "sync",
            **{name: "errors" for name in __all__ if name.endswith("Error")}}


def __getattr__(name: str):
    """One of the names above, imported from its module the first time it is asked for."""
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    globals()[name] = value
    return value
