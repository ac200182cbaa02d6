"""The command line: --help, MQ_* variables, a TOML --config file, precedence, bad values."""

import os
import re
import subprocess
from dataclasses import fields

import pytest

from mq.config import HELP, Options, load_options
from mq.errors import Invalid
from support import command, free_port, request


def run_mq(*args, env=None, timeout=30) -> subprocess.CompletedProcess:
    """Run the real mq command to completion (for --help and refused options)."""
    return subprocess.run([command("mq"), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_help_documents_every_option_with_its_default():
    result = run_mq("--help", env={"COLUMNS": "500"})
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--config" in text and "MQ_" in text
    for field in fields(Options):
        assert flag(field.name) in text, field.name
        if field.type == "bool":
            assert "--no-" + field.name.replace("_", "-") in text
    # The seed's flags with the seed's defaults, and a unit for every time and size.
    for expected in ("default 8", "default 0", "default /tmp/mq", "default 127.0.0.1",
                     "default 8080", "seconds", "bytes"):
        assert expected in text, expected


def test_every_option_has_help_naming_its_default():
    text = " ".join(run_mq("--help", env={"COLUMNS": "500"}).stdout.split())
    for field in fields(Options):
        help_text = " ".join(HELP[field.name].split())
        assert "(default" in help_text, field.name
        assert help_text in text, f"--help does not show the help of {flag(field.name)}"


@pytest.mark.parametrize("args, env, config, message", [
    (["--workers=0"], {}, None, "--workers must be between 1 and 256"),
    (["--workers=abc"], {}, None, "invalid int value"),
    (["--port=70000"], {}, None, "--port must be between"),
    (["--timeout=0"], {}, None, "--timeout must be"),
    (["--timeout=nan"], {}, None, "--timeout must be"),
    (["--actor-timeout=-1"], {}, None, "--actor-timeout must be"),
    (["--save-batch=-1"], {}, None, "--save-batch must be"),
    (["--max-waiting-adds=0"], {}, None, "--max-waiting-adds must be"),
    (["--max-body-bytes=-5"], {}, None, "--max-body-bytes must be 0 or more"),
    (["--peers=-1"], {}, None, "--peers must be 0 or more"),
    (["--sync=sometimes"], {}, None, "--sync must be 'fs' or 'file'"),
    (["--log-level=loud"], {}, None, "--log-level must be"),
    (["--bogus"], {}, None, "unrecognized arguments: --bogus"),
    ([], {"MQ_WORKERS": "many"}, None, "workers: expected int, got 'many'"),
    ([], {"MQ_AUTO_CREATE": "perhaps"}, None, "auto_create: expected true or false"),
    ([], {"MQ_TIMEOUT": "-3"}, None, "--timeout must be"),
    ([], {}, "workers = 2\ncolour = 'blue'\n", "unknown option 'colour'"),
    ([], {}, "workers = \n", "config file"),
    ([], {}, "workers = 'two'\n", "workers: expected int, got 'two'"),
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
    assert options.port == 8080 and options.root == "/tmp/mq"  # the seed's defaults
    assert load_options(["--access-log"], environ=env).access_log is True


def test_every_option_can_come_from_the_environment():
    samples = {"root": "/srv/mq", "workers": "2", "peers": "3", "host": "::1", "port": "9999",
               "timeout": "2.5", "sync": "file", "auto_create": "false", "max_body_bytes": "123",
               "save_batch": "0", "max_waiting_adds": "9", "actor_timeout": "7", "log_file": "/var/log/mq.log", "log_level": "error",
               "access_log": "no", "run_dir": "/run/mq"}
    assert set(samples) == {f.name for f in fields(Options)}, "a new option needs a sample here"
    options = load_options([], environ={f"MQ_{k.upper()}": v for k, v in samples.items()})
    assert options.to_json() == Options(
        root="/srv/mq", workers=2, peers=3, host="::1", port=9999, timeout=2.5, sync="file",
        auto_create=False, max_body_bytes=123, save_batch=0, max_waiting_adds=9, actor_timeout=7.0, log_file="/var/log/mq.log",
        log_level="error", access_log=False, run_dir="/run/mq").to_json()


def test_options_reject_bad_values_as_invalid():
    with pytest.raises(Invalid):
        load_options(["--workers=257"], environ={})
    with pytest.raises(Invalid):
        load_options([], environ={"MQ_PORT": "0"})


def test_options_survive_the_trip_to_the_children():
    options = load_options(["--workers=3", "--timeout=1.5", "--no-auto-create"], environ={})
    assert Options.from_json(options.to_json()) == options
