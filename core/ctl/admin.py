"""The commands of an operator: ls, create, delete, set and redrive, their command lines
included, through a daemon's HTTP API or the broker-less client on a root."""

import argparse
import json
import sys

from mq.client.errors import InvalidError, NotFoundError
from mq.ctl.errors import EPILOG, NOTHING, OK, USAGE, CtlError
from mq.ctl.listing import ls
from mq.ctl.records import print_json


def settings(pairs: list[str], declared: dict) -> dict:
    """key=value pairs as the properties to send, each key one the daemon declares; a value is
    text for a text property, else JSON (5, 2.5, true, {"team": "ops"}); the daemon checks it."""
    changes = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise CtlError(f"{pair!r}: expected key=value")
        if key not in declared:
            raise CtlError(f"unknown property {key!r}; known: {', '.join(sorted(declared))}")
        if isinstance(declared[key], str):
            changes[key] = text
            continue
        try:
            changes[key] = json.loads(text)
        except ValueError:
            changes[key] = text  # Sent as it is: the daemon's 400 says what it must be.
    return changes


def create(client, args) -> int:
    """Create a queue with --set properties; a refused property leaves no queue it made."""
    changes = settings(args.set or [], client.properties(args.queue)) if args.set else {}
    created = client.create_queue(args.queue)
    effective = None
    if changes:
        try:
            effective = client.set_properties(args.queue, **changes)
        except InvalidError:
            if created:
                client.delete_queue(args.queue)
            raise
    print_json({"queue": args.queue, "created": created,
                "properties": effective or client.properties(args.queue)})
    return OK


def confirmed(client, queue: str) -> bool:
    """Ask on the terminal for the queue's name before it goes (CtlError off a terminal)."""
    if not sys.stdin.isatty():
        raise CtlError(f"delete {queue}: standard input is not a terminal to confirm on; "
                       "give --yes to delete without asking", USAGE)
    ready = client.stat(queue)["ready"]
    sys.stderr.write(f"Delete queue {queue!r}, its {ready} ready messages, those delayed or in "
                     "flight, and its properties?\nType the queue name to confirm: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip() == queue


def delete(client, args) -> int:
    """Delete a queue with its messages in every state, once confirmed (or --yes)."""
    if not client.queue_exists(args.queue):
        raise NotFoundError(f"queue {args.queue!r} does not exist")
    if not args.yes and not confirmed(client, args.queue):
        print("mqctl: not deleted: the name typed was not the queue's", file=sys.stderr)
        return NOTHING
    client.delete_queue(args.queue)
    print_json({"queue": args.queue, "deleted": True})
    return OK


def set_properties(client, args) -> int:
    """Change some of a queue's own properties; print the effective ones after."""
    if not client.queue_exists(args.queue):
        raise NotFoundError(f"queue {args.queue!r} does not exist")
    changes = settings(args.pairs, client.properties(args.queue))
    print_json({"queue": args.queue, "properties": client.set_properties(args.queue, **changes)})
    return OK


def move(client, source: str, target: str, limit: float) -> int:
    """Move up to `limit` messages of `source` to `target`, one at a time: claimed, added
    with the same body and content type and the dead letter's id as de-duplication key, then
    acknowledged. A failure leaves a message in both (a run again adds none twice within the
    target's dedup_window), never in neither."""
    moved = 0
    while moved < limit:
        message = client.get(source)
        if message is None:
            break
        client.put(target, message.body, content_type=message.content_type, dedup_id=message.id)
        client.ack(message)
        moved += 1
    return moved


def redrive(client, args) -> int:
    """Move a queue's dead letters back into it (or --to another queue), all or --limit N."""
    if args.to is None and args.limit is None:
        print_json(client.redrive(args.queue))  # The daemon's one move: each a rename.
        return OK
    dead = client.properties(args.queue)["dead_letter_queue"]
    target = args.to or args.queue
    if not client.queue_exists(target):
        raise NotFoundError(f"queue {target!r} does not exist")
    moved = move(client, dead, target, args.limit if args.limit is not None else float("inf")) \
        if client.queue_exists(dead) else 0
    print_json({"queue": target, "dead_letter_queue": dead, "moved": moved})
    return OK


def add_commands(sub, where: argparse.ArgumentParser, number) -> None:
    """Add ls, create, delete, set and redrive to mqctl's sub-commands; `number` is main's
    argparse type of a bounded number."""
    def command(name: str, run, help: str, queue: bool = True):
        cmd = sub.add_parser(name, help=help, description=help, parents=[where], epilog=EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        if queue:
            cmd.add_argument("queue", metavar="QUEUE", help="the queue")
        cmd.set_defaults(run=run)
        return cmd

    listing = command("ls", ls, "list the queues with their ready, delayed, in-flight and dead "
                                "counts", queue=False)
    listing.add_argument("filter", nargs="?", metavar="FILTER",
                         help="only names holding this text, or matching it as a glob (* ? [])")
    listing.add_argument("--json", action="store_true", help="one JSON object per queue and line")

    make = command("create", create, "create a queue, with properties; print them")
    make.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="a property of the queue (repeat for more)")

    gone = command("delete", delete, "delete a queue and its messages in every state, once "
                                     "its name is typed on the terminal")
    gone.add_argument("--yes", action="store_true", help="delete without asking")

    change = command("set", set_properties, "set some of a queue's properties; print them all")
    change.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help="a property and its value")

    back = command("redrive", redrive, "move a queue's dead letters back into it")
    back.add_argument("--to", metavar="TARGET", help="into this existing queue instead")
    back.add_argument("--limit", type=number(int, 1), metavar="N", help="at most N of them")
