"""The command line: --help, MQ_* variables, a TOML --config file, precedence, bad values."""

import os
import re
import subprocess
import tomllib
from dataclasses import fields

import pytest

from mq.config import Options, auto_fronts, auto_workers, field_kind, load_options
from mq.config_file import RESOLVED, sample_config
from mq.errors import Invalid
from mq.supervisor import main as supervisor
from cli_support import run_forked
from support import command, free_port, request
from repo_support import REPO


#: The sample config file the repository ships.
SAMPLE = REPO / "etc" / "mq.toml"


def run_mq(*args, env=None, timeout=30) -> subprocess.CompletedProcess:
    """mq's main() to completion in a child forked from this process, without the imports of a
    start (for --help and refused options; the --version test starts the command itself).

    MQ_* variables of the test run itself are left out: only `env` sets options.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    return run_forked(supervisor.main, args, {**base, **(env or {})}, timeout)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def help_entries(text: str) -> dict[str, str]:
    """The help of each option in `mq --help` output, by its first flag, on one line."""
    entries: dict[str, str] = {}
    current = None
    for line in text.split("\noptions:\n", 1)[1].splitlines():
        if line.startswith("  -"):
            # "  --root ROOT    directory ...": the help follows two spaces or the next line.
            head, _, rest = line.strip().partition("  ")
            current = head.split(",")[0].split()[0]
            entries[current] = rest.strip()
        elif current and line.strip():
            entries[current] = (entries[current] + " " + line.strip()).strip()
    return entries


def shown_default(field, help_line: str):
    """The value that "(default X)" at the end of an option's help means, as the field's type."""
    match = re.fullmatch(r".+ \(default (.+)\)", help_line)
    assert match, f"{flag(field.name)}: no (default ...) at the end of {help_line!r}"
    shown = match.group(1)
    kind = field_kind(field)
    if kind is bool:
        word, _, how = shown.partition("; ")
        value = {"on": True, "off": False}[word]
        other = "--no-" + field.name.replace("_", "-") if value else flag(field.name)
        assert how == f"{other} turns it {'off' if value else 'on'}", help_line
        return value
    if kind is str and shown == field.metadata.get("empty"):
        return ""
    return kind(shown)


def test_help_shows_each_options_default_as_the_dataclass_has_it():
    result = run_mq("--help", env={"COLUMNS": "500"})
    assert result.returncode == 0
    assert "--config" in result.stdout and "--print-config" in result.stdout
    assert "MQ_" in result.stdout
    entries = help_entries(result.stdout)
    assert set(entries) == {"-h", "--version", "--config", "--print-config", "--create-root"} | {
        flag(f.name) for f in fields(Options)}
    for field in fields(Options):
        value = shown_default(field, entries[flag(field.name)])
        assert value == field.default and type(value) is type(field.default), (
            f"{flag(field.name)}: --help says {value!r}, Options has {field.default!r}")


@pytest.mark.parametrize("name", ["mq", "mqctl"])
def test_version_prints_the_installed_version_and_the_readme_shows_the_flag(name):
    import importlib.metadata

    result = subprocess.run([command(name), "--version"], capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (0, f"{name} {importlib.metadata.version('mq')}\n")
    assert f"{name} --version" in (REPO / "README.md").read_text()


def test_help_gives_a_unit_for_every_time_and_size():
    entries = help_entries(run_mq("--help", env={"COLUMNS": "500"}).stdout)
    for name in ("--timeout", "--actor-timeout", "--hang-timeout"):
        assert "seconds" in entries[name], name
    assert "bytes" in entries["--max-body-bytes"]


def test_the_committed_sample_config_is_what_print_config_writes():
    result = run_mq("--print-config")
    assert result.returncode == 0, result.stderr
    assert result.stdout == sample_config()
    assert SAMPLE.read_text() == portable(result.stdout), (
        "etc/mq.toml is stale: regenerate it with "
        f"`mq --print-config | grep -v '^{RESOLVED}' > etc/mq.toml`")


def portable(text: str) -> str:
    """A printed config without the lines saying what auto came to on this machine."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith(RESOLVED))


def test_the_sample_config_sets_exactly_the_dataclass_defaults():
    loaded = tomllib.loads(SAMPLE.read_text())
    defaults = {f.name: f.default for f in fields(Options)}
    assert loaded == defaults
    for name, value in loaded.items():
        assert type(value) is type(defaults[name]), name
    assert load_options([f"--config={SAMPLE}"], environ={}) == Options()


def test_print_config_writes_the_resolved_options_as_a_file_mq_reads_back(tmp_path):
    config = tmp_path / "in.toml"
    config.write_text("workers = 3\n")
    odd_path = 'a "quoted" \\ path \u00e9\x7f\t'  # characters TOML strings must escape
    result = run_mq(f"--config={config}", "--print-config", "--no-access-log", "--timeout=1.5",
                    f"--log-file={odd_path}", env={"MQ_HOST": "::1"})
    assert result.returncode == 0, result.stderr
    printed = tmp_path / "out.toml"
    printed.write_text(result.stdout)
    expected = Options(workers=3, log_file=odd_path, access_log=False, timeout=1.5, host="::1")
    assert load_options([f"--config={printed}"], environ={}) == expected


def test_auto_sizes_workers_and_fronts_from_the_cores_it_may_use():
    # A pair of actors a core, at least 2 (docs/OPERATIONS.md, "Sizing"); a front per 4 cores.
    assert [(auto_workers(n), auto_fronts(n)) for n in (1, 2, 3, 4, 8, 16, 64, 1024)] == [
        (2, 1), (2, 1), (3, 1), (4, 1), (8, 2), (16, 4), (64, 16), (256, 64)]
    one_core = sorted(os.sched_getaffinity(0))[:1]

    def on_one_core(argv):
        os.sched_setaffinity(0, one_core)  # In the forked child only.
        return supervisor.main(argv)

    result = run_forked(on_one_core, ["--print-config", "--fronts=3"],
                        {k: v for k, v in os.environ.items() if not k.startswith("MQ_")})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"{RESOLVED}workers = 2 (1 cores)." in lines
    assert 'workers = "auto"' in lines and "fronts = 3" in lines
    assert not any(line.startswith(f"{RESOLVED}fronts") for line in lines)
    options = load_options(["--workers=auto", "--fronts=AUTO"], environ={})
    assert (options.workers, options.fronts) == (auto_workers(len(os.sched_getaffinity(0))),
                                                 auto_fronts(len(os.sched_getaffinity(0))))
    assert Options.from_json(options.to_json()) == options  # The children get the numbers.


def test_print_config_refuses_bad_values_like_a_start():
    result = run_mq("--print-config", "--workers=0")
    assert result.returncode == 2
    assert "--workers must be between 1 and 256" in result.stderr and not result.stdout


@pytest.mark.parametrize("args, env, config, message", [
    (["--workers=0"], {}, None, "--workers must be between 1 and 256"),
    (["--workers=abc"], {}, None, "expected a whole number or auto, got 'abc'"),
    ([], {"MQ_FRONTS": "many"}, None, "fronts: expected int or auto, got 'many'"),
    (["--port=70000"], {}, None, "--port must be between"),
    (["--timeout=0"], {}, None, "--timeout must be"),
    (["--timeout=nan"], {}, None, "--timeout must be"),
    (["--peer-rescan=0"], {}, None, "--peer-rescan must be"),
    (["--peer-rescan=inf"], {}, None, "--peer-rescan must be"),
    (["--actor-timeout=-1"], {}, None, "--actor-timeout must be"),
    (["--save-batch=-1"], {}, None, "--save-batch must be"),
    (["--max-waiting-adds=0"], {}, None, "--max-waiting-adds must be"),
    (["--max-body-bytes=-5"], {}, None, "--max-body-bytes must be 0 or more"),
    (["--peers=-1"], {}, None, "--peers must be 0 or more"),
    (["--sync=sometimes"], {}, None, "--sync must be 'auto', 'fs' or 'file'"),
    (["--event-loop=libuv"], {}, None, "--event-loop must be auto, uvloop or asyncio, not 'libuv'"),
    ([], {"MQ_EVENT_LOOP": "tokio"}, None, "--event-loop must be auto, uvloop or asyncio"),
    ([], {}, "event_loop = 'trio'\n", "--event-loop must be auto, uvloop or asyncio, not 'trio'"),
    (["--log-level=loud"], {}, None, "--log-level must be"),
    (["--idle-timeout=0"], {}, None, "--idle-timeout must be"),
    (["--body-timeout=inf"], {}, None, "--body-timeout must be"),
    (["--max-url-bytes=8"], {}, None, "--max-url-bytes must be 16 or more"),
    (["--max-header-bytes=100"], {}, None, "--max-header-bytes must be at least"),
    (["--token-file=/nonexistent/tokens.toml"], {}, None, "token file /nonexistent/tokens.toml"),
    (["--bogus"], {}, None, "unrecognized arguments: --bogus"),
    ([], {"MQ_WORKERS": "many"}, None, "workers: expected int or auto, got 'many'"),
    ([], {"MQ_AUTO_CREATE": "perhaps"}, None, "auto_create: expected true or false"),
    ([], {"MQ_TIMEOUT": "-3"}, None, "--timeout must be"),
    ([], {}, "workers = 2\ncolour = 'blue'\n", "unknown option 'colour'"),
    ([], {}, "workers = \n", "config file"),
    ([], {}, "workers = 'two'\n", "workers: expected int or auto, got 'two'"),
    ([], {}, "workers = 0\n", "--workers must be between 1 and 256"),
])
def test_bad_values_exit_2_with_a_clear_message_and_no_traceback(tmp_path, args, env, config, message):
    argv = [f"--root={tmp_path / 'root'}", f"--port={free_port()}", *args]
    if config is not None:
        (tmp_path / "mq.toml").write_text(config)
        argv.append(f"--config={tmp_path / 'mq.toml'}")
    result = run_mq(*argv, env=env)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "root").exists(), "a refused start must not create the root"


def test_missing_config_file_exits_2(tmp_path):
    result = run_mq(f"--root={tmp_path / 'root'}", f"--config={tmp_path / 'nope.toml'}")
    assert result.returncode == 2
    assert "nope.toml" in result.stderr and "Traceback" not in result.stderr


def test_a_root_that_is_a_file_exits_2(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    result = run_mq(f"--root={tmp_path / 'file'}", f"--port={free_port()}")
    assert result.returncode == 2
    assert "file" in result.stderr and "Traceback" not in result.stderr


def test_flags_win_over_env_and_env_over_the_config_file_in_the_real_daemon(start_mq, tmp_path):
    file_port, env_port = free_port(), free_port()
    config = tmp_path / "mq.toml"
    config.write_text(f"port = {file_port}\nmax_body_bytes = 10\nactor-timeout = 4.5\n"
                      "access_log = false\n")
    # Daemon passes --port (and --root, --workers, --timeout) as flags.
    mq = start_mq(workers=1, timeout=1, env={"MQ_CONFIG": str(config), "MQ_PORT": str(env_port),
                                            "MQ_MAX_BODY_BYTES": "20"})
    assert mq.port not in (file_port, env_port)
    assert mq.add("sized", b"x" * 20)  # env's 20, not the file's 10
    assert mq.request("POST", "/sized/messages", b"x" * 21).status == 413
    assert not mq.events("http.request")  # the file's access_log = false, which nothing overrides
    for port in (file_port, env_port):
        with pytest.raises(ConnectionRefusedError):
            request(port, "GET", "/sized")


def test_the_config_flag_is_read_and_underscore_or_dash_keys_both_work(tmp_path):
    config = tmp_path / "mq.toml"
    config.write_text("workers = 3\nmax-body-bytes = 77\nauto_create = false\nlog_level = 'debug'\n")
    options = load_options([f"--config={config}"], environ={})
    assert (options.workers, options.max_body_bytes, options.auto_create, options.log_level) == (
        3, 77, False, "debug")


def test_precedence_is_flag_then_env_then_file_then_default(tmp_path):
    config = tmp_path / "mq.toml"
    config.write_text("workers = 3\npeers = 1\ntimeout = 5.0\n")
    env = {"MQ_CONFIG": str(config), "MQ_WORKERS": "4", "MQ_HOST": "127.0.0.2",
           "MQ_ACCESS_LOG": "off"}
    options = load_options(["--workers=5", "--no-access-log"], environ=env)
    assert options.workers == 5            # flag over env and file
    assert options.host == "127.0.0.2"     # env over default
    assert options.peers == 1              # file over default
    assert options.timeout == 5.0
    assert options.access_log is False
    assert (options.port, options.root) == (Options().port, Options().root)  # nothing set them
    assert load_options(["--access-log"], environ=env).access_log is True


def test_every_option_can_come_from_the_environment(tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKID\naws_secret_access_key = secret\n")
    trustme = pytest.importorskip("trustme")
    leaf = trustme.CA().issue_cert("127.0.0.1")  # --tls-cert and --tls-key are loaded.
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    # option: (its MQ_* environment value, the value it must parse to); one line each.
    samples = {
        "root": ("/srv/mq", "/srv/mq"),
        "workers": ("2", 2),
        "peers": ("3", 3),
        "peer_rescan": ("1.5", 1.5),
        "host": ("::1", "::1"),
        "port": ("9999", 9999),
        "timeout": ("2.5", 2.5),
        "sync": ("file", "file"),
        "spare_files": ("0", 0),
        "rename_check": ("warn", "warn"),
        "root_id": ("01a2076a-c3ab-7000-914c-3d6642fc8a55", "01a2076a-c3ab-7000-914c-3d6642fc8a55"),
        "auto_create": ("false", False),
        "max_body_bytes": ("123", 123),
        "max_batch_bytes": ("456", 456),
        "save_batch": ("0", 0),
        "flush_group": ("yes", True),
        "max_waiting_adds": ("9", 9),
        "event_loop": ("asyncio", "asyncio"),
        "actor_timeout": ("7", 7.0),
        "hang_timeout": ("45", 45.0),
        "log_file": ("/var/log/mq.log", "/var/log/mq.log"),
        "log_level": ("error", "error"),
        "access_log": ("no", False),
        "run_dir": ("/run/mq", "/run/mq"),
        "fronts": ("3", 3),
        "token_file": ("/etc/mq/tokens.toml", "/etc/mq/tokens.toml"),
        "max_url_bytes": ("4096", 4096),
        "max_header_bytes": ("16384", 16384),
        "idle_timeout": ("5", 5.0),
        "body_timeout": ("30", 30.0),
        "statsd": ("127.0.0.1:8125", "127.0.0.1:8125"),
        "statsd_interval": ("2", 2.0),
        "statsd_prefix": ("queues", "queues"),
        "rpc_port": ("18800", 18800),
        "sqs_account": ("123456789012", "123456789012"),
        "sqs_base_url": ("https://mq.example.com", "https://mq.example.com"),
        "sqs_port": ("9998", 9998),
        "sqs_credentials": (str(credentials), str(credentials)),
        "tls_cert": (str(cert), str(cert)),
        "tls_key": (str(key), str(key)),
    }
    assert set(samples) == {f.name for f in fields(Options)}, "a new option needs a sample here"
    options = load_options([], environ={f"MQ_{k.upper()}": v[0] for k, v in samples.items()})
    assert options.to_json() == Options(**{k: v[1] for k, v in samples.items()}).to_json()
    assert load_options([], environ={"MQ_RPC_PORT": "18800"}).rpc_port == 18800


def test_options_reject_bad_values_as_invalid():
    with pytest.raises(Invalid):
        load_options(["--workers=257"], environ={})
    with pytest.raises(Invalid):
        load_options([], environ={"MQ_PORT": "0"})
    for fronts in ("0", "65"):
        with pytest.raises(Invalid):
            load_options([f"--fronts={fronts}"], environ={})
    with pytest.raises(Invalid):
        load_options(["--rpc-port=65536"], environ={})


def test_options_survive_the_trip_to_the_children():
    options = load_options(["--workers=3", "--timeout=1.5", "--no-auto-create"], environ={})
    assert Options.from_json(options.to_json()) == options


def test_sqs_options_are_checked(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("[default]\n")
    for argv, message in ((["--sqs-account=12345"], "twelve digits"),
                          (["--sqs-port=8080", "--port=8080"], "--sqs-port"),
                          ([f"--sqs-credentials={tmp_path / 'missing'}"], "cannot read"),
                          ([f"--sqs-credentials={empty}"], "no aws_secret_access_key")):
        with pytest.raises(Invalid, match=message):
            load_options(argv, environ={})
