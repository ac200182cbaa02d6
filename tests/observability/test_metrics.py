"""GET /metrics, GET /health and the StatsD output of a real daemon, read with
prometheus_client's own parser and a real UDP socket on 127.0.0.1."""

import json
import os
import re
import signal
import socket
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from doc_blocks import assert_shows, shown
from support import command, poll_for, ready_daemon
from repo_support import REPO

#: The module's tests on one xdist worker: spread over the workers, each started its daemon.
pytestmark = pytest.mark.xdist_group("metrics")

OPERATIONS = REPO / "docs" / "OPERATIONS.md"
README = REPO / "docs" / "HTTP.md"


@pytest.fixture(scope="module")
def statsd_socket():
    """A UDP socket on 127.0.0.1 standing in for a StatsD server."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    yield sock
    sock.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, statsd_socket):
    """One daemon sending StatsD lines to the socket every 0.2 s."""
    host, port = statsd_socket.getsockname()
    yield from ready_daemon(tmp_path_factory.mktemp("metrics"), workers=2, timeout=30,
                            args=(f"--statsd={host}:{port}", "--statsd-interval=0.2",
                                  "--statsd-prefix=mqt"))


def scrape(daemon) -> dict:
    """{(metric sample name, labels as a tuple): value} of one GET /metrics."""
    resp = daemon.request("GET", "/metrics")
    assert resp.status == 200
    assert resp.header("Content-Type").startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.body.decode())
            for s in family.samples}


def readme_examples() -> list[tuple[str, str]]:
    """(command, expected output) of each `$ ` line in README's "Watching mq" section."""
    section = README.read_text().split("\n## Watching mq\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```console\n(.*?)^```$", section, re.S | re.M).group(1)
    return [tuple(chunk.partition("\n")[::2]) for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]]


def test_readme_examples_run_as_written(start_mq):
    # A daemon of its own, so that "orders" is its only queue, as in the README (the module's
    # daemon serves tests that may run before this one, on the same pytest-xdist worker).
    daemon = start_mq(workers=2, timeout=30)
    for body in (b"one", b"two"):
        assert daemon.request("POST", "/orders/messages", body).status == 201
    assert daemon.request("GET", "/orders/messages").status == 200
    examples = readme_examples()
    assert [command.split()[2] for command, _ in examples] == [
        "http://127.0.0.1:8080/_mq/stats", "http://127.0.0.1:8080/metrics",
        "http://127.0.0.1:8080/health"]

    def runs_as_written(command, expected):
        command = command.replace("127.0.0.1:8080", f"127.0.0.1:{daemon.port}")
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30).stdout
        # Times and rates differ from run to run, and so do the bytes of a message's file (its
        # header names the host that wrote it) and the root's free space; every count is as
        # shown. (curl prints no newline after a JSON body; the README's block has one.)
        return variable(out) == variable(expected)

    def variable(text: str) -> str:
        text = re.sub(r'("bytes":|mq_queue_bytes\{queue="orders"\} |"free_bytes":|"free_inodes":)\d+',
                      r"\1B", text.strip())
        return re.sub(r"\d+\.\d+", "F", text)

    for command, expected in examples:
        poll_for(lambda: runs_as_written(command, expected), 10, what=command)


def test_metrics_show_each_queue_with_conventional_names(daemon):
    for n in range(3):
        assert daemon.request("POST", "/m1/messages", b"x%d" % n).status == 201
    assert daemon.request("POST", "/m1/messages?delay=60", b"later").status == 201
    assert daemon.request("GET", "/m1/messages").status == 200
    q = (("queue", "m1"),)
    # Both counts are the mover's, told by two actors whose notes may each trail by up to
    # 20 ms (docs/OPERATIONS.md): the delayed add's can come after the fetch's.
    samples = poll_for(lambda: (s := scrape(daemon)).get(("mq_messages_in_flight", q)) == 1
                       and s.get(("mq_messages_delayed", q)) == 1 and s,
                       10, what="the delayed add and the fetch to be in the metrics")
    assert samples[("mq_messages_ready", q)] == 2
    assert samples[("mq_messages_dead", q)] == 0
    assert samples[("mq_adds_total", q)] == 4
    assert samples[("mq_fetches_total", q)] == 1
    assert samples[("mq_acks_total", q)] == 0
    assert samples[("mq_oldest_ready_age_seconds", q)] >= 0
    assert samples[("mq_actor_up", (("actor", "fetch-1"),))] == 1
    assert samples[("mq_process_up", (("process", "reaper-0"),))] == 1
    assert samples[("mq_process_restarts_total", (("process", "save-0"),))] == 0
    assert samples[("mq_process_resident_memory_bytes", (("process", "front-0"),))] > 0


def flush_figures(samples: dict, actor: str) -> tuple[float, float, list[float]]:
    """(count, sum, cumulative bucket counts in bound order) of one actor's mq_flush_seconds."""
    buckets = sorted((float(dict(labels)["le"]), value) for (name, labels), value in samples.items()
                     if name == "mq_flush_seconds_bucket" and dict(labels)["actor"] == actor)
    labels = (("actor", actor),)
    return (samples[("mq_flush_seconds_count", labels)], samples[("mq_flush_seconds_sum", labels)],
            [value for _, value in buckets])


def responses(samples: dict, code: int) -> float:
    """mq_http_responses_total of front-0 for one status code (0 before the first)."""
    return samples.get(("mq_http_responses_total", (("code", str(code)), ("front", "front-0"))), 0)


def test_flush_times_and_responses_by_status_are_counted(daemon):
    before = scrape(daemon)
    for n in range(3):
        assert daemon.request("POST", "/flushed/messages", b"f%d" % n).status == 201
    assert daemon.request("GET", "/no/such/path/here").status == 404
    after = scrape(daemon)
    # Each add waits for its batch's two flushes (the data, then the renames), in a save actor.
    flushes = sum(flush_figures(after, actor)[0] - flush_figures(before, actor)[0]
                  for actor in ("save-0", "save-1"))
    assert flushes >= 2
    for actor in ("save-0", "save-1", "fetch-0", "fetch-1", "mover-0"):
        count, total, buckets = flush_figures(after, actor)
        assert buckets == sorted(buckets) and buckets[-1] == count  # cumulative, +Inf last
        assert (total > 0) == (count > 0)
    assert responses(after, 201) - responses(before, 201) == 3
    assert responses(after, 404) - responses(before, 404) == 1
    # The scrape before counts once it is sent: this one sees it.
    assert responses(after, 200) > responses(before, 200)


def test_every_metric_is_documented_and_every_documented_metric_exists(daemon):
    # A queue with a message in flight and one ready, whatever ran before on this daemon:
    # queue metrics exist only then (the oldest ready age only while one is ready).
    for body in (b"one", b"two"):
        assert daemon.request("POST", "/documented/messages", body).status == 201
    assert daemon.request("GET", "/documented/messages").status == 200
    q = (("queue", "documented"),)
    samples = poll_for(lambda: (s := scrape(daemon)).get(("mq_messages_ready", q)) == 1 and s,
                       10, what="the documented queue's metrics")
    exposed = {re.sub(r"_total$", "", name) for name, _ in samples}
    documented = {re.sub(r"_total$", "", name)
                  for name in re.findall(r"`(mq_[a-z_]+)`", OPERATIONS.read_text())}
    assert exposed == documented


def test_health_is_503_naming_an_actor_that_is_down_then_200_again(daemon):
    resp = daemon.request("GET", "/health")
    assert (resp.status, resp.json()) == (200, {"status": "ok", "down": []})
    victim = daemon.children()["fetch-1"]
    # A stopped supervisor restarts nothing, so the actor stays down while we look.
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        victim.kill()
        resp = poll_for(lambda: (r := daemon.request("GET", "/health")).status == 503 and r, 10,
                        what="/health to notice the dead actor")
        assert resp.json() == {"status": "degraded", "down": ["fetch-1"]}
        assert resp.header("Retry-After") == "1"
        samples = scrape(daemon)
        assert samples[("mq_actor_up", (("actor", "fetch-1"),))] == 0
        assert responses(samples, 503) >= 1  # the /health answers above
        assert daemon.request("GET", "/_mq/stats").json()["complete"] is False
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
    poll_for(lambda: daemon.request("GET", "/health").status == 200, 15,
             what="/health to be 200 once the actor is back")


def received_lines(sock) -> list[str]:
    """Every StatsD line waiting on the socket."""
    lines = []
    while True:
        try:
            lines += sock.recv(65536).decode().splitlines()
        except socket.timeout:
            return lines


def test_statsd_gets_depths_as_gauges_and_new_events_as_counters(daemon, statsd_socket):
    received_lines(statsd_socket)
    for n in range(4):
        assert daemon.request("POST", "/st.q/messages", b"x%d" % n).status == 201
    lines = []

    def all_adds_counted():
        lines.extend(received_lines(statsd_socket))
        return sum(int(line.split(":")[1].split("|")[0]) for line in lines
                   if line.startswith("mqt.st_q.adds:")) == 4 and "mqt.st_q.ready:4|g" in lines

    poll_for(all_adds_counted, 10, what="StatsD lines counting the 4 adds")
    assert all(re.fullmatch(r"mqt\.[A-Za-z0-9_-]+\.[a-z_]+:\d+\|[gc]", line) for line in lines)


def test_statsd_gets_each_queues_bytes_and_the_roots_free_space(daemon, statsd_socket):
    message_id = json.loads(daemon.request("POST", "/st.b/messages", b"b" * 400).body)["id"]
    size = stored_size(daemon, "st.b", message_id)
    received_lines(statsd_socket)
    lines = []

    def sent():
        lines.extend(received_lines(statsd_socket))
        gauges = dict(line.split("|")[0].split(":") for line in lines if line.endswith("|g"))
        if gauges.get("mqt.st_b.bytes") != str(size) or "mqt._mq.root_free_inodes" not in gauges:
            return None
        return gauges

    gauges = poll_for(sent, 10, what="StatsD gauges of st.b's bytes and the root's free space")
    st = os.statvfs(daemon.root)
    # Other tests write on the same file system meanwhile: close, not equal.
    assert abs(int(gauges["mqt._mq.root_free_bytes"]) - st.f_bavail * st.f_frsize) < 64 * 2**20
    assert abs(int(gauges["mqt._mq.root_free_inodes"]) - st.f_favail) < 10_000


def test_statsd_lines_are_those_the_operations_guide_shows(daemon, statsd_socket):
    for n in range(4):  # One delayed, three ready of which one is fetched.
        path = "/orders/messages?delay=60" if n == 0 else "/orders/messages"
        assert daemon.request("POST", path, b"order %d" % n).status == 201
    assert daemon.request("GET", "/orders/messages").status == 200
    lines: list[str] = []

    def flushed_after_the_fetch():
        lines.extend(received_lines(statsd_socket))
        fetched = [i for i, line in enumerate(lines) if line.startswith("mqt.orders.fetches:")]
        return fetched and any(line.startswith("mqt._mq.root_free_inodes:")
                               for line in lines[fetched[0]:])

    poll_for(flushed_after_the_fetch, 10, what="StatsD lines counting the fetch")
    # The module's daemon has --statsd-prefix=mqt; the guide shows the default, mq.
    assert_shows(shown("OPERATIONS.md", "tests/observability/test_metrics.py", "mq.orders."),
                 "\n".join("mq." + line.removeprefix("mqt.") for line in lines))


def test_a_bad_statsd_address_stops_mq_with_status_2(tmp_path):
    run = subprocess.run([command("mq"), "--statsd=nohost", "--print-config"],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert run.stderr.strip() == "mq: --statsd must be HOST:PORT, with a port from 1 to 65535"


def queue_bytes(daemon, queue: str) -> float | None:
    """mq_queue_bytes of a queue in one scrape (None when it is not shown)."""
    return scrape(daemon).get(("mq_queue_bytes", (("queue", queue),)))


def stored_size(daemon, queue: str, message_id: str) -> int:
    """The size of a ready message's file in the daemon's root."""
    return (daemon.root / "queues" / queue / message_id).stat().st_size


def test_queue_bytes_follow_adds_acks_deletes_and_purges(daemon):
    assert daemon.request("PUT", "/qb").status in (200, 201)
    poll_for(lambda: queue_bytes(daemon, "qb") == 0, 10, what="qb shown empty")
    ids = [json.loads(daemon.request("POST", "/qb/messages", b"y" * n).body)["id"]
           for n in (10, 2000, 300)]
    sizes = [stored_size(daemon, "qb", message_id) for message_id in ids]
    assert sizes[1] > 2000  # The header counts too.
    poll_for(lambda: queue_bytes(daemon, "qb") == sum(sizes), 10, what="three adds counted")
    fetched = daemon.request("GET", "/qb/messages")
    assert fetched.status == 200 and fetched.header("X-Message-Id") == ids[0]
    # In flight, its file still takes its room.
    assert queue_bytes(daemon, "qb") == sum(sizes)
    acked = daemon.request("POST", "/qb/messages/ack", json.dumps(
        {"receipts": [fetched.header("X-Receipt")]}).encode(), {"Content-Type": "application/json"})
    assert json.loads(acked.body)["acked"] == 1
    poll_for(lambda: queue_bytes(daemon, "qb") == sum(sizes[1:]), 10, what="the ack subtracted")
    assert daemon.request("DELETE", f"/qb/messages/{ids[1]}").status == 204
    poll_for(lambda: queue_bytes(daemon, "qb") == sizes[2], 10, what="the delete subtracted")
    assert daemon.request("POST", "/qb/messages", b"z" * 500).status == 201
    assert queue_bytes(daemon, "qb") > sizes[2]
    assert json.loads(daemon.request("POST", "/qb/purge").body)["purged"] == 2
    poll_for(lambda: queue_bytes(daemon, "qb") == 0, 10, what="the purge emptied it")


def test_root_free_space_matches_statvfs(daemon):
    samples = scrape(daemon)
    st = os.statvfs(daemon.root)
    # Other tests write on the same file system meanwhile: close, not equal.
    assert abs(samples[("mq_root_free_bytes", ())] - st.f_bavail * st.f_frsize) < 64 * 2**20
    assert abs(samples[("mq_root_free_inodes", ())] - st.f_favail) < 10_000
    assert samples[("mq_root_free_bytes", ())] > 0


def test_a_nacked_dead_letter_moves_its_bytes_to_the_dead_letter_queue(daemon):
    assert daemon.request("PUT", "/qbd").status in (200, 201)
    assert daemon.request("PATCH", "/qbd/properties", b'{"retry": 0}').status == 200
    message_id = json.loads(daemon.request("POST", "/qbd/messages", b"d" * 700).body)["id"]
    size = stored_size(daemon, "qbd", message_id)
    poll_for(lambda: queue_bytes(daemon, "qbd") == size, 10, what="the add counted")
    receipt = daemon.request("GET", "/qbd/messages").header("X-Receipt")
    nacked = daemon.request("POST", f"/qbd/messages/{message_id}?reply=nack&receipt={receipt}")
    assert nacked.status in (200, 204)
    # At once (not HEAL_SECONDS later, when the emptied queue's figure would be corrected).
    poll_for(lambda: queue_bytes(daemon, "qbd") == 0 and queue_bytes(daemon, "qbd.dead") == size,
             2, what="the bytes to follow the dead letter")


def test_a_queue_emptied_unseen_has_its_bytes_corrected(daemon):
    # The mover dead-letters a delivery whose time ran out: the queue's fetch actor is not
    # told, and corrects the figure once it sees the queue has none ready (HEAL_SECONDS).
    assert daemon.request("PUT", "/qbh").status in (200, 201)
    assert daemon.request("PATCH", "/qbh/properties", b'{"retry": 0, "timeout": 0.5}').status == 200
    message_id = json.loads(daemon.request("POST", "/qbh/messages", b"h" * 900).body)["id"]
    size = stored_size(daemon, "qbh", message_id)
    poll_for(lambda: queue_bytes(daemon, "qbh") == size, 10, what="the add counted")
    assert daemon.request("GET", "/qbh/messages").status == 200
    poll_for(lambda: scrape(daemon).get(("mq_dead_letters_total", (("queue", "qbh"),))) == 1, 10,
             what="the mover to dead-letter it")
    poll_for(lambda: queue_bytes(daemon, "qbh") == 0, 30, what="the figure corrected")
