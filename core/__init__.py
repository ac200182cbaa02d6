"""mq: a durable HTTP message queue that keeps every message as a file."""

__version__ = "0.1.0"


def installed_version() -> str:
    """The version of the installed package, from its metadata (what `pip show mq` says)."""
    import importlib.metadata  # Here: only `--version` needs it, not every process's start.

    return importlib.metadata.version("mq")
