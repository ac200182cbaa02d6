"""The HTTP client of mq: Client (sync) and AsyncClient (asyncio), Producer and Consumer."""

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
