"""JSON log lines: their fields, one access line per request, levels, and reopening on SIGHUP."""

import asyncio
import datetime
import json
import os
import select
import signal
import threading
import time

import hypothesis
import hypothesis.strategies
import psutil

from support import poll_for, read_json_lines


def started_with_log_file(start_mq, tmp_path, *args):
    log = tmp_path / "mq.log"
    mq = start_mq(workers=1, timeout=1, log_file=log, args=args)
    return mq, log


def test_every_line_of_the_log_file_is_json_with_event_level_timestamp_and_process(start_mq, tmp_path):
    mq, log = started_with_log_file(start_mq, tmp_path)

    def traffic():
        for i in range(30):
            message_id = mq.add("logged", b"%d" % i)
            mq.delete("logged", message_id)

    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    lines = log.read_bytes().splitlines()
    assert len(lines) > 240
    processes = set()
    for line in lines:
        value = json.loads(line)  # every line whole: never two processes' writes mixed
        assert {"event", "level", "timestamp", "process", "pid"} <= set(value), value
        processes.add(value["process"])
    assert {"supervisor", "front-0", "save-0", "fetch-0", "mover-0", "reaper-0"} <= processes
    assert mq.stdout_path.read_bytes() == b""


def test_one_access_line_per_request_with_method_queue_id_status_and_ms(start_mq, tmp_path):
    mq, log = started_with_log_file(start_mq, tmp_path)
    message_id = mq.add("acc", b"x")
    assert mq.fetch("acc").status == 200
    assert mq.delete("acc", message_id).status == 204
    assert mq.fetch("acc").status == 204
    assert mq.request("GET", "/acc").status == 200
    assert mq.request("GET", "/nosuch/messages").status == 404
    assert mq.request("GET", "/a%2Fb").status == 400

    def access_lines():
        lines = [line for line in read_json_lines(log) if line["event"] == "http.request"
                 and line.get("queue") in ("acc", "nosuch", "a/b")]
        return lines if len(lines) >= 7 else None

    lines = poll_for(access_lines, 30)
    assert len(lines) == 7
    expected = [("POST", "acc", 201, message_id), ("GET", "acc", 200, message_id),
                ("DELETE", "acc", 204, message_id), ("GET", "acc", 204, None),
                ("GET", "acc", 200, None), ("GET", "nosuch", 404, None), ("GET", "a/b", 400, None)]
    for line, (method, queue, status, mid) in zip(lines, expected):
        assert (line["method"], line["queue"], line["status"], line.get("id")) == (method, queue, status, mid)
        assert isinstance(line["ms"], (int, float)) and line["ms"] >= 0
        assert line["level"] == "info" and line["process"] == "front-0"


def test_no_access_log_turns_request_lines_off(start_mq, tmp_path):
    mq, log = started_with_log_file(start_mq, tmp_path, "--no-access-log")
    mq.add("quiet", b"x")
    assert mq.fetch("quiet").status == 200
    events = [line["event"] for line in read_json_lines(log)]
    assert "front.start" in events and "supervisor.start" in events
    assert "http.request" not in events


def test_log_level_warning_keeps_crashes_and_drops_info(start_mq, tmp_path):
    log = tmp_path / "mq.log"
    mq = start_mq(workers=1, log_file=log, ready=False, args=("--log-level=warning",))
    mq.wait_ready(from_logs=False)
    old = mq.kill_child("save-0")
    mq.wait_for_new_pid("save-0", old)
    poll_for(lambda: any(line["event"] == "supervisor.crash" for line in read_json_lines(log)), 30)
    assert {line["level"] for line in read_json_lines(log)} <= {"warning", "error"}


def test_wait_ready_sees_starts_only_at_info(start_mq, tmp_path):
    """The info lines the fixtures wait for are written at the default level."""
    mq, log = started_with_log_file(start_mq, tmp_path)
    assert {line["process"] for line in read_json_lines(log) if line["event"] == "actor.start"} == {
        "save-0", "fetch-0", "mover-0", "reaper-0"}


def test_sighup_makes_every_process_reopen_the_log_file(start_mq, tmp_path):
    mq, log = started_with_log_file(start_mq, tmp_path)
    rotated = tmp_path / "mq.log.1"
    os.rename(log, rotated)
    mq.add("before", b"x")  # still goes to the renamed file
    procs = [psutil.Process(mq.pid)] + mq.tree_processes()

    def holding_rotated():
        holders = []
        for proc in procs:
            try:
                if any(f.path == str(rotated) for f in proc.open_files()):
                    holders.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
        return holders

    assert len(holding_rotated()) == len(procs), "every process writes the log"
    mq.proc.send_signal(signal.SIGHUP)
    poll_for(lambda: not holding_rotated(), 30, what="every process to close the rotated file")

    message_id = mq.add("after", b"y")
    lines = poll_for(lambda: [line for line in read_json_lines(log)
                              if line["event"] == "http.request" and line.get("id") == message_id], 30)
    assert lines[0]["queue"] == "after"
    assert all(p.is_running() for p in procs), "SIGHUP must not restart anything"
    old = mq.kill_child("fetch-0")
    mq.wait_for_new_pid("fetch-0", old)
    poll_for(lambda: any(line["event"] == "supervisor.crash" for line in read_json_lines(log)), 30,
             what="the supervisor to write to the new file")
    assert not any(line["event"] == "supervisor.crash" for line in read_json_lines(rotated))


def test_lines_of_one_loop_turn_are_written_together_whole_and_in_order(tmp_path):
    from mq.logs import LineSink

    path = tmp_path / "front.log"
    writes: list[int] = []

    class CountingSink(LineSink):
        def _write(self, data: bytes) -> None:
            writes.append(len(data))
            super()._write(data)

    sink = CountingSink(str(path))

    async def one_turn():
        sink.batch_in(asyncio.get_running_loop())
        for i in range(100):
            sink.write(json.dumps({"event": "http.request", "n": i, "pad": "x" * 120}))
        assert path.read_bytes() == b""  # Nothing until the end of this turn of the loop.
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(one_turn())
    sink.write(json.dumps({"event": "after", "n": 100}))  # The loop is gone: written at once.
    lines = path.read_text().splitlines()
    assert [json.loads(line)["n"] for line in lines] == list(range(101))
    # Each write(2) holds whole lines and stays within PIPE_BUF, so a pipe keeps it whole too.
    assert all(size <= select.PIPE_BUF for size in writes) and 3 < len(writes) < 10


# 300 random lists beside the edges written out below (a rounding up into the next second,
# minute, day and year, and back to an earlier second): 2,000 took 9 CPU s and checked the same.
@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(moments=hypothesis.strategies.lists(
    hypothesis.strategies.floats(min_value=0, max_value=4_102_444_800, allow_nan=False),
    min_size=1, max_size=5))
@hypothesis.example(moments=[0.9999995, 0.9999994, 59.9999996, 86399.9999995, 86399.9999996])
@hypothesis.example(moments=[4_102_444_799.9999995, 1e-7, 1_700_000_000.5])
def test_timestamps_read_as_datetime_writes_them_in_utc_with_z(moments):
    from mq.logs import utc_timestamp

    # In sequence, so that the date and time kept from the last second is checked as well.
    for now in sorted(moments) + [moments[0]]:
        expected = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat()
        assert utc_timestamp(now) == expected.replace("+00:00", "Z")


def test_start_logs_one_listening_line_after_few_others(start_mq, tmp_path):
    """One line says where mq listens; before it, a line or two per process, not one per pair
    of actors (each actor asks every fetch actor to re-list at start, which finds nothing)."""
    log = tmp_path / "mq.log"
    mq = start_mq(workers=4, log_file=log)
    lines = poll_for(lambda: (found := read_json_lines(log)) and any(
        line["event"] == "front.listening" for line in found) and found, 30, what="front.listening")
    position = next(n for n, line in enumerate(lines) if line["event"] == "front.listening")
    listening = lines[position]
    processes = 2 + 2 * 4 + 1
    url = f"http://127.0.0.1:{mq.port}"
    assert listening["message"] == (f"mq listening on {url}/ (dashboard {url}/_mq/dashboard), "
                                    f"root {mq.root}, {processes} processes")
    assert (listening["level"], listening["process"], listening["processes"]) == ("info", "front-0", processes)
    assert position < 2 * processes + 5, [line["event"] for line in lines[:position]]
    assert not [line for line in lines if line["event"] == "fetch.relist" and not line["found"]]
    assert sum(line["event"] == "front.listening" for line in read_json_lines(log)) == 1


def test_the_listening_line_is_also_written_plain_to_a_terminal(tmp_path):
    from support import Daemon  # The daemon's own command line, run on a pseudo-terminal.
    import pty
    import subprocess
    daemon = Daemon(tmp_path / "root", tmp_path, workers=1, log_file=tmp_path / "mq.log")
    master, slave = pty.openpty()
    proc = subprocess.Popen(daemon.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"mq listening on" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                seen += os.read(master, 4096)
        assert f"mq listening on http://127.0.0.1:{daemon.port}/".encode() in seen
        line = seen.split(b"mq listening on", 1)[1].split(b"\n", 1)[0]
        assert not line.lstrip().startswith(b"{") and b"1 fronts" not in line
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.close(master)
