"""`wink debug` in a real headless Chromium (Debian's, driven by Playwright).

The viewer serves two runs written with the real `RunStore` (see `viewer_data.py`) from a
background thread on an ephemeral port. The scenario: open the run, filter to failures,
open a sample and see its tool calls, search a word found in one model message, open the
A/B page and see the flipped samples. Screenshots go to `tests/screenshots/` (gitignored).

Chromium is required: without it these tests skip locally and fail under `CI=true`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.debug.viewer_data import UNIQUE_WORD, XSS, DemoRuns, write_runs
from weakincentives.debug import ViewerServer

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
TIMEOUT_MS = 10_000
DASH = "\u2013"  # the pager says "1-50 of 120" with an en dash


def chromium_path() -> str:
    found = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if found is None:
        message = "Chromium not found at /usr/bin/chromium: apt-get install chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return write_runs(tmp_path_factory.mktemp("viewer-browser"))


@pytest.fixture(scope="module")
def url(runs: DemoRuns) -> Iterator[str]:
    with ViewerServer(runs.root) as server:
        yield server.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None
        ),
    )
    tab.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
    yield tab
    SCREENSHOTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert problems == [], problems


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def open_run(page: Any, url: str) -> None:
    page.goto(url)
    page.locator("a.run-link", has_text="run-a").click()
    expect(page.locator("#result-count")).to_have_text(f"1{DASH}40 of 40")


def test_open_the_run_and_filter_to_failures(page: Any, url: str, runs: DemoRuns) -> None:
    open_run(page, url)
    expect(page.locator(".card h3")).to_have_text(["baseline", "concise"])
    failed = runs.of("run-a", lambda r: not r.passed and not r.is_error)
    page.select_option("#filter-status", "failed")
    expect(page.locator("#result-count")).to_have_text(f"1{DASH}{len(failed)} of {len(failed)}")
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(len(failed))
    assert set(rows.evaluate_all("rows => rows.map(r => r.dataset.status)")) == {"failed"}
    shown = set(rows.evaluate_all("rows => rows.map(r => r.dataset.sample)"))
    assert shown == {r.sample_id for r in failed}
    assert "status=failed" in page.url


def test_open_a_sample_and_see_its_tool_calls_and_bundle(page: Any, url: str) -> None:
    page.goto(f"{url}#/run/run-a?experiment=baseline")
    page.locator('tr[data-sample="s01"] a.sample-link').click()
    expect(page.locator("#sample-title")).to_have_text("s01")
    calls = page.locator("#tool-calls tbody tr")
    expect(calls).to_have_count(1)
    expect(calls.locator("td.tool-name")).to_have_text("add")
    expect(calls).to_contain_text('"a": 1')
    expect(page.locator("#transcript")).to_contain_text("What is 1 + 2?")
    expect(page.locator("#transcript .call")).to_contain_text('"b": 2')
    expect(page.locator("#score-reason")).to_have_text("expected 3, got 3")
    expect(page.locator("#logs")).to_contain_text("calculator warmed up for s01")
    expect(page.locator("main")).to_contain_text("checksums ok")


def test_search_finds_the_sample_whose_message_has_the_word(page: Any, url: str) -> None:
    open_run(page, url)
    page.fill("#search", UNIQUE_WORD)
    page.press("#search", "Enter")
    expect(page.locator("#result-count")).to_have_text(f"1{DASH}1 of 1")
    row = page.locator("#results tbody tr")
    expect(row).to_have_attribute("data-sample", "s07")
    expect(row).to_contain_text("baseline")
    row.locator("a.sample-link").click()
    expect(page.locator("#transcript")).to_contain_text(f"The answer is 9, as in {UNIQUE_WORD}")


def test_the_ab_page_shows_the_flipped_samples(page: Any, url: str, runs: DemoRuns) -> None:
    open_run(page, url)
    page.locator("#open-compare").click()
    regressed, improved = runs.flips()
    expect(page.locator("#regressions tbody tr")).to_have_count(len(regressed))
    expect(page.locator("#improvements tbody tr")).to_have_count(len(improved))
    samples = "rows => rows.map(r => r.dataset.sample)"
    assert set(page.locator("#regressions tbody tr").evaluate_all(samples)) == regressed
    assert set(page.locator("#improvements tbody tr").evaluate_all(samples)) == improved
    expect(page.locator("#stats")).to_contain_text(re.compile(r"McNemar (exact|chi²), discordant"))
    # Follow a regression to the treatment's result.
    first = sorted(regressed)[0]
    page.locator(f'#regressions tr[data-sample="{first}"] td:nth-child(4) a').click()
    expect(page.locator("#sample-title")).to_have_text(first)
    expect(page.locator("main")).to_contain_text("concise · epoch 0")


def test_the_ab_page_compares_two_runs(page: Any, url: str) -> None:
    page.goto(f"{url}#/compare?base_run=run-a&base=baseline")
    expect(page.locator("#stats")).to_contain_text("pairs")
    page.select_option("#pick-treat_run", "run-b")
    expect(page.locator("#stats")).to_contain_text("run-b / baseline")
    expect(page.locator("#pick-treat")).to_have_value("baseline")


def test_model_output_is_shown_as_text_not_markup(page: Any, url: str) -> None:
    page.goto(f"{url}#/run/run-a?experiment=concise&sample=s02")
    page.locator('tr[data-sample="s02"] a.sample-link').click()
    expect(page.locator("pre.output")).to_have_text(XSS)
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img").count() == 0
