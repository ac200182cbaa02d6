"""--event-loop: the fronts run on uvloop by default, on asyncio's own loop when asked (even
under an installed uvloop policy), on asyncio's where uvloop is missing, and mq refuses to start
on a loop it cannot run."""

import concurrent.futures
import os
import subprocess

import pytest

from cli_support import run_forked
from mq.config_file import RESOLVED
from mq.supervisor import main as supervisor
from support import command, free_port

#: A sitecustomize.py that makes `import uvloop` fail, as where it is not installed.
WITHOUT_UVLOOP = "import sys\n\nsys.modules['uvloop'] = None\n"
#: A sitecustomize.py that makes asyncio.new_event_loop() a uvloop loop in every process.
UVLOOP_POLICY = "import asyncio\n\nimport uvloop\n\nasyncio.set_event_loop_policy(uvloop.EventLoopPolicy())\n"


def interpreter_with(tmp_path, name: str, sitecustomize: str) -> dict:
    """The environment of an mq whose interpreters all run this sitecustomize.py first."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(sitecustomize)
    return {"PYTHONPATH": str(folder)}


def run_mq(*args, env: dict) -> subprocess.CompletedProcess:
    """Run the real mq command to completion, with no MQ_* variable of the test run."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    return subprocess.run([command("mq"), *args], capture_output=True, text=True, timeout=30,
                          env={**base, **env}, stdin=subprocess.DEVNULL)


def front_loop(mq) -> str:
    """The loop the front says it runs on, in front.start and /metrics (both name the kind of
    the loop running, not the option)."""
    logged = mq.wait_for_events("front.start", process="front-0")[0]["event_loop"]
    metrics = mq.request("GET", "/metrics").body.decode()
    assert f'mq_front_info{{event_loop="{logged}",front="front-0"}} 1.0' in metrics.splitlines()
    return logged


def crowd(mq, clients: int = 16, rounds: int = 5) -> None:
    """Adds, fetches and deletes from many clients at once all answered, none left to wait for
    --actor-timeout: replies that come in while the front sends must still be read."""
    def client(n: int) -> list[int]:
        statuses = []
        for i in range(rounds):
            statuses.append(mq.request("POST", "/loop/messages", b"%d-%d" % (n, i)).status)
            fetched = mq.fetch("loop")
            statuses.append(fetched.status)
            if fetched.status == 200:
                statuses.append(mq.delete("loop", fetched.header("X-Message-Id")).status)
        return statuses

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        statuses = [status for one in pool.map(client, range(clients)) for status in one]
    assert set(statuses) <= {200, 201, 204}, statuses
    assert statuses.count(201) == clients * rounds


@pytest.mark.timeout(90)
def test_the_front_runs_on_uvloop_by_default(start_mq):
    mq = start_mq(workers=1, args=("--actor-timeout=5",))
    assert front_loop(mq) == "uvloop"
    front = mq.children()["front-0"]
    assert any("uvloop" in m.path for m in front.memory_maps()), "uvloop is not loaded in the front"
    crowd(mq)


@pytest.mark.timeout(90)
def test_event_loop_asyncio_runs_the_standard_loop_even_under_a_uvloop_policy(start_mq, tmp_path):
    # An installed uvloop policy makes asyncio.new_event_loop() a uvloop loop: "asyncio" is the
    # standard library's loop all the same.
    env = interpreter_with(tmp_path, "policy", UVLOOP_POLICY)
    mq = start_mq(workers=1, args=("--event-loop=asyncio", "--actor-timeout=5"), env=env)
    assert front_loop(mq) == "asyncio"
    crowd(mq)


@pytest.mark.timeout(90)
def test_without_uvloop_auto_runs_asyncio_and_uvloop_is_refused_at_start(start_mq, tmp_path):
    env = interpreter_with(tmp_path, "without", WITHOUT_UVLOOP)
    printed = run_mq("--print-config", env=env)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert f"{RESOLVED}event_loop = asyncio (uvloop is not installed)." in lines
    assert 'event_loop = "auto"' in lines

    refused = run_mq(f"--root={tmp_path / 'root'}", f"--port={free_port()}",
                     "--event-loop=uvloop", env=env)
    assert refused.returncode == 2, refused
    assert "--event-loop uvloop: uvloop is not installed" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "root").exists()

    mq = start_mq(workers=1, env=env)
    assert front_loop(mq) == "asyncio"
    assert mq.request("POST", "/plain/messages", b"x").status == 201


def test_print_config_says_what_auto_came_to_here():
    # mq's main() forked from this process (uvloop importable here as in the command), with the
    # environment run_mq gives: the same answer without two interpreters' imports.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    lines = run_forked(supervisor.main, ["--print-config"], env).stdout.splitlines()
    assert f"{RESOLVED}event_loop = uvloop (uvloop is installed)." in lines
    assert 'event_loop = "auto"' in lines
    assert 'event_loop = "asyncio"' in run_forked(supervisor.main, ["--print-config", "--event-loop=asyncio"],
                                                  env).stdout.splitlines()
