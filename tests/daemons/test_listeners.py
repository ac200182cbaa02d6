"""Every port the daemon listens on is checked free at start-up, whatever the flags: a port
another program or another daemon holds stops the daemon with status 2 and a logged reason,
while the daemon's own fronts go on sharing their ports (SO_REUSEPORT)."""

import socket
from dataclasses import fields

import psutil
import pytest

from mq.config import Options, flag_name
from support import Daemon, alive, free_port, poll_for, read_json_lines

#: The listening ports the options declare (a new one is covered by every test below).
LISTENERS = [flag_name(field) for field in fields(Options) if field.metadata.get("listener")]


def every_listener(ports: dict[str, int]) -> tuple[str, ...]:
    """Flags turning every listener on (--port is the Daemon's own), on the ports given."""
    return tuple(f"{flag}={port}" for flag, port in ports.items() if flag != "--port")


def fresh_ports() -> dict[str, int]:
    """A free port for each listener."""
    return {flag: free_port() for flag in LISTENERS}


def refused(tmp_path, name: str, ports: dict[str, int]) -> tuple[Daemon, list[dict]]:
    """Start a daemon (two fronts, every listener on) that must refuse to start; return it
    with its supervisor.port_in_use lines."""
    workdir = tmp_path / name
    workdir.mkdir()
    daemon = Daemon(workdir / "root", workdir, port=ports["--port"], workers=1,
                    args=("--fronts=2", *every_listener(ports)))
    try:
        daemon.start()
        assert daemon.proc.wait(timeout=30) == 2, daemon.stderr()
    finally:
        daemon.cleanup()
    return daemon, [line for line in read_json_lines(daemon.log_path)
                    if line.get("event") == "supervisor.port_in_use"]


def test_every_port_option_is_a_listener_and_each_needs_its_own_port():
    ports = [f.name for f in fields(Options) if f.name == "port" or f.name.endswith("_port")]
    assert [flag_name(f) for f in fields(Options) if f.name in ports] == LISTENERS
    assert len(LISTENERS) >= 3
    options = Options(**{name: 9000 + i for i, name in enumerate(ports)}).check()
    assert options.listeners() == [(flag, 9000 + i) for i, flag in enumerate(LISTENERS)]
    with pytest.raises(Exception, match="need a port each"):
        Options(port=9000, rpc_port=9000).check()


@pytest.mark.parametrize("flag", LISTENERS)
def test_a_port_another_program_listens_on_stops_the_daemon(tmp_path, flag):
    ports = fresh_ports()
    with socket.socket() as taken:
        # As another daemon's fronts would: SO_REUSEPORT alone would let mq's fronts join it.
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", ports[flag]))
        taken.listen()
        daemon, [line] = refused(tmp_path, "second", ports)
    assert (line["level"], line["flag"], line["port"]) == ("error", flag, ports[flag])
    assert line["error"] == "another program listens on it"
    assert f"port {ports[flag]} on 127.0.0.1 is in use ({flag})" in daemon.stderr()


@pytest.mark.timeout(120)
def test_a_port_of_another_daemon_stops_the_daemon_and_the_first_serves_on(tmp_path):
    first_ports = fresh_ports()
    workdir = tmp_path / "first"
    workdir.mkdir()
    first = Daemon(workdir / "root", workdir, port=first_ports["--port"], workers=1,
                   args=("--fronts=2", *every_listener(first_ports)))
    try:
        first.start().wait_ready()
        # Its two fronts share each port (the RPC server's start line, once per front).
        first.wait_for_events("rpc.start", count=2)
        for flag in LISTENERS:
            ports = {**fresh_ports(), flag: first_ports[flag]}
            daemon, [line] = refused(tmp_path, flag.strip("-"), ports)
            assert (line["flag"], line["port"]) == (flag, first_ports[flag])
            assert line["error"] in ("another mq daemon holds it", "another program listens on it")
        assert first.running()
        poll_for(lambda: first.request("POST", "/kept/messages", b"x").status == 201, 10,
                 what="the first daemon to serve", ignore=(OSError,))
    finally:
        first.cleanup()


@pytest.mark.timeout(120)
def test_of_two_daemons_started_at_once_on_one_port_one_runs(tmp_path):
    # Both may find the port free before either front listens: the held lock decides.
    shared = free_port()
    daemons = []
    for name in ("a", "b"):
        workdir = tmp_path / name
        workdir.mkdir()
        daemons.append(Daemon(workdir / "root", workdir, workers=1,
                              args=("--fronts=2", f"--rpc-port={shared}")))
    try:
        for daemon in daemons:
            daemon.start()
        [loser] = poll_for(lambda: [d for d in daemons if not d.running()], 30,
                           what="one of the daemons to refuse")
        assert loser.proc.returncode == 2
        [winner] = [d for d in daemons if d is not loser]
        winner.wait_ready()
        assert winner.running()
    finally:
        for daemon in daemons:
            daemon.cleanup()


@pytest.mark.timeout(120)
def test_a_child_outliving_its_killed_daemon_does_not_hold_the_daemons_ports(tmp_path):
    # kill -9 of a daemon leaves behind a child stuck in a file call that does not return
    # (a FUSE request its file system daemon has taken: no signal ends the wait) until the
    # call does; a stopped child lingers as that one does. Only the supervisor holds the
    # ports' locks, so the daemon started again on the same ports runs.
    ports = fresh_ports()
    args = ("--fronts=2", *every_listener(ports))
    (tmp_path / "first").mkdir()
    (tmp_path / "again").mkdir()
    first = Daemon(tmp_path / "root", tmp_path / "first", port=ports["--port"], workers=1,
                   args=args)
    again = Daemon(tmp_path / "root", tmp_path / "again", port=ports["--port"], workers=1,
                   args=args)
    first.start().wait_ready()
    lingering = first.children()["save-0"]
    try:
        lingering.suspend()
        killed = [psutil.Process(first.pid)] + [p for p in first.tree_processes() if p != lingering]
        for proc in killed:
            proc.kill()
        first.proc.wait(10)
        poll_for(lambda: not any(alive(p) for p in killed), 10, what="the killed processes to go")
        assert alive(lingering)
        again.start().wait_ready(60)
        assert alive(lingering) and again.request("POST", "/q/messages", b"x").status == 201
    finally:
        lingering.kill()
        again.cleanup()
        first.cleanup()
