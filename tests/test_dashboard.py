"""The dashboard in a real headless Chromium (Debian's, driven by playwright) against a live
daemon with traffic running: its numbers, its live chart, peek and purge."""

import http.client
import shutil
import threading

import pytest

from support import poll_for

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


@pytest.fixture
def browser(tmp_path):
    """A page of a fresh headless Chromium with its own profile folder."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not shutil.which(CHROMIUM):
        pytest.skip("chromium is not installed: `make test` installs it (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def cell(page, queue: str, column: str) -> str:
    """The text of one cell of the queue table."""
    return page.inner_text(f'#queues tr[data-queue="{queue}"] td.{column}')


@pytest.mark.slow
@pytest.mark.timeout(90)
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
        poll_for(lambda: cell(page, "inspect", "ready") == "3", 10, what="inspect's 3 ready")
        assert cell(page, "inspect", "adds") == "3"
        # Updated in place, no reload: the live queue's adds keep growing on the same page.
        poll_for(lambda: page.is_visible('#queues tr[data-queue="live"]'), 10, what="the live queue")
        seen = int(cell(page, "live", "adds"))
        poll_for(lambda: int(cell(page, "live", "adds")) > seen, 10, what="the adds to grow")
        poll_for(lambda: float(page.inner_text("#add-rate")) > 0, 10, what="an add rate")
        # The adds line (#1f77b4) is drawn once two samples make a segment.
        poll_for(lambda: page.evaluate(ADDS_LINE_PIXELS) > 20, 10, what="the adds line on the chart")
    finally:
        traffic.stopping.set()
        traffic.join(10)
    # Once the traffic stopped, the page shows exactly what was stored, as the stats JSON does.
    poll_for(lambda: cell(page, "live", "adds") == str(traffic.added), 10,
             what=f"the page to show the {traffic.added} adds")
    stats = mq.request("GET", "/_mq/stats").json()["queues"]["live"]
    assert stats["totals"]["adds"] == traffic.added
    # The page may show the adds from a refresh taken before the last fetch was counted.
    fetches = str(stats["totals"]["fetches"])
    poll_for(lambda: cell(page, "live", "fetches") == fetches, 10,
             what=f"the page to show the {fetches} fetches")

    page.click('#queues tr[data-queue="inspect"] button.peek')
    page.wait_for_selector("#peek:not([hidden])")
    rows = page.locator("#peek-messages tbody tr")
    assert [rows.nth(i).locator("td").nth(3).inner_text() for i in range(rows.count())] == list(BODIES)
    assert page.inner_text("#peek-queue") == "inspect"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click('#queues tr[data-queue="inspect"] button.purge')
    poll_for(lambda: page.inner_text("#notice") == "purged 3 message(s) from inspect", 10,
             what="the purge notice")
    poll_for(lambda: cell(page, "inspect", "ready") == "0", 10, what="inspect to show 0 ready")
    assert mq.request("GET", "/inspect/peek").json()["messages"] == []
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    assert (tmp_path / "dashboard.png").stat().st_size > 0
