"""``foreperson serve`` in a real browser (issue 13 item 5): headless Chromium from the
operating system's packages, driven by Selenium through the system chromedriver, against
a SQLite store while a job runs. The charts' numbers move, a DEAD task appears with its
error, the retry button revives it when allowed and is absent when not, and a payload
holding ``<script>`` shows as text. A page whose snapshot answers slower than its poll
period never has two polls in flight. The screenshot goes to ``$FOREPERSON_SCREENSHOT``
when set (README's docs/serve.png is taken this way)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from foreperson.errors import GiveUp
from foreperson.observe import AsgiServer, StatusServer
from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

CHROMIUM = os.environ.get("FOREPERSON_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FOREPERSON_CHROMEDRIVER", "/usr/bin/chromedriver")
XSS = "<script>window.pwned = 1</script>"
WAIT_S = 30


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    for path in (CHROMIUM, CHROMEDRIVER):      # never skipped: .ci/run installs both
        assert os.path.exists(path), (f"{path} is missing: apt-get install -y chromium "
                                      "chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,1250",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


def wait(driver, condition, message):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(
        lambda d: condition(d), message=message)


def legend(driver, chart: str, series: str | None = None) -> dict[str, str]:
    """The chart's legend: series -> the value shown now (read in one go: the page
    redraws every second)."""
    values = dict(driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(s => [s.dataset.series, s.textContent]);", f"#{chart} .legend .v"))
    return values if series is None else {series: values.get(series, "")}


def text_of(driver, selector: str) -> str | None:
    """The text of the first element matching ``selector`` now, or None."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
        selector)


def click(driver, selector: str) -> bool:
    """Click the element (a real click); False when it is not there (yet) or was redrawn."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        found = driver.find_elements(By.CSS_SELECTOR, selector)
        if found:
            found[0].click()
            return True
    except StaleElementReferenceException:
        pass
    return False


def post(url: str, body: dict, headers: dict) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


def test_the_page_follows_a_running_job_in_a_browser(browser, tmp_path):
    store = SqliteStore(tmp_path / "jobs.db")
    gate = threading.Event()

    def work(task: Task) -> dict:
        assert gate.wait(WAIT_S), "the test never opened the gate"
        return {"done": task.payload["n"]}

    def refuse(task: Task) -> None:
        raise GiveUp(f"cannot handle {task.payload['text']}")

    sup = Supervisor(store)
    for i in range(4):
        sup.register(Worker(f"w{i}", {"work"}, fn=work, concurrency=2))
    sup.register(Worker("strict", {"check"}, fn=refuse))
    sup.add_tasks([Task("work", {"n": n}) for n in range(40)]
                  + [Task("check", {"text": XSS}, id="bad-ticket", max_attempts=1)])
    job = threading.Thread(target=sup.run_sync, daemon=True)
    read_only = StatusServer(store, port=0).start()
    writable = StatusServer(store, port=0, allow_retry=True).start()
    try:
        job.start()
        browser.get(read_only.url)
        # the job is running: workers hold tasks, nothing is completed yet, DEAD shows
        wait(browser, lambda d: any(v not in ("", "0")
                                    for v in legend(d, "chart-workers").values()),
             "no worker shown active")
        assert legend(browser, "chart-status", "completed") == {"completed": "0"}
        assert legend(browser, "chart-oldest")["oldest"] not in ("", "none")
        row = wait(browser, lambda d: text_of(d, 'tr[data-task="bad-ticket"]'),
                   "the DEAD task did not appear")
        assert "GiveUp: cannot handle " + XSS in row                # its error, as text
        assert "retries exhausted" in row and "1/1" in row
        assert text_of(browser, "button.retry") is None              # read-only
        assert browser.execute_script("return window.pwned") is None
        workers = wait(browser, lambda d: (text_of(d, "#workers-table") or "")
                       if f"{socket.gethostname()}:{os.getpid()}" in (
                           text_of(d, "#workers-table") or "") else None,
                       "the workers' process (host:pid) is not shown")
        assert "w0" in workers and "strict" in workers

        gate.set()                                                   # the job moves on
        wait(browser, lambda d: legend(d, "chart-status", "completed")["completed"] == "40",
             "completed never reached 40 on the page")
        wait(browser, lambda d: legend(d, "chart-oldest")["oldest"] == "none",
             "the oldest unfinished age never went away")
        assert int(browser.execute_script(
            "return document.querySelector('#chart-status svg').dataset.samples")) >= 2
        done = text_of(browser, "#workers-table")
        completed = {line.split("\t")[0]: int(line.split("\t")[4])
                     for line in done.splitlines()[1:]}
        assert sum(v for k, v in completed.items() if k != "strict") == 40, done
        assert min(completed[f"w{i}"] for i in range(4)) > 0, done   # everyone worked
        shot = tmp_path / "serve.png"
        browser.save_screenshot(str(shot))
        if os.environ.get("FOREPERSON_SCREENSHOT"):
            shutil.copy(shot, os.environ["FOREPERSON_SCREENSHOT"])
        job.join(WAIT_S)
        assert not job.is_alive()

        browser.get(read_only.url + "task/bad-ticket")             # the task's page
        payload = wait(browser, lambda d: text_of(d, "#payload pre"), "no payload shown")
        assert XSS in payload
        assert "retries_exhausted" in text_of(browser, "#timeline")
        assert browser.execute_script("return window.pwned") is None

        # cross-site requests cannot revive anything; the read-only page cannot at all
        retry = writable.url + "api/retry"
        assert post(read_only.url + "api/retry", {"all": True},
                    {"Content-Type": "application/json"}) == 404
        assert post(retry, {"all": True}, {"Content-Type": "application/json"}) == 403
        assert post(retry, {"all": True}, {"Content-Type": "application/json",
                                           "X-Foreperson-Token": writable.token,
                                           "Origin": "http://evil.example"}) == 403
        assert post(retry, {"all": True}, {"Content-Type": "text/plain",
                                           "X-Foreperson-Token": writable.token}) == 403
        assert store.get("bad-ticket").status is Status.DEAD

        browser.get(writable.url)                                   # retry allowed
        wait(browser, lambda d: click(d, 'tr[data-task="bad-ticket"] button.retry'),
             "no retry button")
        wait(browser, lambda d: store.get("bad-ticket").status is Status.PENDING,
             "the retry button did not revive the task")
        assert store.get("bad-ticket").reason == "revived"
        assert browser.execute_script("return window.pwned") is None
    finally:
        gate.set()
        sup.stop()
        read_only.shutdown()
        writable.shutdown()
        job.join(WAIT_S)
        store.close()


SLOW_S = 1.5
"""Seconds a snapshot takes in the slow store: longer than the page's 1 s poll period."""


class SlowSnapshots(SqliteStore):
    """A SQLite store whose ``stats()`` (the snapshot's first read) takes SLOW_S."""

    def stats(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the base's signature
        time.sleep(SLOW_S)                 # a slow store, not a wait for another thread
        return super().stats(*args, **kwargs)


class InFlight:
    """ASGI middleware counting the ``/api/snapshot`` requests being answered: now, the
    most at once, and how many arrived."""

    def __init__(self, app) -> None:
        self.app = app
        self.now = self.most = self.seen = 0
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        counted = scope["type"] == "http" and scope["path"] == "/api/snapshot"
        if counted:
            with self.lock:
                self.now += 1
                self.seen += 1
                self.most = max(self.most, self.now)
        try:
            await self.app(scope, receive, send)
        finally:
            if counted:
                with self.lock:
                    self.now -= 1


def test_a_slow_snapshot_never_has_two_polls_of_a_page_in_flight(browser, tmp_path):
    store = SlowSnapshots(tmp_path / "jobs.db")
    store.add([Task("work", {"n": n}) for n in range(3)])
    page = StatusServer(store, port=0, cache_s=0, metrics=False)   # every poll reads
    counter = InFlight(page.app)
    http = AsgiServer(counter, host="127.0.0.1", port=0).start()
    # Chromium's HTTP cache holds a second GET of a URL until the first is answered: off,
    # so that only the page's script can keep its polls from overlapping
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        browser.get(f"http://127.0.0.1:{http.port}/")
        wait(browser, lambda d: counter.seen >= 2, "the page did not poll")
        browser.execute_script("refresh(); refresh();")           # clicks during a poll
        wait(browser, lambda d: counter.seen >= 6, "the page stopped polling")
        assert counter.most == 1, f"{counter.most} snapshot requests at once"
        assert (text_of(browser, "#status-line") or "").startswith("3 tasks")
    finally:
        browser.get("about:blank")                                 # no more polls
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
        http.shutdown()
        page.shutdown()
        store.close()
