"""The TOML file `mq --print-config` writes: every option with its --help text as a comment,
and what each auto option came to on this machine (etc/mq.toml is one, less those lines)."""

import json
import textwrap
from dataclasses import fields

from mq.config import Options, field_kind, flag_name, help_text
from mq.sizing import AUTO

SAMPLE_HEADER = """\
# mq configuration: every option of the `mq` command, as read by core/config.py.
# Written by `mq --print-config`; each comment is the option's --help text and default.
#
# Use it with `mq --config FILE` (or MQ_CONFIG=FILE). Precedence: command-line flag >
# MQ_<NAME> environment variable > this file > default. Keys are the flag names with "_"
# (or "-"); an unknown key stops mq with exit status 2. docs/OPERATIONS.md explains each."""


#: The comment line of --print-config that says what an auto option came to here.
RESOLVED = "# Resolved on this machine: "


def _toml_value(value) -> str:
    """A value of Options as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # JSON string escapes are TOML's, except that TOML also forbids a raw DEL.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return repr(value)


def sample_config(options: Options | None = None) -> str:
    """A TOML config file setting every option to its value in options (the defaults if None);
    an option given as auto stays auto, with what it came to on this machine in a comment."""
    options = options or Options()
    parts = [SAMPLE_HEADER]
    for field in fields(Options):
        parts.append("")
        parts += textwrap.wrap(help_text(field) + ".", width=93, initial_indent="# ",
                               subsequent_indent="# ", break_on_hyphens=False)
        flags = flag_name(field)
        if field_kind(field) is bool:
            flags += " / --no-" + field.name.replace("_", "-")
        parts.append(f"# Flag {flags}, environment MQ_{field.name.upper()}.")
        if field.name in options.auto:
            parts.append(f"{RESOLVED}{field.name} = {getattr(options, field.name)} "
                         f"({options.auto[field.name]}).")
            parts.append(f"{field.name} = {_toml_value(AUTO)}")
            continue
        parts.append(f"{field.name} = {_toml_value(getattr(options, field.name))}")
    return "\n".join(parts) + "\n"
