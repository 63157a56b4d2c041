"""`wink debug RUN` as a user meets it: a fresh process, and a real headless Chromium.

Timed with wall clocks around what the user waits for (Chromium is started first, as a
user's browser already runs):

- `browser_index_s`: from starting `wink debug RUN --no-open` (a fresh interpreter:
  imports, the index of the run, the server) until Chromium shows the run page with its
  statistics, charts and the first page of results (`1-50 of N`, with an en dash; the
  page fills all three at once), checked on every animation frame;
- `browser_index_cpu_s`: the CPU time the `wink debug` process (and the child that reads
  half of a large run) used until then (steadier than wall time on a shared machine: the
  process's own work, not its waiting);
- `browser_served_s`: of that, until the command printed its URL (it builds the index
  meanwhile: the browser loads the page while it does);
- `browser_page_ms`: the results grid's next page, from the click until the grid shows it
  (best of `PAGES`);
- `browser_filter_ms`: choosing "failed" in the status filter until the grid shows them;
- `browser_sample_ms`: a sample's page (input, output, transcript, tool calls), from the
  click on its row until its title shows (best of `PAGES`);
- `browser_run_ms`: back from a sample to the run page (its statistics are cached).

Nothing is measured when Chromium is missing (`available()` says so).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import quick

__all__ = ["available", "measure_browser"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PAGES = 5
"""Repeats of each timed page (2 with `--quick`)."""
TIMEOUT_MS = 120_000
DASH = "\u2013"


def _chromium() -> str | None:
    return CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")


def available() -> bool:
    """Whether Chromium and Playwright are installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return _chromium() is not None


def _serve(run_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages run (see bench.cold)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from weakincentives.cli import main; main()", "debug",
         str(run_dir), "--no-open"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    found = re.search(r" at (http://\S+)", line)
    if found is None:
        proc.kill()
        raise RuntimeError(f"wink debug did not print its URL: {line!r}")
    return proc, found.group(1)


def count(first: int, last: int, total: int) -> re.Pattern[str]:
    """The results counter's text, e.g. 1-50 of 100,000 (en dash; digits grouped or not)."""
    return re.compile(rf"^{first}{DASH}{last} of {total:,}$".replace(",", ",?"))


def _timed_ms(action: Callable[[], None], repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def measure_browser(run_dir: Path, total: int, *, index_only: bool = False) -> dict[str, float]:
    """Open `run_dir` (a run of `total` results) with `wink debug` in Chromium; time it.

    With `index_only` only the opening is timed (`browser_index_s` and its CPU).
    """
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        page: Any = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto("about:blank")
        start = time.perf_counter()
        proc, url = _serve(run_dir)
        try:
            served = time.perf_counter() - start
            page.goto(f"{url}#/run/{run_dir.name}")
            counter = page.locator("#result-count")
            _wait_for_text(page, "#result-count", count(1, 50, total))
            index = time.perf_counter() - start
            expect(counter).to_have_text(count(1, 50, total))
            index_cpu = _cpu_seconds(proc.pid)
            if index_only:
                return {"browser_index_s": index, "browser_index_cpu_s": index_cpu}

            def next_page() -> None:
                page.locator(".pager a.next").first.click()
                expect(counter).to_have_text(count(51, 100, total))
                page.go_back()
                expect(counter).to_have_text(count(1, 50, total))

            # Forward and back: half of each pair is the timed page (both are pages).
            pages = 2 if quick() else PAGES
            metrics = {"browser_page_ms": _timed_ms(next_page, pages) / 2}

            def open_sample() -> None:
                page.locator("#results tbody tr a.sample-link").first.click()
                expect(page.locator("#sample-title")).to_be_visible()

            def back_to_run() -> None:
                page.go_back()
                expect(counter).to_have_text(count(1, 50, total))

            sample_ms, run_ms = [], []
            for _ in range(pages):
                sample_ms.append(_timed_ms(open_sample))
                run_ms.append(_timed_ms(back_to_run))
            metrics["browser_sample_ms"] = min(sample_ms)
            metrics["browser_run_ms"] = min(run_ms)

            def filter_failed() -> None:
                page.select_option("#filter-status", "failed")
                expect(page).to_have_url(re.compile("status=failed"))
                expect(page.locator("#results tbody tr").first).to_have_attribute(
                    "data-status", "failed"
                )

            metrics["browser_filter_ms"] = _timed_ms(filter_failed)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            browser.close()
    return {
        "browser_index_s": index,
        "browser_index_cpu_s": index_cpu,
        "browser_served_s": served,
        **metrics,
    }


def _wait_for_text(page: Any, selector: str, pattern: re.Pattern[str]) -> None:
    """Wait until the element's text matches, checked on every animation frame.

    Playwright's `expect` polls ever more slowly (after the first second, every 500 ms),
    so the time it returns can be up to half a second after the page showed the text;
    a check per frame (~16 ms) times what the user sees.
    """
    page.wait_for_function(
        "([selector, source]) => new RegExp(source).test("
        "document.querySelector(selector)?.textContent ?? '')",
        arg=[selector, pattern.pattern],
        polling="raf",
        timeout=TIMEOUT_MS,
    )


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` and its finished children have used so
    far (Linux; NaN elsewhere): the child that reads half of a large run counts too."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    # After the command name: state is field 3; utime, stime, cutime and cstime (of the
    # children waited for) are fields 14 to 17.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
