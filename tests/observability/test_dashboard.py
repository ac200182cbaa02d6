"""The dashboard in a real headless Chromium (Debian's, driven by playwright) against a live
daemon: its numbers and live chart under traffic, peek and purge, the process table, and a
queue's page (its properties edited through the form, its messages, its dead letters
redriven). Each test leaves screenshots in its tmp_path."""

import http.client
import shutil
import threading

import pytest

from support import poll_for, ready_daemon

#: The module's tests on one xdist worker: spread over the workers, each started its Chromium and its daemon.
pytestmark = pytest.mark.xdist_group("dashboard")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Chromium as root in a container: no sandbox, no GPU, nothing fetched from the network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BODIES = ("first", "second", "third")
#: JavaScript counting the chart's pixels of the adds line's colour (give or take antialiasing).
ADDS_LINE_PIXELS = """() => {
    const c = document.getElementById('chart');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (Math.abs(d[i] - 31) + Math.abs(d[i + 1] - 119) + Math.abs(d[i + 2] - 180) < 30) n++;
    }
    return n; }"""


class Traffic(threading.Thread):
    """Adds to a queue and fetches from it over HTTP until stopped; counts the adds stored."""

    def __init__(self, port: int, queue: str):
        super().__init__(daemon=True)
        self.port, self.queue = port, queue
        self.added = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        """Two adds and one fetch every 50 ms or so."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        while not self.stopping.wait(0.05):
            for method, path in (("POST", "/messages"), ("POST", "/messages"), ("GET", "/messages")):
                conn.request(method, f"/{self.queue}{path}", body=b"tick" if method == "POST" else None)
                resp = conn.getresponse()
                resp.read()
                self.added += method == "POST" and resp.status == 201
        conn.close()


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module: a start costs seconds of CPU on two cores."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not shutil.which(CHROMIUM):
        pytest.skip("chromium is not installed: `make test` installs it (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        # Playwright's own 30 s for a start is tight on a loaded 2-core machine.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    """The module's daemon (two worker pairs, a one-second redelivery timer): each test has
    queues of its own, and only the process table's test, the last, restarts a process."""
    yield from ready_daemon(tmp_path_factory.mktemp("dashboard"), workers=2, timeout=1)


@pytest.fixture
def browser(chromium):
    """A page of a fresh browser context (its own cookies, storage and cache) of the module's
    Chromium."""
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


def cell(page, queue: str, column: str) -> str:
    """The text of one cell of the queue table."""
    return page.inner_text(f'#queues tr[data-queue="{queue}"] td.{column}')


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_dashboard_shows_live_figures_and_peeks_and_purges(browser, mq, tmp_path):
    page = browser
    for body in BODIES:
        assert mq.request("POST", "/inspect/messages", body.encode()).status == 201
    traffic = Traffic(mq.port, "live")
    traffic.start()
    try:
        page.goto(f"http://127.0.0.1:{mq.port}/")
        assert page.url.endswith("/_mq/dashboard")
        page.wait_for_selector('#queues tr[data-queue="inspect"] td.ready')
        poll_for(lambda: cell(page, "inspect", "ready") == "3", 30, what="inspect's 3 ready")
        assert cell(page, "inspect", "adds") == "3"
        stored = mq.request("GET", "/_mq/stats").json()["queues"]["inspect"]["bytes"]
        assert 3 * 100 < stored < 1024  # Three small messages, headers included.
        poll_for(lambda: cell(page, "inspect", "bytes") == f"{stored} B", 30, what="inspect's size")
        # Updated in place, no reload: the live queue's adds keep growing on the same page.
        poll_for(lambda: page.is_visible('#queues tr[data-queue="live"]'), 30, what="the live queue")
        seen = int(cell(page, "live", "adds"))
        poll_for(lambda: int(cell(page, "live", "adds")) > seen, 30, what="the adds to grow")
        poll_for(lambda: float(page.inner_text("#add-rate")) > 0, 30, what="an add rate")
        # The adds line (#1f77b4) is drawn once two samples make a segment.
        poll_for(lambda: page.evaluate(ADDS_LINE_PIXELS) > 20, 30, what="the adds line on the chart")
    finally:
        traffic.stopping.set()
        traffic.join(10)
    # Once the traffic stopped, the page shows exactly what was stored, as the stats JSON does.
    poll_for(lambda: cell(page, "live", "adds") == str(traffic.added), 30,
             what=f"the page to show the {traffic.added} adds")
    stats = mq.request("GET", "/_mq/stats").json()["queues"]["live"]
    assert stats["totals"]["adds"] == traffic.added
    # The page may show the adds from a refresh taken before the last fetch was counted.
    fetches = str(stats["totals"]["fetches"])
    poll_for(lambda: cell(page, "live", "fetches") == fetches, 30,
             what=f"the page to show the {fetches} fetches")

    page.click('#queues tr[data-queue="inspect"] button.peek')
    page.wait_for_selector("#peek:not([hidden])")
    rows = page.locator("#peek-messages tbody tr")
    assert [rows.nth(i).locator("td.body").inner_text() for i in range(rows.count())] == list(BODIES)
    assert page.inner_text("#peek-queue") == "inspect"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click('#queues tr[data-queue="inspect"] button.purge')
    poll_for(lambda: page.inner_text("#notice") == "purged 3 message(s) from inspect", 30,
             what="the purge notice")
    poll_for(lambda: cell(page, "inspect", "ready") == "0", 30, what="inspect to show 0 ready")
    poll_for(lambda: cell(page, "inspect", "bytes") == "0 B", 30, what="inspect to show 0 B")
    assert mq.request("GET", "/inspect/peek").json()["messages"] == []
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    assert (tmp_path / "dashboard.png").stat().st_size > 0


def bodies(page, table: str) -> list[str]:
    """The bodies a message table of the page shows, in order."""
    return page.locator(f"#{table} tbody td.body").all_inner_texts()


def api_error(page) -> str:
    """The error line under the properties form."""
    return page.inner_text("#props-error")


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_queue_page_edits_properties_and_redrives_dead_letters(browser, mq, tmp_path):
    page = browser
    for body in ("first", "second"):
        assert mq.request("POST", "/orders/messages", body.encode()).status == 201
    page.goto(f"http://127.0.0.1:{mq.port}/_mq/dashboard")
    page.click('#queues tr[data-queue="orders"] td.name a')
    page.wait_for_selector("#queue-page:not([hidden])")
    assert page.url.endswith("#/queue/orders") and page.is_hidden("#overview")
    assert page.inner_text("#q-name") == "orders"
    poll_for(lambda: bodies(page, "q-messages") == ["first", "second"], 30, what="the ready bodies")
    poll_for(lambda: page.input_value("#prop-timeout") == "1", 30, what="the properties form")
    assert page.inner_text('#props tr[data-property="retry"] td.origin') == "default"

    # Bad input: the API's own 400 is shown, the field it names is marked, nothing is stored.
    page.fill("#prop-timeout", "soon")
    page.click("#props-save")
    poll_for(lambda: "must be a number" in api_error(page), 30, what="the API's error")
    assert api_error(page) == "Not saved: 400 invalid: property 'timeout' must be a number, not str"
    assert "invalid" in page.get_attribute("#prop-timeout", "class")
    page.fill("#prop-timeout", "1")
    page.fill("#prop-retry", "1000")
    page.click("#props-save")
    poll_for(lambda: "'retry'" in api_error(page), 30, what="the range error")
    assert "between" in api_error(page)
    page.screenshot(path=str(tmp_path / "queue-page-refused.png"), full_page=True)
    assert mq.request("GET", "/orders/properties").json()["own"] == {}

    # Good input: PATCH stores it, the form shows it as the queue's own.
    page.fill("#prop-retry", "0")
    page.click("#props-save")
    poll_for(lambda: page.inner_text("#notice") == "saved retry of orders", 30, what="the save")
    assert api_error(page) == ""
    assert mq.request("GET", "/orders/properties").json()["own"] == {"retry": 0}
    assert page.inner_text('#props tr[data-property="retry"] td.origin') == "set on the queue"
    assert page.inner_text("#dlq-name") == "orders.dead"

    # With no retry left, a fetched message not acked is dead-lettered at its 1 s timeout.
    assert mq.request("GET", "/orders/messages").body == b"first"
    poll_for(lambda: bodies(page, "dlq-messages") == ["first"], 30, what="the dead letter listed")
    poll_for(lambda: page.inner_text("#q-figures td.dead") == "1", 30, what="1 dead shown")
    poll_for(lambda: bodies(page, "q-messages") == ["second"], 30, what="one ready body left")
    assert page.is_enabled("#redrive") and page.is_hidden("#dlq-empty")
    page.screenshot(path=str(tmp_path / "queue-page-dead-letter.png"), full_page=True)

    page.click("#redrive")
    poll_for(lambda: page.inner_text("#notice") == "moved 1 message(s) from orders.dead back to orders",
             30, what="the redrive notice")
    poll_for(lambda: page.is_visible("#dlq-empty"), 30, what="the dead letters to be gone")
    poll_for(lambda: sorted(bodies(page, "q-messages")) == ["first", "second"], 30,
             what="the redriven message back among the ready ones")
    assert [m["id"] for m in mq.request("GET", "/orders/peek").json()["messages"]]
    assert mq.request("GET", "/orders.dead/peek").json()["messages"] == []
    page.screenshot(path=str(tmp_path / "queue-page-redriven.png"), full_page=True)

    page.click(".crumbs a")
    page.wait_for_selector("#overview:not([hidden])")
    assert page.is_hidden("#queue-page")


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_process_table_shows_each_process_and_its_restarts(browser, mq, tmp_path):
    page = browser
    page.goto(f"http://127.0.0.1:{mq.port}/_mq/dashboard")
    health = mq.health()
    names = ["supervisor"] + [child["name"] for child in health["children"]]

    def process(name: str, column: str) -> str:
        return page.inner_text(f'#processes tr[data-process="{name}"] td.{column}')

    poll_for(lambda: page.locator("#processes tbody tr").count() == len(names), 30,
             what="a row per process")
    assert [row.get_attribute("data-process")
            for row in page.locator("#processes tbody tr").all()] == names
    assert process("supervisor", "pid") == str(mq.pid)
    for child in health["children"]:
        assert process(child["name"], "pid") == str(child["pid"])
        assert process(child["name"], "state") == "up"
        assert process(child["name"], "restarts") == "0"
        assert process(child["name"], "memory").endswith(" MiB")
    assert process("fetch-1", "role") == "fetch actor"
    assert process("front-0", "role") == "HTTP front"

    old = mq.kill_child("fetch-1")
    new = mq.wait_for_new_pid("fetch-1", old, timeout=30)
    poll_for(lambda: process("fetch-1", "restarts") == "1" and process("fetch-1", "pid") == str(new),
             30, what="fetch-1's restart and new pid")
    assert process("fetch-1", "state") == "up"
    page.screenshot(path=str(tmp_path / "processes.png"), full_page=True)
