"""`wink debug` in a real headless Chromium (Debian's, driven by Playwright).

The viewer serves two runs written with the real `RunStore` (see `viewer_data.py`) from a
background thread on an ephemeral port. The scenario: open the run, filter to failures,
open a sample and see its tool calls, search a word found in one model message, open the
A/B page and see the flipped samples. Then the pictures: every chart's marks (read from
the DOM) carry the numbers `summarize` and `compare_results` give; the failure groups;
a flipped sample side by side with its diff; the keyboard between samples; the dark
theme; the HTML report offline; pass@k and flaky samples of a run with epochs.
Screenshots go to `tests/screenshots/` (gitignored).

Chromium is required: without it these tests skip locally and fail under `CI=true`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.debug.viewer_data import UNIQUE_WORD, XSS, DemoRuns, write_runs
from weakincentives.clock import FakeClock
from weakincentives.debug import ViewerServer, write_html_report
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    compare_results,
    cost_summary,
    result_cost,
    summarize,
)

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
    # The runs list shows each experiment's pass rate, never one pooled over experiments.
    expect(page.locator('tr[data-run="run-a"] td.rates div')).to_have_count(2)
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
    # Differences in percentage points, as the terminal report prints them (not "%" or "pp").
    expect(page.locator("#stats")).to_contain_text(re.compile(r"Paired delta[+-]\d+\.\d pts"))
    expect(page.locator("#stats")).not_to_contain_text(" pp")
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


# -- charts, failures, side by side, keyboard ------------------------------------------------

MARKS_JS = """els => els.map(e => ({label: e.dataset.label, series: e.dataset.series,
    value: Number(e.dataset.value), low: e.dataset.low === '' ? null : Number(e.dataset.low),
    high: e.dataset.high === '' ? null : Number(e.dataset.high)}))"""


def drawn(page: Any, chart_id: str) -> list[dict[str, Any]]:
    """The marks of a chart as the browser has them in the DOM."""
    locator = page.locator(f"#{chart_id} svg g.mark")
    expect(locator.first).to_be_attached()
    marks: list[dict[str, Any]] = locator.evaluate_all(MARKS_JS)
    return marks


def test_run_page_charts_show_the_runs_numbers(page: Any, url: str, runs: DemoRuns) -> None:
    open_run(page, url)
    results = runs.results["run-a"]
    for mark in drawn(page, "chart-pass-rate"):
        s = summarize(r for r in results if r.experiment_name == mark["label"])
        assert (mark["value"], mark["low"], mark["high"]) == (
            s.pass_rate, s.pass_rate_low, s.pass_rate_high,
        )  # fmt: skip
    sliced = drawn(page, "chart-slice")
    assert len(sliced) == 4
    for mark in sliced:
        s = summarize(
            r for r in results
            if r.experiment_name == mark["series"] and r.metadata["difficulty"] == mark["label"]
        )  # fmt: skip
        assert mark["value"] == s.pass_rate
        assert mark["low"] == pytest.approx(s.pass_rate_low)
    for mark in drawn(page, "chart-checks"):
        s = summarize(r for r in results if r.experiment_name == mark["series"])
        assert mark["value"] == pytest.approx(s.metrics[mark["label"]])
    counts = page.locator("#chart-latency svg g.series").evaluate_all(
        "gs => gs.map(g => [...g.querySelectorAll('rect.bin')]"
        ".reduce((n, r) => n + Number(r.dataset.count), 0))"
    )
    assert counts == [20, 20]
    assert drawn_bins(page, "chart-cost") == cost_bins(results, drawn_edges(page, "chart-cost"))
    # An experiment has one colour in every chart (the classes s0, s1, ... of its marks).
    colours = page.locator("#charts [data-series]").evaluate_all(
        "es => es.filter(e => e.dataset.series).map(e => [e.dataset.series, "
        "[...e.classList].find(c => /^s\\d$/.test(c))])"
    )
    assert {series: {c for s, c in colours if s == series} for series, _ in colours} == {
        "baseline": {"s0"}, "concise": {"s1"},
    }  # fmt: skip
    # The table fallback says the same in text.
    page.locator("#chart-pass-rate summary").click()
    first = summarize(r for r in results if r.experiment_name == "baseline")
    expect(page.locator("#chart-pass-rate table")).to_contain_text(f"{first.pass_rate * 100:.1f}%")


BINS_JS = """gs => gs.map(g => [g.dataset.series,
    [...g.querySelectorAll('rect.bin')].map(r => Number(r.dataset.count))])"""


def drawn_bins(page: Any, chart_id: str) -> dict[str, list[int]]:
    """Series -> the count of each bin of a histogram, as the DOM has them."""
    locator = page.locator(f"#{chart_id} svg g.series")
    expect(locator.first).to_be_attached()
    return dict(locator.evaluate_all(BINS_JS))


def drawn_edges(page: Any, chart_id: str) -> list[float]:
    """The bin edges of a histogram, read from its first series' bins."""
    bins = page.locator(f"#{chart_id} svg g.series").first.locator("rect.bin")
    pairs = bins.evaluate_all("rs => rs.map(r => [Number(r.dataset.low), Number(r.dataset.high)])")
    return [pairs[0][0], *(high for _, high in pairs)]


def cost_bins(results: list[EvalResult], edges: list[float]) -> dict[str, list[int]]:
    """What the cost histogram should count: `cost_summary`'s priced results, binned."""
    out = {}
    for name in dict.fromkeys(r.experiment_name for r in results):
        mine = [r for r in results if r.experiment_name == name]
        values = [c for r in mine if (c := result_cost(r.cost, r.judge_cost)) is not None]
        assert len(values) == cost_summary(mine).priced > 0
        out[name] = [int(c) for c in np.histogram(values, bins=edges)[0]]
    return out


def test_the_slice_picker_redraws_the_slice_chart(page: Any, url: str) -> None:
    open_run(page, url)
    page.select_option("#slice-key", "level")
    expect(page.locator("#chart-slice figcaption")).to_have_text("Pass rate by level")
    assert {m["label"] for m in drawn(page, "chart-slice")} == {"0", "1", "2"}
    assert "slice=level" in page.url
    expect(page.locator("#result-count")).to_have_text(f"1{DASH}40 of 40")


def test_failures_are_grouped_by_failing_check_or_error(
    page: Any, url: str, runs: DemoRuns
) -> None:
    open_run(page, url)
    failed = runs.of("run-a", lambda r: not r.passed and not r.is_error)
    group = page.locator('#failures details[data-key="failed check: correct"]')
    expect(group).to_have_attribute("data-count", str(len(failed)))
    expect(
        page.locator('#failures details[data-key="timeout: timed out after # s"]')
    ).to_have_count(1)
    group.locator("summary").click()
    group.locator("a.chip").first.click()
    expect(page.locator("#sample-title")).to_have_text(sorted(r.sample_id for r in failed)[0])


def test_compare_page_charts_show_the_paired_numbers(page: Any, url: str, runs: DemoRuns) -> None:
    page.goto(f"{url}#/compare?base_run=run-a&base=baseline&treat=concise")
    c = compare_results(
        runs.of("run-a", lambda r: r.experiment_name == "baseline"),
        runs.of("run-a", lambda r: r.experiment_name == "concise"),
        baseline_name="baseline", treatment_name="concise",
    )  # fmt: skip
    (delta,) = drawn(page, "chart-delta")
    assert (delta["value"], delta["low"], delta["high"]) == (
        c.delta,
        c.delta_ci.low,
        c.delta_ci.high,
    )
    discordant = [m["value"] for m in drawn(page, "chart-discordant")]
    assert discordant == [len(c.regressions), len(c.improvements)]
    assert {m["label"] for m in drawn(page, "chart-slice-delta")} == {"easy", "hard"}


def test_a_flipped_sample_side_by_side_with_its_diff(page: Any, url: str) -> None:
    page.goto(f"{url}#/compare?base_run=run-a&base=baseline&treat=concise")
    page.locator('#regressions tr[data-sample="s05"] a.pair-link').click()
    expect(page.locator("#pair-title")).to_have_text("s05")
    expect(page.locator("#pair-baseline")).to_contain_text("passed")
    expect(page.locator("#pair-treatment")).to_contain_text("failed")
    expect(page.locator("#pair-treatment .failed-checks")).to_have_text("correct")
    expect(page.locator("#pair-baseline .failed-checks")).to_have_count(0)
    expect(page.locator("#output-diff td.del")).to_have_text("7")
    expect(page.locator("#output-diff td.ins")).to_have_text("8")
    expect(page.locator("#tools-diff-same")).to_be_visible()
    # The sample page of either side links to the same view.
    page.locator("#pair-baseline h2 a").click()
    page.locator("a.pair-link").first.click()
    expect(page.locator("#output-diff td.ins")).to_have_text("8")


def test_keyboard_moves_between_the_samples_of_the_list(
    page: Any, url: str, runs: DemoRuns
) -> None:
    open_run(page, url)
    page.select_option("#filter-status", "failed")
    failed = runs.of("run-a", lambda r: not r.passed and not r.is_error)
    order = [r.sample_id for r in failed]  # the grid's order: index order
    expect(page.locator("#results tbody tr")).to_have_count(len(failed))
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page.locator("#sample-title")).to_have_text(order[0])
    expect(page.locator("#sample-position")).to_have_text(f"1 of {len(failed)}")
    page.keyboard.press("j")
    expect(page.locator("#sample-title")).to_have_text(order[1])
    page.keyboard.press("ArrowRight")
    expect(page.locator("#sample-title")).to_have_text(order[2])
    page.keyboard.press("k")
    expect(page.locator("#sample-position")).to_have_text(f"2 of {len(failed)}")
    page.keyboard.press("u")
    expect(page.locator("#result-count")).to_have_text(f"1{DASH}{len(failed)} of {len(failed)}")
    assert "status=failed" in page.url


def test_charts_are_readable_in_the_dark_theme(browser: Any, url: str) -> None:
    context = browser.new_context(color_scheme="dark", viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(f"{url}#/run/run-a")
    label = tab.locator("#chart-pass-rate svg text.label").first
    expect(label).to_be_visible()
    fill = label.evaluate("e => getComputedStyle(e).fill")
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    assert _luminance(fill) > 0.7 > 0.2 > _luminance(background), (fill, background)
    SCREENSHOTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / "run_page_dark.png"), full_page=True)
    context.close()


def _luminance(css: str) -> float:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_the_html_report_opens_offline_with_the_same_charts(
    page: Any, runs: DemoRuns, tmp_path: Path
) -> None:
    report = EvalReport.load(runs.root / "run-a")
    path = write_html_report(report, tmp_path / "report.html")
    requested: list[str] = []

    def refuse(route: Any) -> None:
        requested.append(route.request.url)
        route.abort()

    page.route("http*://**/*", refuse)
    page.goto(path.as_uri())
    expect(page.locator("figure.chart svg").first).to_be_visible()
    for mark, name in zip(drawn(page, "chart-pass-rate"), report.experiment_names, strict=True):
        s = report.experiment(name).summarize()
        assert (mark["label"], mark["value"]) == (name, s.pass_rate)
    assert page.locator("figure.chart").count() >= 9
    assert drawn_bins(page, "chart-cost") == cost_bins(
        list(report.results), drawn_edges(page, "chart-cost")
    )
    assert requested == []
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280  # no sideways scrolling on a laptop screen


@pytest.fixture(scope="module")
def epochs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("epochs")
    store = RunStore(root, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="epochs") as run:
        for r in epoch_results():
            run.append(r)
    with ViewerServer(root / "epochs") as server:
        yield server.url


def epoch_results() -> list[EvalResult]:
    out = []
    for experiment, every in (("baseline", 2), ("v2", 3)):
        for i in range(6):
            for epoch in range(3):
                ok = (i + epoch) % every != 0
                out.append(
                    EvalResult(sample_id=f"s{i}", experiment_name=experiment, epoch=epoch,
                               latency_ms=1, score=Score(value=float(ok), passed=ok))
                )  # fmt: skip
    return out


def test_epochs_show_pass_at_k_and_the_flaky_samples(page: Any, epochs_url: str) -> None:
    report = EvalReport(results=tuple(epoch_results()))
    page.goto(epochs_url)
    points = page.locator("#chart-pass-at-k svg g.series")
    expect(points).to_have_count(2)
    values = points.evaluate_all(
        "gs => gs.map(g => [...g.querySelectorAll('circle.dot')].map(c => Number(c.dataset.value)))"
    )
    for name, ys in zip(report.experiment_names, values, strict=True):
        assert ys == pytest.approx([report.pass_at_k(k, experiment=name) for k in (1, 2, 3)])
    flaky = {(m["series"], m["label"]) for m in drawn(page, "chart-flaky")}
    assert flaky == {(f.experiment_name, f.sample_id) for f in report.flaky_samples()}


def test_an_errored_sample_shows_its_error_and_its_partial_transcript(
    page: Any, url: str, runs: DemoRuns
) -> None:
    page.goto(f"{url}#/run/run-a?experiment=baseline&status=error")
    page.locator('tr[data-sample="s11"] a.sample-link').click()
    expect(page.locator("#sample-title")).to_have_text("s11")
    expect(page.locator("main")).to_contain_text("RuntimeError: model unreachable")
    expect(page.locator("#transcript")).to_contain_text("What is 11 + 2?")
    expect(page.locator("#tool-calls td.tool-name")).to_have_text("add")
    # The model call it made before the failure, with its tokens and cost.
    (errored,) = runs.of("run-a", lambda r: r.sample_id == "s11" and r.is_error)
    assert turn_lines(page) == [list(t) for t in errored.turns] and len(errored.turns) == 1
    expect(page.locator("#turns tbody tr")).to_have_count(2)  # the turn and the total


TURNS_JS = """es => es.map(e => [Number(e.dataset.input), Number(e.dataset.output),
    e.dataset.cost === '' ? null : Number(e.dataset.cost)])"""


def turn_lines(page: Any) -> list[list[Any]]:
    """`[input, output, cost]` of each assistant message of the transcript, as shown."""
    lines = page.locator("#transcript li.msg.assistant .turn-usage")
    expect(lines.first).to_be_attached()
    found: list[list[Any]] = lines.evaluate_all(TURNS_JS)
    return found


def test_a_sample_shows_the_tokens_and_cost_of_each_turn(
    page: Any, url: str, runs: DemoRuns
) -> None:
    page.goto(f"{url}#/run/run-a?experiment=concise&sample=s04")
    page.locator('tr[data-sample="s04"] a.sample-link').click()
    (result,) = runs.of("run-a", lambda r: r.sample_id == "s04" and r.experiment_name == "concise")
    assert turn_lines(page) == [list(t) for t in result.turns]
    first = page.locator("#transcript li.msg.assistant .turn-usage").first
    expect(first).to_have_text(f"turn 1 · 24 in · 4 out · ${result.turns[0].cost:.6f}")
    rows = page.locator("#turns tbody tr")
    expect(rows).to_have_count(3)
    total = rows.nth(2).locator("td")
    expect(total).to_have_text(
        ["total", str(result.usage.input_tokens), str(result.usage.output_tokens),
         f"${result.cost:.6f}"]
    )  # fmt: skip


def test_a_sample_shows_its_input_expected_and_the_runs_provenance(page: Any, url: str) -> None:
    page.goto(f"{url}#/run/run-a?experiment=concise&sample=s04")
    page.locator("#provenance summary").click()
    provenance = page.locator("#provenance")
    expect(provenance.locator('dd[data-field="Model"]')).to_have_text("function calc-v1")
    expect(provenance.locator('dd[data-field="Git commit"]')).to_have_text("abc1234 (dirty)")
    expect(provenance.locator('dd[data-field="Command line"]')).to_have_text(
        "wink eval run calc.jsonl"
    )
    expect(provenance.locator('dd[data-field="Parameters"]')).to_have_text('{"temperature": 0.0}')
    page.locator('tr[data-sample="s04"] a.sample-link').click()
    expect(page.locator("main")).to_contain_text("What is 4 + 2?")
    # The sample page says what produced its run too.
    page.locator("#sample-provenance summary").click()
    expect(page.locator('#sample-provenance dd[data-field="Model"]')).to_have_text(
        "function calc-v1"
    )
    expect(page.locator('#sample-provenance dd[data-field="Git commit"]')).to_have_text(
        "abc1234 (dirty)"
    )
    # A flipped sample side by side shows the one input both sides saw.
    page.locator("a.pair-link").first.click()
    expect(page.locator("#pair-input")).to_contain_text("What is 4 + 2?")
    expect(page.locator("#pair-input")).to_contain_text("6")


def test_each_check_shows_its_whole_reason(browser: Any, tmp_path: Path) -> None:
    reason = "format: ok; answer: got 4; expected 5 (off by one); judge: fine"
    result = EvalResult(
        sample_id="q1", experiment_name="x", latency_ms=1,
        score=Score(value=0.0, passed=False, reason=reason, metrics=(
            Metric("format", 1.0), Metric("answer", 0.0), Metric("answer.distance", 1.0),
            Metric("judge", 1.0))),
    )  # fmt: skip
    store = RunStore(tmp_path, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="checks") as run:
        run.append(result)
    with ViewerServer(tmp_path / "checks") as server:
        context = browser.new_context()
        tab = context.new_page()
        tab.goto(f"{server.url}#/run/checks/result/1")
        rows = tab.locator("#score-metrics tbody tr")
        expect(rows).to_have_count(4)
        expect(rows.nth(1).locator("td").nth(3)).to_have_text("got 4; expected 5 (off by one)")
        expect(rows.nth(3).locator("td").nth(3)).to_have_text("fine")
        expect(tab.locator("#score-reason")).to_have_text(reason)
        context.close()


def test_an_experiment_keeps_its_colour_and_place_in_every_chart(
    browser: Any, tmp_path: Path
) -> None:
    # Results of slice "v" come treatment first: the chart must not follow that order.
    def result(sample: str, experiment: str, kind: str, ok: bool) -> EvalResult:
        return EvalResult(
            sample_id=sample, experiment_name=experiment, latency_ms=1,
            score=Score(value=float(ok), passed=ok, metrics=(Metric("check", float(ok)),)),
            metadata={"kind": kind},
        )  # fmt: skip

    store = RunStore(tmp_path, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="order") as run:
        for i in range(4):
            run.append(result(f"u{i}", "base", "u", i % 2 == 0))
            run.append(result(f"u{i}", "treat", "u", True))
        for i in range(4):
            run.append(result(f"v{i}", "treat", "v", i % 3 == 0))
            run.append(result(f"v{i}", "base", "v", True))
    with ViewerServer(tmp_path / "order") as server:
        context = browser.new_context()
        tab = context.new_page()
        tab.goto(f"{server.url}#/run/order")
        sliced = drawn(tab, "chart-slice")
        assert [(m["label"], m["series"]) for m in sliced] == [
            ("u", "base"), ("u", "treat"), ("v", "base"), ("v", "treat"),
        ]  # fmt: skip
        colours = tab.locator("#charts [data-series]").evaluate_all(
            "es => es.filter(e => e.dataset.series).map(e => [e.dataset.series, "
            "[...e.classList].find(c => /^s\\d$/.test(c))])"
        )
        assert {s: {c for n, c in colours if n == s} for s, _ in colours} == {
            "base": {"s0"}, "treat": {"s1"},
        }  # fmt: skip
        context.close()
