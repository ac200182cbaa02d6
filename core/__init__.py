"""mq: a durable HTTP message queue that keeps every message as a file."""

__version__ = "0.1.0"
