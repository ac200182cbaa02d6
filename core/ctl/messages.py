"""The commands on one message or one queue: put, get, ack, peek, stat, purge."""

import os
import sys
from itertools import islice

from mq.client import Message
from mq.ctl.errors import NOTHING, OK, CtlError
from mq.ctl.records import print_json, write_message
from mq.ctl.scan import PAGE, ready_after


def read_body(args) -> bytes:
    """put's body: the argument as given, else the --file, else standard input."""
    if args.body is not None and args.file is not None:
        raise CtlError("give the body as an argument or with --file, not both")
    if args.body is not None and args.body != "-":
        return os.fsencode(args.body)  # The bytes the shell passed, even when not UTF-8.
    if args.file is not None and args.file != "-":
        try:
            with open(args.file, "rb") as f:
                return f.read()
        except OSError as err:
            raise CtlError(f"cannot read {args.file}: {err.strerror}") from None
    return sys.stdin.buffer.read()


def put(client, args) -> int:
    """Add one message; print its id."""
    message_id = client.put(args.queue, read_body(args), delay=args.delay, at=args.at,
                            dedup_id=args.dedup_id, content_type=args.content_type)
    print(message_id)
    return OK


def get(client, args) -> int:
    """Claim the oldest ready message and print it with its receipt; --ack deletes it after."""
    message = client.get(args.queue, wait=args.wait)
    if message is None:
        return NOTHING
    out = sys.stdout.buffer
    write_message(out, message, body_only=args.body, receipt=True)
    # Printed before the ack: a failure in between delivers the message again, never loses it.
    out.flush()
    if args.ack:
        client.ack(message)
    return OK


def ack(client, args) -> int:
    """Acknowledge (delete) a claimed message by its id and receipt, as get printed them."""
    client.ack(Message(queue=args.queue, id=args.id, body=b"", content_type="",
                       receipt=args.receipt, attempts=0, created_ms=None))
    return OK


def peek(client, args) -> int:
    """Print up to --max ready messages without claiming them, oldest first."""
    out = sys.stdout.buffer
    shown = 0
    for message in islice(ready_after(client, args.queue, args.after, min(args.max, PAGE)), args.max):
        write_message(out, message, body_only=args.body)
        shown += 1
    return OK if shown else NOTHING


def stat(client, args) -> int:
    """Print a queue's ready count and properties."""
    state = client.stat(args.queue)
    # One order of keys, whichever client answered (the daemon's JSON has its own).
    print_json({"queue": state["queue"], "ready": state["ready"], **state})
    return OK


def purge(client, args) -> int:
    """Remove every message of a queue, in every state; print how many."""
    print_json({"queue": args.queue, "purged": client.purge(args.queue)})
    return OK
