"""The one translation of the store's failures into the errors an mq client raises."""

import functools

from mq.client.errors import CLASSES, ClientError, ServerError
from mq.errors import MqError, from_os_error


def client_error(err: MqError) -> ClientError:
    """The client error that reports a store failure: the class of its kind, the one an HTTP
    client raises for it (mq.client.errors), with its kind and message."""
    return CLASSES.get(err.kind, ServerError)(err.message, kind=err.kind)


def translated(method):
    """Decorate a LocalClient method so that it raises only ClientError subclasses.

    A disk failure goes through mq.errors.from_os_error, the daemon's own errno table, so a
    full disk is UnavailableError here as it is 503 over HTTP.
    """
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except MqError as err:
            raise client_error(err) from err
        except OSError as err:
            raise client_error(from_os_error(err, f"cannot {method.__name__}")) from err
    return wrapper
