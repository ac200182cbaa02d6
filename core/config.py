"""Options of every mq command: defaults, units, and where each value may come from.

Precedence: command-line flag, then MQ_* environment variable, then the TOML config file
(--config or MQ_CONFIG), then the default below.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import ssl
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from mq import add_version_flag, event_loops
from mq.errors import Invalid
from mq.sizing import AUTO, auto_fronts, auto_workers, count, usable_cores

#: Shortest --hang-timeout: an idle process turns its loop every half second.
MIN_HANG_TIMEOUT = 2.0


def option(default, help: str, empty: str = "", auto=None, listener: bool = False):
    """An Options field with its --help text; the text's "(default X)" is made from `default`.

    auto: cores -> the value "auto" stands for, on a machine with that many cores.
    listener: the field is a TCP port the fronts listen on (on --host; 0: off), which the
    supervisor checks free and holds at start-up (`Options.listeners`).
    """
    metadata: dict[str, Any] = {"help": help}
    if listener:
        metadata["listener"] = True
    if empty:
        metadata["empty"] = empty  # What an empty string means, said in place of "".
    if auto:
        metadata["auto"] = auto
    return dataclasses.field(default=default, metadata=metadata)


@dataclass
class Options:
    """The daemon's settings; each field's unit is in its name or its help text."""

    root: str = option("/tmp/mq", "directory in which the folder structure is created; must be "
                       "writable")
    workers: int = option(AUTO, "pairs of save and fetch actor processes to start; auto: one a "
                          "core, at least 2", auto=auto_workers)
    fronts: int = option(AUTO, "HTTP front processes sharing the port (SO_REUSEPORT); the kernel "
                         "spreads connections over them; auto: one per 4 cores, at least 1",
                         auto=auto_fronts)

    def __post_init__(self) -> None:
        # "auto" is resolved here, once: every user of the options sees a number, and the
        # children get the number (to_json). `auto` remembers which were sized, for
        # --print-config, with what each came from.
        self.auto: dict[str, str] = {}
        for field in fields(self):
            sizer = field.metadata.get("auto")
            if sizer and isinstance(getattr(self, field.name), str):
                if getattr(self, field.name) != AUTO:
                    raise Invalid(f"{flag_name(field)} must be a number or auto")
                cores = usable_cores()
                setattr(self, field.name, sizer(cores))
                self.auto[field.name] = f"{cores} cores"
        if self.event_loop == AUTO:
            self.event_loop, self.auto["event_loop"] = event_loops.pick()
    peers: int = option(0, "other daemons sharing the root to consider when fetching; 0 keeps "
                        "strict FIFO")
    peer_rescan: float = option(5.0, "with --peers, seconds between two listings of delay/ by "
                                "the mover, which time what other daemons put there (a dead "
                                "daemon's messages in flight among them)")
    host: str = option("127.0.0.1", "address to listen on")
    port: int = option(8080, "port to listen on", listener=True)
    timeout: float = option(30.0, "seconds a fetched message stays invisible before redelivery")
    sync: str = option("auto", "fs: one syncfs(2) per batch of messages; file: fsync each file "
                       "and folder; auto: file on FUSE, NFS, CephFS, SMB, 9p and Lustre (where "
                       "syncfs may not reach stable storage), else fs")
    rename_check: str = option("refuse", "what a daemon with --peers does when its start-up "
                               "check finds that the root's file system cannot rename without "
                               "replacing (renameat2 RENAME_NOREPLACE), so that two daemons "
                               "could hand out one message at once: refuse (exit 2) or warn")
    root_id: str = option("", "the root's ID (mq --create-root prints it): at a path whose root "
                          "has another, mq waits, answering 503", empty="any mq root")
    spare_files: int = option(65_536, "files of removed messages the reaper keeps to write new "
                              "messages into, sparing the file system an inode and a block per "
                              "message (with sync fs; each one 4 KiB block at most, so 256 MiB "
                              "for the default); 0 unlinks them")
    auto_create: bool = option(True, "create a queue on the first add to it; when off, adding to "
                               "a missing queue is 404")
    max_body_bytes: int = option(16 * 1024 * 1024, "largest message body in bytes")
    max_batch_bytes: int = option(64 * 1024 * 1024, "largest body of a batch add (JSON lines "
                                  "or multipart/mixed) in bytes; each message in it is still "
                                  "limited by max_body_bytes")
    save_batch: int = option(256, "adds waiting on one save actor before the front uses the next "
                             "one: bigger batches share flushes; 0 sends each add to the least "
                             "busy")
    flush_group: bool = option(False, "with sync fs, the actors share their syncfs calls: one "
                               "skips its own when a syncfs another actor started after its "
                               "changes has completed (about half the syncfs calls under "
                               "load, but on ext4 no less CPU: bench/RESULTS.md, Many cores)")
    max_waiting_adds: int = option(4096, "adds waiting on every save actor beyond which a new add "
                                   "is refused with 503 and Retry-After, rather than queued")
    event_loop: str = option(AUTO, "asyncio event loop of the fronts: uvloop, asyncio (the "
                             "standard library's) or auto: uvloop when it is installed")
    actor_timeout: float = option(10.0, "seconds to wait for an actor before answering 503")
    hang_timeout: float = option(30.0, "seconds a process may go without a turn of its loop (a "
                                 "batch and its flush, a pass of the reaper) before the "
                                 "supervisor takes it as hung, kills it and starts another; 0 "
                                 "turns this off")
    log_file: str = option("", "write JSON log lines to this file, reopened on SIGHUP",
                           empty="standard output")
    log_level: str = option("info", "debug, info, warning or error")
    access_log: bool = option(True, "log one line per HTTP request")
    run_dir: str = option("", "folder for the ZeroMQ sockets", empty="{root}/run/{host}-{pid}")
    token_file: str = option("", "TOML file of bearer tokens with their scopes and queues; "
                             "every request then needs one", empty="none: access control off")
    max_url_bytes: int = option(8192, "longest request URL in bytes (path and query); longer is "
                                "414")
    max_header_bytes: int = option(65536, "largest request line and headers in bytes; the "
                                   "connection of a larger one is closed")
    idle_timeout: float = option(60.0, "seconds a connection may wait between requests, or take "
                                 "to send a request's line and headers, before it is closed")
    body_timeout: float = option(300.0, "seconds a client may take to send a request body "
                                 "before its connection is closed")
    statsd: str = option("", "HOST:PORT of a StatsD server to send the statistics to over UDP",
                         empty="off")
    statsd_interval: float = option(10.0, "seconds between two sends of StatsD lines")
    statsd_prefix: str = option("mq", "first segment of every StatsD metric name")
    rpc_port: int = option(0, "port of the MessagePack-RPC server, on --host (18800 is usual); 0 "
                           "turns it off", listener=True)
    sqs_account: str = option("000000000000", "the twelve-digit account id of the SQS API's "
                              "queue URLs and ARNs")
    sqs_base_url: str = option("", "public base URL of the SQS API's queue URLs, such as "
                               "https://mq.example.com", empty="the scheme and Host of each request")
    sqs_port: int = option(0, "port of the SQS API; 0 serves it on --port beside mq's own routes",
                           listener=True)
    sqs_credentials: str = option("", "AWS credentials file (INI, aws_access_key_id and "
                                  "aws_secret_access_key per section) whose keys the SQS API "
                                  "checks signatures against; needs botocore",
                                  empty="signatures are not checked")
    tls_cert: str = option("", "PEM file of the certificate (with its chain) that --port, "
                           "--sqs-port and --rpc-port present: with --tls-key they speak TLS "
                           "(HTTPS)", empty="none: plain TCP")
    tls_key: str = option("", "PEM file of the private key of --tls-cert (unencrypted)",
                          empty="none")

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
        if self.fronts < 1 or self.fronts > 64:
            raise Invalid("--fronts must be between 1 and 64")
        if self.peers < 0:
            raise Invalid("--peers must be 0 or more")
        if not (self.peer_rescan > 0 and math.isfinite(self.peer_rescan)):
            raise Invalid("--peer-rescan must be a finite number of seconds more than 0")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise Invalid("--timeout must be a finite number of seconds more than 0")
        if not (self.actor_timeout > 0 and math.isfinite(self.actor_timeout)):
            raise Invalid("--actor-timeout must be a finite number of seconds more than 0")
        if not (self.hang_timeout == 0 or (self.hang_timeout >= MIN_HANG_TIMEOUT
                                           and math.isfinite(self.hang_timeout))):
            raise Invalid(f"--hang-timeout must be 0 (off) or a finite number of seconds of at "
                          f"least {MIN_HANG_TIMEOUT:g}")
        if self.save_batch < 0:
            raise Invalid("--save-batch must be 0 or more")
        if self.max_waiting_adds < 1:
            raise Invalid("--max-waiting-adds must be 1 or more")
        if self.max_body_bytes < 0:
            raise Invalid("--max-body-bytes must be 0 or more")
        if self.spare_files < 0:
            raise Invalid("--spare-files must be 0 or more")
        if self.max_batch_bytes < 0:
            raise Invalid("--max-batch-bytes must be 0 or more")
        if self.sync not in ("auto", "fs", "file"):
            raise Invalid("--sync must be 'auto', 'fs' or 'file'")
        if self.rename_check not in ("refuse", "warn"):
            raise Invalid("--rename-check must be 'refuse' or 'warn'")
        if self.log_level not in ("debug", "info", "warning", "error"):
            raise Invalid("--log-level must be debug, info, warning or error")
        if not 1 <= self.port <= 65535:
            raise Invalid("--port must be between 1 and 65535")
        if self.max_url_bytes < 16:
            raise Invalid("--max-url-bytes must be 16 or more")
        if self.max_header_bytes < self.max_url_bytes:
            raise Invalid("--max-header-bytes must be at least --max-url-bytes")
        for name in ("idle_timeout", "body_timeout"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise Invalid(f"--{name.replace('_', '-')} must be a finite number of seconds "
                              "more than 0")
        host, sep, port = self.statsd.rpartition(":")
        if self.statsd and not (sep and host.strip("[]") and port.isdigit() and 1 <= int(port) <= 65535):
            raise Invalid("--statsd must be HOST:PORT, with a port from 1 to 65535")
        if not (self.statsd_interval > 0 and math.isfinite(self.statsd_interval)):
            raise Invalid("--statsd-interval must be a finite number of seconds more than 0")
        if not 0 <= self.rpc_port <= 65535:
            raise Invalid("--rpc-port must be between 0 (off) and 65535")
        event_loops.check(self.event_loop)
        self.check_sqs()
        ports = [port for _, port in self.listeners()]
        if len(set(ports)) != len(ports):
            raise Invalid(f"{', '.join(flag for flag, _ in self.listeners())} need a port each")
        self.server_tls()
        return self

    def listeners(self) -> list[tuple[str, int]]:
        """(flag, port) of every port the fronts listen on with these options, --port first."""
        return [(flag_name(field), getattr(self, field.name)) for field in fields(self)
                if field.metadata.get("listener") and getattr(self, field.name)]

    def server_tls(self) -> ssl.SSLContext | None:
        """The TLS context of the listening ports (None without --tls-cert); Invalid when the
        pair is incomplete, unreadable or does not match."""
        if not self.tls_cert and not self.tls_key:
            return None
        if not (self.tls_cert and self.tls_key):
            raise Invalid("--tls-cert and --tls-key go together: give both or neither")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        except (OSError, ssl.SSLError) as err:
            raise Invalid(f"--tls-cert {self.tls_cert} / --tls-key {self.tls_key}: cannot load "
                          f"the pair: {getattr(err, 'strerror', None) or err}") from None
        return context

    def check_sqs(self) -> None:
        """Raise Invalid when an SQS API option cannot work."""
        if not (len(self.sqs_account) == 12 and self.sqs_account.isdigit()):
            raise Invalid("--sqs-account must be twelve digits")
        if not 0 <= self.sqs_port <= 65535 or self.sqs_port == self.port:
            raise Invalid("--sqs-port must be 0 or a port from 1 to 65535 other than --port")
        if self.sqs_credentials:
            if importlib.util.find_spec("botocore") is None:
                raise Invalid("--sqs-credentials needs botocore: pip install 'mq[sqs]'")
            try:
                with open(self.sqs_credentials, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as err:
                raise Invalid(f"--sqs-credentials: cannot read {self.sqs_credentials}: {err}") from None
            if "aws_secret_access_key" not in text:
                raise Invalid(f"--sqs-credentials: {self.sqs_credentials} holds no "
                              "aws_secret_access_key")


#: What turns a field's text into its value: the field's type, or `count`.
Converter = Callable[[Any], Any]


def field_kind(field) -> Converter:
    """The Python type of an Options field (`count` for a number that may be "auto")."""
    if field.metadata.get("auto"):
        return count
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
        wanted = "int or auto" if kind is count else kind.__name__
        raise Invalid(f"{field.name}: expected {wanted}, got {value!r}") from None


def flag_name(field) -> str:
    """The command-line flag of an Options field: --max-body-bytes for max_body_bytes."""
    return "--" + field.name.replace("_", "-")


def describe_default(field) -> str:
    """An Options field's default as its help text shows it, after "default "."""
    value = field.default
    if field_kind(field) is bool:
        negated = "--no-" + field.name.replace("_", "-")
        return f"on; {negated} turns it off" if value else f"off; {flag_name(field)} turns it on"
    if value == "":
        return field.metadata["empty"]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def help_text(field) -> str:
    """An Options field's --help text, ending in its default."""
    return f"{field.metadata['help']} (default {describe_default(field)})"


def _flag_type(field):
    """The argparse type of a field's flag (a count says that auto is allowed when refused)."""
    kind = field_kind(field)
    if kind is not count:
        return kind

    def int_or_auto(text: str):
        try:
            return count(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None
    return int_or_auto


def build_parser(prog: str = "mq") -> argparse.ArgumentParser:
    """The mq command line: --config, --print-config and a flag for each field of Options."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="mq: a durable HTTP message queue that stores each message as a file. "
        "Options may also come from MQ_<NAME> environment variables or a TOML file "
        "(--config); flags win over both.",
    )
    add_version_flag(parser)
    parser.add_argument("--config", help="TOML file of options (keys as below, with _)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the options these flags, MQ_* variables and --config give, "
                        "as a TOML file with every option explained, and exit")
    parser.add_argument("--create-root", action="store_true",
                        help="create the root (or check an existing one), print its ID and "
                        "exit: how a root shared by daemons with --peers is made the first time")
    for field in fields(Options):
        if field_kind(field) is bool:
            parser.add_argument(flag_name(field), dest=field.name, default=None,
                                action=argparse.BooleanOptionalAction, help=help_text(field))
        else:
            parser.add_argument(flag_name(field), dest=field.name, type=_flag_type(field),
                                default=None, help=help_text(field))
    return parser


def read_command_line(argv: list[str] | None = None,
                      environ: Mapping[str, str] | None = None) -> tuple[Options, str]:
    """Options from flags, environment and config file, and what to do instead of serving:
    "print-config", "create-root" or ""."""
    if environ is None:
        environ = os.environ
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
    return Options(**values).check(), ("print-config" if args.print_config else
                                       "create-root" if args.create_root else "")


def load_options(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> Options:
    """Resolve Options from flags, environment and config file, in that order of precedence."""
    return read_command_line(argv, environ)[0]
