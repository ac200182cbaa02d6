"""The broker-less library: put, get, ack, nack, extend and revoke straight on a root, no daemon."""

from mq.local.client import LocalClient

__all__ = ["LocalClient"]
