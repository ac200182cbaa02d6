"""Operating mq from its dashboard, in a real headless Chromium (Debian's, driven by playwright)
against a live daemon for the module whose root holds 10,000 queues: finding a queue among
them and paging, and the last hour's charts kept by the daemon; and against a second one whose
root holds 100 queues: creating a queue and deleting one after the
confirmation, publishing, peeking, fetching and then acking or nacking, the consumers of a
queue (parked long polls and clients). Each action is done through the page and its effect
checked through the API. The screenshots go to one folder of the test run, whose path is
printed."""

import base64
import http.client
import os
import shutil
import threading
from pathlib import Path

import pytest

from mq import installed_version
from mq.store import Store
from support import Daemon, poll_for, ready_daemon

#: One xdist worker runs the heavy modules one after another (tests/clients/test_local.py's
#: thousands of messages too): on two cores side by side they starved each other past their waits.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180), pytest.mark.xdist_group("heavy")]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Chromium as root in a container: no sandbox, no GPU, nothing fetched from the network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: The queues the root holds before the daemon starts.
MANY = [f"many-{n:05d}" for n in range(10_000)]
#: A page of the queue table.
PAGE = 50
#: JavaScript counting the pixels of a colour on a canvas (give or take antialiasing).
PIXELS = """([id, r, g, b]) => {
    const c = document.getElementById(id);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 30) n++;
    }
    return n; }"""


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    """The module's daemon, its root made with 10,000 queues as the store lays one out (a
    folder each, without a flush each: minutes on a loaded disk otherwise)."""
    workdir = tmp_path_factory.mktemp("dashboard-actions")
    Store(str(workdir / "root")).init()
    for name in MANY:
        os.mkdir(workdir / "root" / "queues" / name)
    # A timer long enough that a message fetched through the page is still in flight when
    # the page acks it, on a busy machine.
    daemon = Daemon(workdir / "root", workdir, workers=2, timeout=60)
    try:
        daemon.start()
        daemon.wait_ready(timeout=120)  # 10,000 queues are listed at start.
        yield daemon
    finally:
        daemon.cleanup()


@pytest.fixture(scope="module")
def shots(tmp_path_factory, request) -> Path:
    """The folder the screenshots go to, its path printed."""
    folder = tmp_path_factory.mktemp("dashboard-screenshots")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"dashboard screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def quiet_mq(tmp_path_factory):
    """A daemon whose root holds 100 queues beside the tests' own, for the actions on one
    queue: the dashboard of the 10,000 gathers every queue's figures each second it is open,
    which cost the module two thirds of its 170 CPU s and starved these actions on a loaded
    machine; finding a queue among the 10,000 is the paging test's."""
    workdir = tmp_path_factory.mktemp("dashboard-quiet")
    Store(str(workdir / "root")).init()
    for name in MANY[:100]:  # A filter that matches none of them says so (an empty root differs).
        os.mkdir(workdir / "root" / "queues" / name)
    yield from ready_daemon(workdir, workers=2, timeout=60)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """One headless Chromium for the module (a browser context with its own profile)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not shutil.which(CHROMIUM):
        pytest.skip("chromium is not installed: `make test` installs it (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, timeout=60_000, viewport={"width": 1400, "height": 900})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def browser_page(chromium):
    """The module's first page of Chromium, kept blank between the tests that use it."""
    page = chromium.pages[0] if chromium.pages else chromium.new_page()
    page.set_default_timeout(30_000)
    return page


@pytest.fixture
def page(mq, browser_page):
    """The page on the dashboard of the 10,000 queues, for the test; blank again after it:
    open, it gathers every queue's figures each second (about a second of the daemon's CPU
    each time on a loaded machine), which starved the other tests of the module."""
    browser_page.goto(f"http://127.0.0.1:{mq.port}/_mq/dashboard")
    yield browser_page
    browser_page.goto("about:blank")


@pytest.fixture
def quiet_page(quiet_mq, chromium):
    """A page on quiet_mq's dashboard (the page of the 10,000 queues is blank meanwhile)."""
    quiet = chromium.new_page()
    quiet.set_default_timeout(30_000)
    quiet.goto(f"http://127.0.0.1:{quiet_mq.port}/_mq/dashboard")
    yield quiet
    quiet.close()


def rows(page) -> list[str]:
    """The queues of the table's page, in order."""
    # At once: the rows may change between two reads of a locator.
    return page.evaluate("() => [...document.querySelectorAll('#queues tbody tr')]"
                         ".map((row) => row.dataset.queue)")


def notice(page) -> str:
    """The notice line."""
    return page.inner_text("#notice")


def noticed(page, check, what: str) -> str:
    """Wait for the notice line to pass check (a text it equals, or a predicate); the line."""
    test = check if callable(check) else (lambda line: line == check)
    try:
        return poll_for(lambda: test(notice(page)) and notice(page), 60, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}; the notice says {notice(page)!r}") from None


def find(page, mq, text: str) -> None:
    """Show the overview and type text into the Find field."""
    page.goto(f"http://127.0.0.1:{mq.port}/_mq/dashboard#/")
    page.wait_for_selector("#overview:not([hidden])")
    page.fill("#queue-filter", text)


def names(mq, **query) -> list[str]:
    """The queues GET /_mq/queues lists with this query."""
    path = "/_mq/queues?" + "&".join(f"{k}={v}" for k, v in query.items())
    return [q["name"] for q in mq.request("GET", path, timeout=60).json()["queues"]]


def peeked(mq, queue: str) -> list[str]:
    """The bodies of the queue's ready messages, oldest first."""
    return [base64.b64decode(m["body"]).decode()
            for m in mq.request("GET", f"/{queue}/peek?max=100").json()["messages"]]


def figures(mq, queue: str) -> dict:
    """The queue's statistics, as GET /_mq/queues?name= gives them once it lists the queue (a
    queue just made shows within STATS_AGE_S)."""
    return poll_for(lambda: mq.request("GET", f"/_mq/queues?name={queue}", timeout=60).json()[
        "queues"], 60, what=f"{queue} listed")[0]


def test_ten_thousand_queues_are_found_and_paged_on_the_daemon(mq, page, shots):
    poll_for(lambda: rows(page) == MANY[:PAGE], 120, what="the first page of queues")
    assert page.inner_text("#page-info") == f"1–{PAGE} of {len(MANY)}"
    page.click("#page-next")
    poll_for(lambda: rows(page) == MANY[PAGE:2 * PAGE], 60, what="the second page")
    assert page.inner_text("#page-info") == f"{PAGE + 1}–{2 * PAGE} of {len(MANY)}"
    assert names(mq, offset=PAGE, limit=PAGE) == MANY[PAGE:2 * PAGE]

    page.fill("#queue-filter", "0999")
    expected = [name for name in MANY if "0999" in name]
    poll_for(lambda: rows(page) == expected, 60, what="the queues whose names hold 0999")
    assert names(mq, filter="0999") == expected
    assert page.inner_text("#page-info") == f"1–{len(expected)} of {len(expected)} matching " \
                                            f"({len(MANY)} queues)"
    assert page.is_disabled("#page-next") and page.is_disabled("#page-prev")
    page.screenshot(path=str(shots / "find-0999.png"), full_page=True)

    page.fill("#queue-filter", "no-such-queue")
    poll_for(lambda: page.is_visible("#no-match"), 60, what="the line saying none matches")
    assert rows(page) == []


def test_a_queue_is_created_and_deleted_only_once_its_name_is_typed(quiet_mq, quiet_page, shots):
    mq, page = quiet_mq, quiet_page
    find(page, mq, "orders")
    page.fill("#create-name", "orders")
    page.click("#create-button")
    noticed(page, "created queue orders", "the creation notice")
    assert mq.request("GET", "/orders").status == 200
    poll_for(lambda: rows(page) == ["orders"], 60, what="the new queue in the table")

    page.click('#queues tr[data-queue="orders"] td.name a')
    page.wait_for_selector("#queue-page:not([hidden])")
    page.click("#q-delete")
    page.wait_for_selector("#delete-confirm:not([hidden])")
    assert page.inner_text("#delete-queue") == "orders"
    assert page.is_disabled("#delete-confirm-go")
    page.fill("#delete-confirm-name", "order")
    assert page.is_disabled("#delete-confirm-go")
    page.screenshot(path=str(shots / "delete-confirmation.png"), full_page=True)
    page.click("#delete-cancel")
    assert page.is_hidden("#delete-confirm")
    assert mq.request("GET", "/orders").status == 200  # Nothing deleted unconfirmed.

    # A look at the queue's messages still on its way when the queue goes (held here until
    # then) must not cover the deletion's notice with its 404.
    held: list = []
    page.route("**/orders/peek?*", lambda route: held.append(route))
    assert mq.request("POST", "/orders/messages", b"late").status == 201
    poll_for(lambda: notice(page) is not None and held, 60, what="a look at the messages held")
    page.click("#q-delete")
    page.fill("#delete-confirm-name", "orders")
    page.click("#delete-confirm-go")
    noticed(page, "deleted queue orders", "the deletion notice")
    assert mq.request("GET", "/orders").status == 404
    with page.expect_response(lambda response: "/orders/peek" in response.url) as answered:
        for route in held:
            route.continue_()
    assert answered.value.status == 404
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")  # its handler has run
    page.unroute("**/orders/peek?*")
    assert notice(page) == "deleted queue orders"
    page.wait_for_selector("#overview:not([hidden])")
    poll_for(lambda: rows(page) == [] and page.is_visible("#no-match"), 60,
             what="the queue gone from the table")


def fetched_body(page) -> str:
    """The body the Get form fetched."""
    return page.inner_text("#fetched-body") if page.is_visible("#fetched") else ""


def test_messages_are_published_peeked_fetched_acked_and_nacked(quiet_mq, quiet_page, shots):
    mq, page = quiet_mq, quiet_page
    page.goto(f"http://127.0.0.1:{mq.port}/_mq/dashboard#/queue/jobs")
    poll_for(lambda: page.is_visible("#q-missing"), 60, what="the page saying jobs is missing")
    page.click("#q-create")
    noticed(page, "created queue jobs", "the creation notice")
    assert mq.request("GET", "/jobs").status == 200

    page.fill("#publish-body", '{"n": 1}')
    page.fill("#publish-type", "application/json")
    page.click("#publish-send")
    noticed(page, lambda line: line.startswith("published "), "the publish notice")
    [message] = mq.request("GET", "/jobs/peek").json()["messages"]
    assert notice(page) == f"published {message['id']} to jobs"
    assert (base64.b64decode(message["body"]), message["content_type"]) == \
        (b'{"n": 1}', "application/json")
    assert page.input_value("#publish-body") == ""

    page.fill("#publish-body", "later")
    page.fill("#publish-type", "text/plain")
    page.fill("#publish-delay", "600")
    page.click("#publish-send")
    noticed(page, lambda line: ", due " in line, "the delayed add's notice")
    poll_for(lambda: figures(mq, "jobs")["delayed"] == 1, 60, what="one delayed message")
    page.fill("#publish-delay", "")
    page.fill("#publish-body", "second")
    page.click("#publish-send")
    poll_for(lambda: peeked(mq, "jobs") == ['{"n": 1}', "second"], 60, what="two ready messages")

    page.click("#get-peek")
    poll_for(lambda: page.evaluate("() => [...document.querySelectorAll('#got-messages td.body')]"
                                   ".map((td) => td.textContent)") == ['{"n": 1}', "second"],
             60, what="the peeked bodies")
    assert peeked(mq, "jobs") == ['{"n": 1}', "second"]  # A peek claims nothing.

    page.click("#get-fetch")
    poll_for(lambda: fetched_body(page) == '{"n": 1}', 60, what="the fetched message")
    assert page.inner_text("#fetched-type") == "application/json"
    assert peeked(mq, "jobs") == ["second"]
    poll_for(lambda: figures(mq, "jobs")["in_flight"] == 1, 60, what="one message in flight")
    page.screenshot(path=str(shots / "fetched.png"), full_page=True)
    page.click("#fetched-ack")
    noticed(page, f"acked {message['id']}", "the ack notice")
    assert page.is_disabled("#fetched-ack") and page.is_disabled("#fetched-nack")
    # Gone for good: a delete of it finds no such message.
    assert mq.request("DELETE", f"/jobs/messages/{message['id']}").status == 404
    poll_for(lambda: figures(mq, "jobs")["totals"]["acks"] == 1, 60, what="the ack counted")

    page.click("#get-fetch")
    poll_for(lambda: fetched_body(page) == "second", 60, what="the second message fetched")
    assert peeked(mq, "jobs") == []
    page.click("#fetched-nack")
    noticed(page, lambda line: line.endswith(": ready again"), "the nack notice")
    assert peeked(mq, "jobs") == ["second"]
    [again] = mq.request("GET", "/jobs/peek").json()["messages"]
    assert again["attempts"] == 1
    # The list's figures are up to STATS_AGE_S old.
    poll_for(lambda: figures(mq, "jobs")["totals"]["nacks"] == 1, 60, what="the nack counted")
    page.screenshot(path=str(shots / "nacked.png"), full_page=True)


class LongPoll(threading.Thread):
    """Long polls of a queue, one after the other on one connection (one client), until one
    is answered with a message; its body."""

    def __init__(self, port: int, queue: str):
        super().__init__(daemon=True)
        self.port, self.queue, self.body = port, queue, None

    def run(self) -> None:
        """Wait 20 s for a message, again and again until one comes (or the daemon is gone)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            while self.body is None:
                conn.request("GET", f"/{self.queue}/messages?wait=20")
                response = conn.getresponse()
                body = response.read()
                if response.status == 200:
                    self.body = body
        except (OSError, http.client.HTTPException):
            pass  # The module's daemon stopped: the test failed before the message came.
        finally:
            conn.close()


def test_the_consumers_of_a_queue_are_its_parked_long_polls_and_recent_clients(quiet_mq, quiet_page,
                                                                                 shots):
    mq, page = quiet_mq, quiet_page
    assert mq.request("PUT", "/waits").status == 201
    poll = LongPoll(mq.port, "waits")
    poll.start()
    # A second client, on a connection of its own, fetches once and does not wait.
    assert mq.request("GET", "/waits/messages").status == 204
    find(page, mq, "waits")

    def cells() -> tuple[str, str]:
        row = '#queues tr[data-queue="waits"]'
        return page.inner_text(f"{row} td.waiting"), page.inner_text(f"{row} td.clients")

    poll_for(lambda: rows(page) == ["waits"] and cells() == ("1", "2"), 60,
             what="1 long poll waiting and 2 clients")
    # The API agrees (between two of the thread's long polls, none waits for a moment).
    poll_for(lambda: (f := figures(mq, "waits"))["waiting"] == 1 and f["clients"] == 2, 60,
             what="the API to count the long poll and both clients")
    page.screenshot(path=str(shots / "consumers.png"), full_page=True)

    assert mq.request("POST", "/waits/messages", b"for the long poll").status == 201
    poll.join(30)
    assert poll.body == b"for the long poll"
    poll_for(lambda: cells() == ("0", "2"), 60, what="no long poll waiting, the clients still counted")
    poll_for(lambda: figures(mq, "waits")["waiting"] == 0, 60, what="no long poll counted")


def test_the_last_hour_is_kept_by_the_daemon_and_charted(mq, page, shots):
    history = poll_for(lambda: (h := mq.request("GET", "/_mq/history").json())
                       and len(h["samples"]) >= 2 and h, 60, what="two samples of the history")
    assert history["interval_s"] == 10 and history["span_s"] == 3600
    assert history["version"] == installed_version()
    last = history["samples"][-1]
    assert last["queues"] >= len(MANY) and last["root_free_bytes"] > 0
    times = [s["time"] for s in history["samples"]]
    # Each sample is stamped when its figures were gathered, which on a loaded machine is
    # seconds after its timer fired (the statistics of 10,000 queues): so later, not 10 s apart.
    assert times == sorted(set(times)), times
    assert mq.request("GET", f"/_mq/history?since={times[-1]}").json()["samples"] == []

    find(page, mq, "")
    poll_for(lambda: int(page.inner_text("#history-count")) >= 2, 60, what="the samples on the page")
    assert page.inner_text("#version") == installed_version()
    assert page.inner_text("#disk-free").endswith("iB")
    # The root's free space (#636363) is drawn as a line once two samples make a segment: on
    # an hour's width, two samples 10 s apart are a stroke of a few pixels.
    poll_for(lambda: page.evaluate(PIXELS, ["history-disk", 0x63, 0x63, 0x63]) > 2, 60,
             what="the free space line on the chart")
    page.screenshot(path=str(shots / "overview.png"), full_page=True)


def test_the_new_routes_refuse_bad_queries(mq):
    for path, what in (("/_mq/queues?limit=0", "limit"), ("/_mq/queues?offset=-1", "offset"),
                       ("/_mq/queues?limit=1001", "limit"), ("/_mq/history?since=soon", "since"),
                       ("/_mq/queues?sort=name", "unknown query parameter 'sort'")):
        answer = mq.request("GET", path)
        assert answer.status == 400, path
        assert answer.json()["error"] == "invalid" and what in answer.json()["message"], path
