"""mq-mover and mq-reaper run alone, with their own flags and defaults."""

import os
import signal
import subprocess
import time
import uuid

from support import command, files_in, poll_for


def run(name: str, *args, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([command(name), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "500"})


def aged(path, seconds: float) -> None:
    """Set a file's modification time to `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_mover_help_shows_its_flags_with_delay_in_seconds():
    result = run("mq-mover", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for expected in ("--source", "--destination", "--delay", "seconds", "(default 0)", "--once"):
        assert expected in text


def test_reaper_help_shows_its_default_source():
    result = run("mq-reaper", "--help")
    assert result.returncode == 0
    assert "--source" in result.stdout and "/tmp/mq/remove" in result.stdout


def test_mover_requires_source_and_destination(tmp_path):
    result = run("mq-mover", f"--source={tmp_path}")
    assert result.returncode == 2
    assert "--destination" in result.stderr and "Traceback" not in result.stderr


def test_mover_refuses_a_missing_folder(tmp_path):
    result = run("mq-mover", f"--source={tmp_path / 'nope'}", f"--destination={tmp_path}", "--once")
    assert result.returncode == 2
    assert "not a directory" in result.stderr and "Traceback" not in result.stderr


def test_mover_once_moves_files_older_than_the_delay_in_seconds_into_their_queue_folders(tmp_path):
    source, destination = tmp_path / "delay", tmp_path / "queues"
    (destination / "jobs").mkdir(parents=True)
    source.mkdir()
    due, not_due, other = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    (source / f"jobs:{due}").write_bytes(b"due")
    aged(source / f"jobs:{due}", 20)
    (source / f"jobs:{not_due}").write_bytes(b"five seconds old")
    aged(source / f"jobs:{not_due}", 5)
    (source / f"unknown:{other}").write_bytes(b"no such queue folder")
    aged(source / f"unknown:{other}", 20)
    (source / "plain").write_bytes(b"no queue prefix")
    aged(source / "plain", 20)

    result = run("mq-mover", f"--source={source}", f"--destination={destination}",
                 "--delay=10", "--once")
    assert result.returncode == 0, result.stderr
    # delay/queue:id goes to queues/queue/id; the delay is in seconds, not milliseconds.
    assert (destination / "jobs" / due).read_bytes() == b"due"
    assert files_in(source) == [f"jobs:{not_due}"]
    assert (destination / f"unknown:{other}").exists()
    assert (destination / "plain").exists()


def test_mover_runs_until_sigterm_and_delivers_with_delay_0(tmp_path):
    source, destination = tmp_path / "src", tmp_path / "dst"
    source.mkdir()
    destination.mkdir()
    proc = subprocess.Popen([command("mq-mover"), f"--source={source}",
                             f"--destination={destination}", "--interval=0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        (source / "a").write_bytes(b"1")
        poll_for(lambda: files_in(destination) == ["a"], 30, what="the mover to deliver")
        (source / "b").write_bytes(b"2")
        poll_for(lambda: files_in(destination) == ["a", "b"], 30, what="a second delivery")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_reaper_once_unlinks_files_and_deleted_queue_folders(tmp_path):
    source = tmp_path / "remove"
    (source / "q:x.queue").mkdir(parents=True)
    (source / "q:x.queue" / "inside").write_bytes(b"1")
    (source / f"q:{uuid.uuid4()}").write_bytes(b"2")
    keep = tmp_path / "keep"
    keep.write_bytes(b"outside the source")
    result = run("mq-reaper", f"--source={source}", "--once")
    assert result.returncode == 0, result.stderr
    assert files_in(source) == []
    assert keep.exists()


def test_reaper_runs_until_sigterm(tmp_path):
    source = tmp_path / "remove"
    source.mkdir()
    proc = subprocess.Popen([command("mq-reaper"), f"--source={source}", "--interval=0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        (source / "gone").write_bytes(b"x")
        poll_for(lambda: files_in(source) == [], 30, what="the reaper to unlink")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_reaper_refuses_a_missing_folder(tmp_path):
    result = run("mq-reaper", f"--source={tmp_path / 'nope'}", "--once")
    assert result.returncode == 2
    assert "not a directory" in result.stderr


def test_standalone_mover_redelivers_a_daemons_fetched_message(start_mq):
    """Alone against a daemon's root: mq-mover --source=ROOT/delay --destination=ROOT/queues."""
    mq = start_mq(workers=1, timeout=3600)  # the daemon's own mover will not touch it
    message_id = mq.add("jobs", b"redeliver me")
    assert mq.fetch("jobs").header("X-Message-Id") == message_id
    delayed = files_in(mq.root / "delay")
    assert len(delayed) == 1 and delayed[0].startswith(f"jobs:{message_id}")
    aged(mq.root / "delay" / delayed[0], 60)  # due a minute ago
    result = run("mq-mover", f"--source={mq.root / 'delay'}",
                 f"--destination={mq.root / 'queues'}", "--once")
    assert result.returncode == 0
    assert files_in(mq.root / "delay") == []
    assert len(files_in(mq.root / "queues" / "jobs")) == 1
    assert mq.delete("jobs", message_id).status == 204
