"""The root stays the root (docs/CLUSTER.md, "Making the shared root"): a daemon sharing a
root (--peers) never makes one where its path has none (the empty mount point of a file
system not mounted yet), a daemon told the root's ID (--root-id) refuses another root, and a
running daemon refuses another root put in its root's place."""

import os
import re
import signal

from cli_support import run_forked
from support import Daemon, create_root, files_in, init_root_at_once, poll_for

from mq.store import Store
from mq.supervisor import main as supervisor


def answer(daemon: Daemon, method: str, path: str, status: int, body: bytes | None = None):
    """The daemon's first answer to method path with this status (polled: it may be starting)."""
    responses = []

    def answered():
        assert daemon.running(), f"mq exited: {daemon.stderr()}"
        responses.append(daemon.request(method, path, body))
        return responses[-1] if responses[-1].status == status else None

    return poll_for(answered, 30, what=f"{method} {path} to be {status} "
                    f"(last: {responses[-1].status if responses else 'none'})", ignore=(OSError,))


def refused(daemon: Daemon, path: str = "/orders") -> None:
    """Adds and queue creation answer 503 with Retry-After and the unavailable kind."""
    for method, target, body in (("PUT", path, None), ("POST", path + "/messages", b"x")):
        resp = answer(daemon, method, target, 503, body)
        assert resp.header("Retry-After") == "1"
        assert resp.json()["error"] == "unavailable"


def test_a_daemon_with_peers_on_an_empty_folder_waits_with_503_and_writes_nothing(tmp_path):
    mount = tmp_path / "mount"
    mount.mkdir()
    # Two fronts: they listen on the port while the root is missing, and it stays theirs.
    daemon = Daemon(mount, tmp_path, workers=1, args=("--peers=1", "--fronts=2"),
                    make_root=False).start()
    try:
        missing = daemon.wait_for_events("supervisor.root_missing", timeout=30)[0]
        # Said by the start-up's check or by the root watch, whichever saw the folder first.
        assert re.search("no FORMAT|FORMAT is missing", missing["error"]), missing["error"]
        refused(daemon)
        health = answer(daemon, "GET", "/health", 503)
        assert "root" in health.json()["down"]
        # The supervisor's root checks ran meanwhile (a second of them): none wrote anything.
        poll_for(lambda: len(daemon.events("http.request")) >= 3, 10)
        assert files_in(mount) == []
        made = create_root(mount)
        assert made.returncode == 0, made.stderr
        root_id = made.stdout.strip()
        assert (mount / "ID").read_text() == f"mq-root {root_id}\n"
        assert answer(daemon, "PUT", "/orders", 201).status == 201
        assert daemon.events("supervisor.start")[0]["root_id"] == root_id
        message_id = answer(daemon, "POST", "/orders/messages", 201, b"hello").header("X-Message-Id")
        # Each front reconnects to the actors started now within its backoff (0.5 s): a 503
        # meanwhile is one that never reached an actor, so the fetch is simply asked again.
        fetched = answer(daemon, "GET", "/orders/messages", 200)
        assert (fetched.header("X-Message-Id"), fetched.body) == (message_id, b"hello")
    finally:
        daemon.cleanup()


def test_a_daemon_told_the_root_id_waits_while_the_path_leads_to_another_root(tmp_path):
    ours, other = tmp_path / "ours", tmp_path / "other"
    ours_id = create_root(ours).stdout.strip()
    create_root(other)
    path = tmp_path / "root"
    other.rename(path)
    daemon = Daemon(path, tmp_path, workers=1, args=("--peers=1", f"--root-id={ours_id}")).start()
    try:
        missing = daemon.wait_for_events("supervisor.root_missing", timeout=30)[0]
        assert "another root" in missing["error"]
        refused(daemon)
        assert files_in(path / "queues") == []
        path.rename(other)
        ours.rename(path)
        assert answer(daemon, "PUT", "/orders", 201).status == 201
        assert os.path.isdir(path / "queues" / "orders")
        assert files_in(other / "queues") == []
    finally:
        daemon.cleanup()


def test_another_root_put_in_the_place_of_a_running_daemons_root_is_refused(tmp_path):
    path, other, away = tmp_path / "root", tmp_path / "other", tmp_path / "away"
    create_root(other)
    daemon = Daemon(path, tmp_path, workers=1).start().wait_ready()
    try:
        message_id = daemon.add("orders", b"kept")
        path.rename(away)
        other.rename(path)
        # Same file system, a FORMAT like any root's: only the ID tells the roots apart. (What
        # comes within the 0.2 s before the watch's next check is not refused: waited out.)
        daemon.wait_for_events("root.lost")
        poll_for(lambda: "another root" in (daemon.request("GET", "/_mq/health").json()
                                            ["root_state"]["error"] or ""), 10,
                 what="the root found to be another root")
        refused(daemon, "/other")
        assert answer(daemon, "GET", "/orders", 503).status == 503
        assert files_in(path / "queues") == []
        path.rename(other)
        away.rename(path)
        daemon.wait_for_events("root.back")
        fetched = answer(daemon, "GET", "/orders/messages", 200)
        assert (fetched.header("X-Message-Id"), fetched.body) == (message_id, b"kept")
    finally:
        daemon.cleanup()


def test_a_root_made_before_ids_gets_one_and_concurrent_makers_agree_on_it(tmp_path):
    root = tmp_path / "root"
    Store(str(root)).init()
    (root / "ID").unlink()  # As a release before ID left it.
    ids = set(init_root_at_once(root, 8))
    assert len(ids) == 1 and (root / "ID").read_text() == f"mq-root {ids.pop()}\n"


def test_create_root_refuses_a_folder_that_is_neither_empty_nor_a_root(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "photo.jpg").write_bytes(b"x")
    # mq's main() in a fork, as the command runs it, without three interpreters' imports.
    def create_root(root):
        return run_forked(supervisor.main, [f"--root={root}", "--create-root"], dict(os.environ))

    made = create_root(tmp_path / "data")
    assert made.returncode == 2 and "neither empty nor an mq root" in made.stderr
    assert files_in(tmp_path / "data") == ["photo.jpg"]
    first = create_root(tmp_path / "new")
    again = create_root(tmp_path / "new")
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout


def test_a_queue_not_found_while_the_root_is_away_is_503_even_before_the_supervisor_saw_it(
        tmp_path):
    path, away = tmp_path / "root", tmp_path / "away"
    daemon = Daemon(path, tmp_path, workers=1).start().wait_ready()
    try:
        assert daemon.request("GET", "/never").status == 404
        # Right after the swap, before the supervisor's check or after it: 503, never 404.
        path.rename(away)
        path.mkdir()
        assert daemon.request("GET", "/never").status == 503
        daemon.wait_for_events("root.lost")
        path.rmdir()
        away.rename(path)
        daemon.wait_for_events("root.back")
        assert daemon.request("GET", "/never").status == 404
        # With the supervisor stopped no check comes: the actor checks the root itself.
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            path.rename(away)
            path.mkdir()
            resp = daemon.request("GET", "/never")
            assert (resp.status, resp.json()["error"]) == (503, "unavailable")
            assert files_in(path) == []
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
    finally:
        daemon.cleanup()
