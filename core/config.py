"""Options of every mq command: defaults, units, and where each value may come from.

Precedence: command-line flag, then MQ_* environment variable, then the TOML config file
(--config or MQ_CONFIG), then the default below.
"""

import argparse
import json
import math
import os
import tomllib
from dataclasses import asdict, dataclass, fields

from mq.errors import Invalid


@dataclass
class Options:
    """The daemon's settings; each field's unit is in its name or its help text."""

    #: Directory holding the folder structure; must be writable.
    root: str = "/tmp/mq"
    #: Pairs of save and fetch actor processes.
    workers: int = 8
    #: Other daemons sharing the root, considered when fetching (0: strict FIFO).
    peers: int = 0
    #: Address the HTTP front listens on.
    host: str = "127.0.0.1"
    #: Port the HTTP front listens on.
    port: int = 8080
    #: Seconds a fetched message stays invisible before it is delivered again.
    timeout: float = 30.0
    #: "fs": one syncfs(2) per batch; "file": fsync every file and directory.
    sync: str = "fs"
    #: Create a queue on the first add to it; when off, adding to a missing queue is 404.
    auto_create: bool = True
    #: Largest message body accepted, in bytes.
    max_body_bytes: int = 16 * 1024 * 1024
    #: Adds in flight on one save actor before the front sends adds to the next (0: spread).
    save_batch: int = 256
    #: Adds waiting on the least busy save actor beyond which a new add gets 503 (overload).
    max_waiting_adds: int = 4096
    #: Seconds the front waits for an actor before answering 503.
    actor_timeout: float = 10.0
    #: File the JSON log lines go to (reopened on SIGHUP); empty: standard output.
    log_file: str = ""
    #: Lowest level logged: debug, info, warning, error.
    log_level: str = "info"
    #: One log line per HTTP request.
    access_log: bool = True
    #: Folder of the ZeroMQ sockets; empty: {root}/run/{host}-{pid}, or a temp dir if too long.
    run_dir: str = ""

    def to_json(self) -> str:
        """The options as JSON, the form children receive them in."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Options":
        """Options from the JSON to_json wrote."""
        return cls(**json.loads(text))

    def check(self) -> "Options":
        """Raise Invalid when a value is out of range."""
        if self.workers < 1 or self.workers > 256:
            raise Invalid("--workers must be between 1 and 256")
        if self.peers < 0:
            raise Invalid("--peers must be 0 or more")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise Invalid("--timeout must be a finite number of seconds more than 0")
        if not (self.actor_timeout > 0 and math.isfinite(self.actor_timeout)):
            raise Invalid("--actor-timeout must be a finite number of seconds more than 0")
        if self.save_batch < 0:
            raise Invalid("--save-batch must be 0 or more")
        if self.max_waiting_adds < 1:
            raise Invalid("--max-waiting-adds must be 1 or more")
        if self.max_body_bytes < 0:
            raise Invalid("--max-body-bytes must be 0 or more")
        if self.sync not in ("fs", "file"):
            raise Invalid("--sync must be 'fs' or 'file'")
        if self.log_level not in ("debug", "info", "warning", "error"):
            raise Invalid("--log-level must be debug, info, warning or error")
        if not 1 <= self.port <= 65535:
            raise Invalid("--port must be between 1 and 65535")
        return self


HELP = {
    "root": "directory in which the folder structure is created; must be writable (default /tmp/mq)",
    "workers": "pairs of save and fetch actor processes to start (default 8)",
    "peers": "other daemons sharing the root to consider when fetching; 0 keeps strict FIFO (default 0)",
    "host": "address to listen on (default 127.0.0.1)",
    "port": "port to listen on (default 8080)",
    "timeout": "seconds a fetched message stays invisible before redelivery (default 30)",
    "sync": "fs: one syncfs(2) per batch of messages; file: fsync each file and folder (default fs)",
    "auto_create": "create a queue on the first add to it (default on; --no-auto-create for 404)",
    "max_body_bytes": "largest message body in bytes (default 16777216)",
    "save_batch": "adds waiting on one save actor before the front uses the next one: bigger "
                  "batches share flushes; 0 sends each add to the least busy (default 256)",
    "max_waiting_adds": "adds waiting on every save actor beyond which a new add is refused "
                        "with 503 and Retry-After, rather than queued (default 4096)",
    "actor_timeout": "seconds to wait for an actor before answering 503 (default 10)",
    "log_file": "write JSON log lines to this file, reopened on SIGHUP (default standard output)",
    "log_level": "debug, info, warning or error (default info)",
    "access_log": "log one line per HTTP request (default on; --no-access-log turns it off)",
    "run_dir": "folder for the ZeroMQ sockets (default {root}/run/{host}-{pid})",
}


def field_kind(field) -> type:
    """The Python type of an Options field."""
    return {"int": int, "float": float, "str": str, "bool": bool}.get(field.type, field.type)


def _convert(field, value):
    """Convert a text value from the environment to the field's type."""
    if field_kind(field) is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise Invalid(f"{field.name}: expected true or false, got {value!r}")
    kind = field_kind(field)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise Invalid(f"{field.name}: expected {kind.__name__}, got {value!r}") from None


def build_parser(prog: str = "mq") -> argparse.ArgumentParser:
    """The mq command line: the seed's flags plus host, port and the others in Options."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="mq: a durable HTTP message queue that stores each message as a file. "
        "Options may also come from MQ_<NAME> environment variables or a TOML file "
        "(--config); flags win over both.",
    )
    parser.add_argument("--config", help="TOML file of options (keys as below, with _)")
    for field in fields(Options):
        flag = "--" + field.name.replace("_", "-")
        if field_kind(field) is bool:
            parser.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction,
                                default=None, help=HELP[field.name])
        else:
            kind = field_kind(field)
            parser.add_argument(flag, dest=field.name, type=kind, default=None,
                                help=HELP[field.name])
    return parser


def load_options(argv: list[str] | None = None, environ: dict | None = None) -> Options:
    """Resolve Options from flags, environment and config file, in that order of precedence."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    values: dict = {}
    config_path = args.config or environ.get("MQ_CONFIG")
    if config_path:
        try:
            with open(config_path, "rb") as f:
                loaded = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise Invalid(f"config file {config_path}: {err}") from None
        known = {f.name: f for f in fields(Options)}
        for key, value in loaded.items():
            name = key.replace("-", "_")
            if name not in known:
                raise Invalid(f"config file {config_path}: unknown option {key!r}")
            values[name] = _convert(known[name], value)
    for field in fields(Options):
        env_value = environ.get("MQ_" + field.name.upper())
        if env_value is not None:
            values[field.name] = _convert(field, env_value)
        flag_value = getattr(args, field.name)
        if flag_value is not None:
            values[field.name] = flag_value
    return Options(**values).check()
