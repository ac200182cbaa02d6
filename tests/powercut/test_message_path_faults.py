"""Faults of a real file system on the message path: lazyfs with faults armed
(lazyfs.FaultyLazyFS) fails one operation on one message's file or folder with the errno a
network file system gives under faults (GlusterFS while a brick dies or comes back, JuiceFS
while its Redis restarts: ENOENT, ESTALE, EIO, ENOTCONN, ETIMEDOUT).

Each add, fetch and ack meeting one is answered `503` with Retry-After, or (a name gone at a
claim's open or rename: a peer may have taken it) taken as a lost race: the next message, or
`204`. Never a `500`, never a receipt refused as stale while its delivery is still current,
and once the fault is cleared every acknowledged message is fetched (nothing lost).
"""

import errno
import json
import threading

import pytest

from support import Daemon, poll_for
from test_power_cut import LazyMount, fuse_missing

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(fuse_missing()), reason=f"FUSE unavailable: {fuse_missing()}"),
]

#: The errnos of a file system under faults, as the tests arm them.
FAULTS = (errno.ENOENT, errno.ESTALE, errno.EIO, errno.ENOTCONN, errno.ETIMEDOUT)
#: Of those, the ones a claim's open or rename takes for a lost race (core/errors.py).
RACE = (errno.ENOENT, errno.ESTALE)
NAMES = {code: errno.errorcode[code] for code in FAULTS}


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    """(daemon on a FaultyLazyFS mount, its faults file): one for the module."""
    tmp = tmp_path_factory.mktemp("faults")
    backing, mountpoint, run = tmp / "backing", tmp / "mnt", tmp / "run"
    for folder in (backing, mountpoint, run):
        folder.mkdir()
    faults = tmp / "faults"
    lazy = LazyMount(backing, mountpoint, tmp / "lazyfs.log", faults=faults).mount()
    try:
        # One worker: every request of a queue meets the same actors. A long timeout: a
        # message claimed by a test stays in flight until it is acked. Debug: "fetch.wait".
        daemon = Daemon(mountpoint / "root", tmp, workers=1,
                        args=(f"--run-dir={run}", "--timeout=60", "--log-level=debug"),
                        log_file=tmp / "mq.log").start()
        try:
            daemon.wait_ready()
            yield daemon, faults
        finally:
            daemon.cleanup()
    finally:
        lazy.cleanup()


class Faults:
    """Arms faults ("OP PATH ERRNO" lines, paths in the mount) until the with block ends."""

    def __init__(self, path, *lines: str):
        self.path, self.lines = path, lines

    def __enter__(self):
        self.path.write_text("".join(f"{line}\n" for line in self.lines))

    def __exit__(self, *exc):
        self.path.write_text("")


def refused_for_now(resp) -> bool:
    """A 503 with Retry-After and a JSON body of kind unavailable."""
    return (resp.status == 503 and resp.header("Retry-After") == "1"
            and json.loads(resp.body)["error"] == "unavailable")


def fetch_all(daemon: Daemon, queue: str, want: set[str]) -> None:
    """Fetch and ack until every id of `want` came (the fault cleared): nothing was lost."""
    seen: set[str] = set()

    def step():
        while (resp := daemon.fetch(queue)).status == 200:
            seen.add(resp.header("X-Message-Id"))
            ack = daemon.request("DELETE", f"/{queue}/messages/{resp.header('X-Message-Id')}"
                                           f"?receipt={resp.header('X-Receipt')}")
            assert ack.status == 204, (ack.status, ack.body)
        assert resp.status == 204, (resp.status, resp.body)
        return want <= seen

    poll_for(step, 20, interval=0.1, what=f"{sorted(want - seen)} to be fetched again")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op", ["open", "rename"])
def test_a_claim_whose_file_fails_is_503_or_the_next_message_and_nothing_is_lost(mounted, op):
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"claim-{op}-{NAMES[code].lower()}"
        first, second = daemon.add(queue, b"first"), daemon.add(queue, b"second")
        with Faults(faults, f"{op} /root/queues/{queue}/{first} {code}"):
            resp = daemon.fetch(queue)
            if code in RACE:
                # Taken for a lost race: the next message is handed out.
                assert resp.status == 200, (NAMES[code], resp.status, resp.body)
                assert resp.header("X-Message-Id") == second
                ack = daemon.request("DELETE", f"/{queue}/messages/{second}"
                                               f"?receipt={resp.header('X-Receipt')}")
                assert ack.status == 204, (NAMES[code], ack.status, ack.body)
            else:
                assert refused_for_now(resp), (NAMES[code], resp.status, resp.body)
        fetch_all(daemon, queue, {first})


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op", ["utimens", "fsync"])
def test_a_claim_whose_due_time_cannot_be_set_is_503_and_the_message_stays(mounted, op):
    # The claim renamed the file into delay/; setting its due time (and, on FUSE, the file's
    # fsync) fails while the file is there: not a race, the file system's fault.
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"due-{op}-{NAMES[code].lower()}"
        message_id = daemon.add(queue, b"kept")
        with Faults(faults, f"{op} /root/delay/{queue}:{message_id}.1 {code}"):
            resp = daemon.fetch(queue)
            assert refused_for_now(resp), (NAMES[code], resp.status, resp.body)
        fetch_all(daemon, queue, {message_id})


@pytest.mark.timeout(120)
def test_a_long_poll_whose_claim_fails_is_503_and_the_message_stays(mounted):
    # The claim made for a waiting long poll, when the add it waited for arrives.
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"poll-{NAMES[code].lower()}"
        assert daemon.request("PUT", f"/{queue}").status == 201
        with Faults(faults, f"utimens /root/delay/{queue}:* {code}"):
            answers: list = []
            poll = threading.Thread(target=lambda path=f"/{queue}/messages?wait=10", out=answers:
                                    out.append(daemon.request("GET", path, timeout=30)))
            poll.start()
            daemon.wait_for_events("fetch.wait", queue=queue)
            message_id = daemon.add(queue, b"waited for")
            poll.join(30)
            assert answers and refused_for_now(answers[0]), (NAMES[code], answers)
        fetch_all(daemon, queue, {message_id})


@pytest.mark.timeout(120)
def test_an_ack_whose_rename_fails_is_503_and_the_delivery_can_be_acked_again(mounted):
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"ack-{NAMES[code].lower()}"
        message_id = daemon.add(queue, b"acked")
        resp = daemon.fetch(queue)
        assert resp.status == 200
        ack = f"/{queue}/messages/{message_id}?receipt={resp.header('X-Receipt')}"
        with Faults(faults, f"rename /root/delay/{queue}:{message_id}.1 {code}"):
            refused = daemon.request("DELETE", ack)
            assert refused_for_now(refused), (NAMES[code], refused.status, refused.body)
        assert daemon.request("DELETE", ack).status == 204
        assert daemon.fetch(queue).status == 204


@pytest.mark.timeout(120)
@pytest.mark.parametrize("state", ["ready", "in_flight"])
def test_a_delete_whose_rename_fails_is_503_not_404(mounted, state):
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"delete-{state.replace('_', '-')}-{NAMES[code].lower()}"
        message_id = daemon.add(queue, b"deleted")
        path = f"/root/queues/{queue}/{message_id}"
        if state == "in_flight":
            assert daemon.fetch(queue).status == 200
            path = f"/root/delay/{queue}:{message_id}.1"
        with Faults(faults, f"rename {path} {code}"):
            refused = daemon.delete(queue, message_id)
            assert refused_for_now(refused), (NAMES[code], refused.status, refused.body)
        assert daemon.delete(queue, message_id).status == 204
        assert daemon.delete(queue, message_id).status == 404
        assert daemon.fetch(queue).status == 204


@pytest.mark.timeout(120)
def test_a_flush_that_fails_is_503_for_adds_and_fetches(mounted):
    # fsyncdir of the folders a batch changed (sync=file, which --sync=auto picks on FUSE).
    # The claim whose flush failed stays in delay/ until its due time, as one whose answer was
    # lost: a queue timeout of 1 s brings it back within the test.
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"flush-{NAMES[code].lower()}"
        assert daemon.request("PUT", f"/{queue}").status == 201
        assert daemon.request("PATCH", f"/{queue}/properties", b'{"timeout": 1}').status == 200
        kept = daemon.add(queue, b"kept")
        with Faults(faults, *(f"fsyncdir /root/{folder} {code}" for folder in ("new", "delay")),
                    f"fsyncdir /root/queues/{queue} {code}"):
            resp = daemon.request("POST", f"/{queue}/messages", b"refused")
            assert refused_for_now(resp), (NAMES[code], resp.status, resp.body)
            resp = daemon.fetch(queue)
            assert refused_for_now(resp), (NAMES[code], resp.status, resp.body)
        fetch_all(daemon, queue, {kept})


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op", ["create", "fsync", "rename"])
def test_an_add_whose_file_fails_in_new_is_503(mounted, op):
    # The add's file in new/: written (create, fsync), then renamed into its queue.
    daemon, faults = mounted
    for code in FAULTS:
        queue = f"add-{op}-{NAMES[code].lower()}"
        kept = daemon.add(queue, b"kept")  # The queue exists, and the save actor knows it.
        with Faults(faults, f"{op} /root/new/{queue}:* {code}"):
            resp = daemon.request("POST", f"/{queue}/messages", b"refused")
            assert refused_for_now(resp), (NAMES[code], resp.status, resp.body)
        fetch_all(daemon, queue, {kept})
        assert daemon.fetch(queue).status == 204  # The refused add left nothing behind.
