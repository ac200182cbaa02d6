"""mqctl: put, get, ack, peek, stat, tail, purge, export and load the messages of mq queues;
list, create, delete, set and redrive the queues; through a daemon's URL or straight on a root
folder; status of a running daemon."""

import argparse
import os
import sys

from mq import add_version_flag
from mq.ctl import admin, messages
from mq.ctl.errors import (
    EPILOG,
    INTERRUPTED,
    NOT_FOUND,
    READER_GONE,
    UNAVAILABLE,
    USAGE,
    CtlError,
    describe,
    status_of,
)
from mq.ctl.export import export
from mq.ctl.load import load
from mq.ctl.status import status
from mq.ctl.tail import tail
from mq.errors import Invalid
from mq.numbers import parse_number
from mq.schedule import parse_time
from mq.store import Root
from mq.store.root import RootMissing

DEFAULT_URL = "http://127.0.0.1:8080"
#: Where-to-work options left out: they may come before or after the command (see target()).
DEFAULTS = {"url": None, "root": None, "create_root": False, "root_id": None, "timeout": 30.0,
            "retries": 5, "token": None, "ca": None}
#: How a user of mqctl makes a root, in the error for a --root folder that is none.
CREATE_HINT = "mq --create-root, or mqctl --root DIR --create-root"


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr and exit status 2."""

    def error(self, message):
        """A usage error: one line on stderr, then exit status 2."""
        self.exit(USAGE, f"mqctl: {message} (see '{self.prog} --help')\n")


class CommandParser(Parser):
    """A command's parser: its options may come between its positionals (`load Q --lines
    FILE`), which plain argparse takes for unrecognized arguments once an optional positional
    has matched nothing before the option."""

    intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        """parse_known_intermixed_args, which itself calls back here for its two passes."""
        if self.intermixing:
            return super().parse_known_args(args, namespace)
        self.intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self.intermixing = False


def checked(parse):
    """An argparse type from a parser of mq's that raises Invalid."""
    def run(text):
        try:
            return parse(text)
        except Invalid as err:
            raise argparse.ArgumentTypeError(err.message.removeprefix(": ")) from None
    return run


def number(kind=float, low: float = 0):
    """An argparse type: a finite `kind` of at least `low`."""
    return checked(lambda text: parse_number("", text, None, kind, low))


def target() -> CommandParser:
    """The options saying where to work, for the command line and each command alike."""
    # A CommandParser because typeshed types add_parser's parents as the subparsers' class; a
    # parent only lends its arguments and is never parsed itself.
    parent = CommandParser(add_help=False)
    group = parent.add_argument_group("where")
    # SUPPRESS: a command's copy of an option must not reset the value given before the command.
    group.add_argument("--url", default=argparse.SUPPRESS,
                       help=f"the daemon (default $MQ_URL, else {DEFAULT_URL})")
    group.add_argument("--root", default=argparse.SUPPRESS,
                       help="work straight on this existing root folder instead, with no daemon")
    group.add_argument("--create-root", action="store_true", default=argparse.SUPPRESS,
                       help="--root: make the root first when the folder is missing or empty "
                            "(only where no daemon shares it: see docs/COMMANDS.md, mqctl)")
    group.add_argument("--root-id", default=argparse.SUPPRESS,
                       help="--root: refuse a root whose ID is another (mq --create-root prints it)")
    group.add_argument("--timeout", type=number(), default=argparse.SUPPRESS,
                       help=f"--url: seconds to wait for an answer (default {DEFAULTS['timeout']:g})")
    group.add_argument("--retries", type=number(int), default=argparse.SUPPRESS,
                       help="--url: tries again after a 503 or a lost connection "
                            f"(default {DEFAULTS['retries']})")
    group.add_argument("--token", default=argparse.SUPPRESS,
                       help="--url: the bearer token of a daemon with access control (default "
                            "$MQ_TOKEN); prefer $MQ_TOKEN, as other users can read a command line")
    group.add_argument("--ca", default=argparse.SUPPRESS,
                       help="--url https://: PEM file of the authorities to trust for the "
                            "daemon's certificate (default $MQ_CA, else the system's)")
    return parent


def build_parser() -> Parser:
    """The command line."""
    where = target()
    parser = Parser(prog="mqctl", description=__doc__, epilog=EPILOG, parents=[where],
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_flag(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=CommandParser)

    def command(name: str, run, help: str) -> Parser:
        cmd = sub.add_parser(name, help=help, description=help, parents=[where], epilog=EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.add_argument("queue", metavar="QUEUE", help="the queue")
        cmd.set_defaults(run=run)
        return cmd

    def body_option(cmd: Parser, what: str) -> None:
        cmd.add_argument("--body", action="store_true",
                         help=f"print {what} body and a newline, not the JSON record")

    put = command("put", messages.put, "add one message; print its id")
    put.add_argument("body", nargs="?", metavar="BODY",
                     help="the body (default: --file, else standard input)")
    put.add_argument("--file", help="read the body from this file ('-': standard input)")
    put.add_argument("--content-type", help="stored with the message (default application/octet-stream)")
    when = put.add_mutually_exclusive_group()
    when.add_argument("--delay", type=number(), help="seconds before it becomes visible")
    when.add_argument("--at", type=checked(parse_time),
                      help="when it becomes visible: RFC 3339 (2026-11-23T10:00:00Z) or Unix seconds")
    put.add_argument("--dedup-id", help="de-duplication key: a second add with it is dropped")

    get = command("get", messages.get, "claim the oldest ready message; print it with its receipt")
    get.add_argument("--wait", type=number(), default=0.0,
                     help="seconds to wait for one when none is ready (at most 20; default 0)")
    get.add_argument("--ack", action="store_true", help="acknowledge it once printed (consume it)")
    body_option(get, "its")

    ack = command("ack", messages.ack, "acknowledge (delete) a message claimed by get")
    ack.add_argument("id", metavar="ID", help="the message id get printed")
    ack.add_argument("receipt", metavar="RECEIPT", help="the receipt get printed")

    peek = command("peek", messages.peek, "print ready messages, oldest first, claiming none")
    peek.add_argument("-n", "--max", type=number(int, 1), default=10,
                      help="at most this many (default 10)")
    peek.add_argument("--after", help="only ids above this one (for paging)")
    body_option(peek, "each")

    command("stat", messages.stat, "print a queue's count of ready messages and its properties")

    follow = command("tail", tail, "print the newest ready messages; -f: then each new one, unconsumed")
    follow.add_argument("-f", "--follow", action="store_true",
                        help="keep printing new messages until stopped")
    follow.add_argument("-n", "--lines", type=number(int), default=10,
                        help="how many of the ready messages to print first (default 10)")
    follow.add_argument("--interval", type=number(float, 0.01), default=0.5,
                        help="seconds between two looks for new messages (default 0.5)")
    body_option(follow, "each")

    command("purge", messages.purge, "remove every message of a queue in every state; print how many")

    out = command("export", export, "write a queue's messages as JSON lines, or as one file each")
    out.add_argument("-o", "--output", help="JSON lines file to write (default standard output)")
    out.add_argument("--folder",
                     help="write one file per message instead, named by its id, holding its body")
    out.add_argument("--consume", action="store_true",
                     help="claim and acknowledge each message once durably written (default: only read)")
    out.add_argument("--max", type=number(int, 1), help="at most this many messages")

    into = command("load", load, "add messages from export's JSON lines, a folder of files, or lines")
    into.add_argument("input", nargs="?", default="-", metavar="INPUT",
                      help="a JSON lines file, a folder (one message per file) or '-' "
                           "(default: standard input)")
    into.add_argument("--lines", action="store_true",
                      help="each non-blank input line is one message body (content type text/plain)")
    into.add_argument("--content-type", help="content type of every message (default: the record's)")
    into.add_argument("--dedup", action="store_true",
                      help="use each record's id (a file's name) as de-duplication key, so that a "
                           "load run again adds nothing twice within the dedup window")
    admin.add_commands(sub, where, number)
    state = sub.add_parser("status", parents=[where], epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           help="print the daemon's processes, root and queues (exit 4 when one is down)",
                           description="print the daemon's processes, root and queues (exit 4 "
                                       "when one is down)")
    state.add_argument("--json", action="store_true", help="print the health and statistics as JSON")
    state.set_defaults(run=status)
    return parser


def http_client() -> type:
    """mq.client.Client, imported for --url only, and with httpx's own command line (its
    `httpx.main`, which loads click and rich where they are installed) taken for absent: a
    seventh of a CPU second that mqctl, a short process, would pay at every run."""
    if "httpx" in sys.modules or "click" in sys.modules:
        from mq.client import Client
    else:
        sys.modules["click"] = None  # type: ignore[assignment]  # What httpx.main needs first.
        try:
            from mq.client import Client
        finally:
            del sys.modules["click"]
    return Client


def open_client(args):
    """A Client on --url, or a LocalClient on --root."""
    if args.root is None:
        Client = http_client()
        try:
            return Client(args.url, timeout=args.timeout, retries=args.retries,
                          token=args.token, ca=args.ca)
        except ValueError as err:  # A URL that is not http(s)://, a timeout of 0, a bad CA.
            raise CtlError(str(err)) from None
    from mq.local import LocalClient  # Here: the store's side is for --root only.

    if args.create_root:
        return LocalClient(args.root, create_root=True, root_id=args.root_id or "")
    # A root is only opened: a folder without FORMAT may be the empty mount point of the
    # shared file system, and a root made there would be a second one (exit 4, unavailable).
    if not os.path.isdir(args.root):
        raise CtlError(f"root {args.root}: no such folder", NOT_FOUND)
    root = Root(args.root)
    try:
        root.require_format(CREATE_HINT)
    except RootMissing as err:
        raise CtlError(err.message, UNAVAILABLE) from None
    return LocalClient(root.root, root_id=args.root_id or "")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line read, with the where-to-work options filled in."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "url") and hasattr(args, "root"):
        parser.error("give --url or --root, not both")
    if not hasattr(args, "root") and (hasattr(args, "create_root") or hasattr(args, "root_id")):
        parser.error("--create-root and --root-id go with --root")
    for name, value in DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    if args.root is None and args.url is None:
        args.url = os.environ.get("MQ_URL") or DEFAULT_URL
    if args.token is None:
        args.token = os.environ.get("MQ_TOKEN") or None
    if args.ca is None:
        args.ca = os.environ.get("MQ_CA") or None
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of mqctl: run one command; its exit status (EPILOG lists them)."""
    args = parse(argv)
    try:
        client = open_client(args)
        try:
            return args.run(client, args)
        finally:
            client.close()
    except KeyboardInterrupt:
        print("mqctl: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing, and keep Python's exit-time flush of
        # stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return READER_GONE
    except Exception as err:  # Anything at all ends as one line, never a traceback.
        print(f"mqctl: {describe(err)}", file=sys.stderr)
        return status_of(err)


if __name__ == "__main__":
    sys.exit(main())
