"""The viewer's pages in a real browser (Debian's chromium, headless, driven by selenium
through Debian's chromedriver; `scripts/test.sh` installs both): what a person sees, no
console errors, and no request leaving the machine. Screenshots of the job page and an
episode page are kept in test-artifacts/view/."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from agentenv.view import build_site
from tests.view.jobs import REASONING, write_job, write_refactor_job

pytestmark = pytest.mark.no_docker

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "view"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("Debian's chromium and chromium-driver are missing: run scripts/test.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    with webdriver.Chrome(service=Service(driver), options=options) as chrome:
        yield chrome


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    job = tmp_path_factory.mktemp("job") / "browsed"
    write_job(job, ["parse-csv", "fix-dates", "odd name é", "t4"])
    return build_site(job)


def _visible_rows(browser: webdriver.Chrome) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
    return [r.get_attribute("data-status") or "" for r in rows if r.is_displayed()]


def _requests(browser: webdriver.Chrome) -> list[str]:
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_a_filter_hides_passed_episodes(browser: webdriver.Chrome, site: Path) -> None:
    browser.get(site.as_uri())
    everyone = _visible_rows(browser)
    assert len(everyone) == 8 and "passed" in everyone and "failed" in everyone
    Select(browser.find_element(By.ID, "status")).select_by_visible_text("failed")
    assert set(_visible_rows(browser)) == {"failed"}
    Select(browser.find_element(By.ID, "status")).select_by_visible_text("all")
    ended = Select(browser.find_element(By.ID, "outcome"))  # how it ended: beside the status
    ended.select_by_visible_text("sandbox_lost")
    assert _visible_rows(browser) == ["error"]
    ended.select_by_visible_text("max_turns")
    assert set(_visible_rows(browser)) == {"failed"}
    ended.select_by_visible_text("any")
    browser.find_element(By.ID, "text").send_keys("odd")
    assert len(_visible_rows(browser)) == 2
    browser.refresh()  # a running job's page reloads itself: the filter stays
    assert len(_visible_rows(browser)) == 2
    assert browser.find_element(By.ID, "text").get_attribute("value") == "odd"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.find_element(By.ID, "text").clear()
    browser.find_element(By.ID, "text").send_keys(" ")  # an input event: all rows again
    browser.save_screenshot(str(ARTIFACTS / "job.png"))


def test_sorting_by_a_column(browser: webdriver.Chrome, site: Path) -> None:
    browser.get(site.as_uri())
    browser.find_element(By.CSS_SELECTOR, "th[data-col='1']").click()  # sample, ascending
    samples = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#episodes td:nth-child(2)")]
    assert samples == sorted(samples)
    browser.find_element(By.CSS_SELECTOR, "th[data-col='1']").click()  # descending
    samples = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#episodes td:nth-child(2)")]
    assert samples == sorted(samples, reverse=True)


def test_the_reasoning_appears_after_a_click(browser: webdriver.Chrome, site: Path) -> None:
    browser.get(site.as_uri())
    browser.find_element(By.LINK_TEXT, "fix-dates").click()
    assert "fix-dates #" in browser.find_element(By.TAG_NAME, "h1").text
    reasoning = browser.find_elements(By.CSS_SELECTOR, "details.reasoning")[0]
    first_line = REASONING.split(".")[0]
    assert first_line not in reasoning.text  # folded
    reasoning.find_element(By.TAG_NAME, "summary").click()
    assert first_line in reasoning.text
    assert "<script>alert('x')</script>" in reasoning.text  # shown as text, never run
    browser.save_screenshot(str(ARTIFACTS / "episode.png"))


def test_no_console_errors_and_no_request_leaves(browser: webdriver.Chrome, site: Path) -> None:
    browser.get_log("browser")
    browser.get_log("performance")
    pages = [site, *sorted(site.parent.glob("episodes/*.html"))]
    for page in pages:
        browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    requests = _requests(browser)
    assert len(requests) >= len(pages)  # the log saw them
    assert all(url.startswith("file://") for url in requests), requests


def test_a_refactors_diff_is_rendered(
    browser: webdriver.Chrome, tmp_path_factory: pytest.TempPathFactory
) -> None:
    job = tmp_path_factory.mktemp("refactor") / "rename"
    write_refactor_job(job)
    index = build_site(job)
    browser.get(index.as_uri())
    browser.find_element(By.LINK_TEXT, "billing").click()
    added = browser.find_elements(By.CSS_SELECTOR, "pre.diff span.add")
    removed = browser.find_elements(By.CSS_SELECTOR, "pre.diff span.del")
    assert [a.text for a in added] == ["+def get_json(url):"]
    assert [r.text for r in removed] == ["-def fetch_json(url):"]
    # coloured as a diff is: green additions, red removals (from our stylesheet)
    assert added[0].value_of_css_property("color") == "rgba(19, 115, 51, 1)"
    assert removed[0].value_of_css_property("color") == "rgba(179, 38, 30, 1)"
    assert "before: green" in browser.page_source
    browser.save_screenshot(str(ARTIFACTS / "refactor.png"))
