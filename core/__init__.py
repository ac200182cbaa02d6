"""mq: a durable HTTP message queue that keeps every message as a file."""

import sys

__version__ = "0.1.0"


def installed_version() -> str:
    """The version of the installed package, from its metadata (what `pip show mq` says)."""
    import importlib.metadata  # Here: only `--version` needs it, not every process's start.

    return importlib.metadata.version("mq")


def add_version_flag(parser) -> None:
    """Give an argparse parser --version: print "PROG VERSION" and exit.

    The version is read when the flag is given, not when the parser is built: importing
    importlib.metadata costs about a tenth of a CPU second, which every start of mq and mqctl
    paid for a flag it was not given."""
    import argparse

    class Version(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            sys.stdout.write(f"{parser.prog} {installed_version()}\n")
            parser.exit()

    parser.add_argument("--version", action=Version, nargs=0,
                        help="print the installed version of mq and exit")
