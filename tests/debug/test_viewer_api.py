from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from bench.bench_viewer import measure, write_synthetic_run
from tests.debug.viewer_data import SAMPLES, UNIQUE_WORD, DemoRuns, make_result, write_runs
from weakincentives.debug import (
    ResultFilter,
    ResultIndex,
    ViewerData,
    create_viewer_app,
    render_html_report,
    write_html_report,
)
from weakincentives.debug import _viewer_views as viewer_views
from weakincentives.debug._viewer_data import SideSpec
from weakincentives.errors import ConfigurationError, ViewerError
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    RunStore,
    Score,
    compare_results,
    summarize,
)

Predicate = Callable[[EvalResult], bool]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return write_runs(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="module")
def client(runs: DemoRuns) -> Iterator[TestClient]:
    with TestClient(create_viewer_app(runs.root), base_url="http://127.0.0.1") as c:
        yield c


def get(client: TestClient, url: str, **params: Any) -> Any:
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def keys_of(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["sample_id"], r["experiment"]) for r in rows}


def status(r: EvalResult) -> str:
    return "error" if r.is_error else ("passed" if r.passed else "failed")


# -- runs ---------------------------------------------------------------------------------


def test_runs_lists_every_run_with_counts(client: TestClient, runs: DemoRuns) -> None:
    listed = {run["run_id"]: run for run in get(client, "/api/runs")["runs"]}
    assert set(listed) == {"run-a", "run-b"}
    for run_id, run in listed.items():
        oracle = runs.results[run_id]
        assert run["results"] == len(oracle)
        assert run["passed"] == sum(r.passed for r in oracle)
        assert run["errors"] == sum(r.is_error for r in oracle)
        assert run["status"] == "complete"
    assert listed["run-a"]["experiment_names"] == ["baseline", "concise"]


def test_runs_list_shows_a_pass_rate_per_experiment_never_pooled(
    client: TestClient, runs: DemoRuns
) -> None:
    listed = {run["run_id"]: run for run in get(client, "/api/runs")["runs"]}
    for run_id, run in listed.items():
        oracle = runs.results[run_id]
        names = list(dict.fromkeys(r.experiment_name for r in oracle))
        assert [e["experiment"] for e in run["pass_rates"]] == names
        for entry in run["pass_rates"]:
            mine = [r for r in oracle if r.experiment_name == entry["experiment"]]
            assert (entry["n"], entry["passed"]) == (len(mine), sum(r.passed for r in mine))
            assert entry["pass_rate"] == summarize(mine).pass_rate


def test_run_statistics_match_summarize(client: TestClient, runs: DemoRuns) -> None:
    run = get(client, "/api/runs/run-a")
    assert [e["name"] for e in run["experiments"]] == ["baseline", "concise"]
    for block in run["experiments"]:
        name: str = block["name"]
        oracle = [r for r in runs.results["run-a"] if r.experiment_name == name]
        expected = summarize(oracle)
        assert (block["n"], block["passed"], block["errors"]) == (
            expected.n,
            expected.passed,
            expected.errors,
        )
        assert block["pass_rate_ci"] == pytest.approx(
            [expected.pass_rate_low, expected.pass_rate_high]
        )
        assert block["mean_score"] == pytest.approx(expected.mean)
    facets = run["facets"]
    assert facets["experiments"] == {"baseline": SAMPLES, "concise": SAMPLES}
    assert facets["error_kinds"] == {"agent": 1, "timeout": 1}
    assert set(facets["metadata"]["difficulty"]) == {"easy", "hard"}


def test_statistics_are_clustered_by_sample_when_epochs_repeat(tmp_path: Path) -> None:
    store = RunStore(tmp_path, sync_interval=None)
    results = [
        dataclasses.replace(make_result("run-a", "concise", i), epoch=epoch,
                            score=Score(value=float(ok), passed=ok))
        for i in range(6)
        for epoch, ok in enumerate([i % 2 == 0, i % 3 == 0, True])
    ]  # fmt: skip
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="epochs") as run:
        run.extend(results)
    (block,) = ViewerData.open(tmp_path / "epochs").run("epochs")["experiments"]
    expected = summarize(results)
    assert expected.n_clusters == block["n_clusters"] == 6
    assert block["pass_rate_ci"] == pytest.approx([expected.pass_rate_low, expected.pass_rate_high])
    assert block["mean_score_ci"] == pytest.approx([expected.mean_low, expected.mean_high])
    assert block["errors"] == expected.errors == 3


def test_long_flip_lists_are_cut_but_counted(
    client: TestClient, runs: DemoRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(viewer_views, "MAX_FLIPS", 2)
    data = ViewerData.open(runs.root).compare(
        SideSpec("run-a", "baseline"), SideSpec("run-b", "baseline")
    )
    regressed = compare_results(
        runs.of("run-a", lambda r: r.experiment_name == "baseline"),
        runs.results["run-b"],
        baseline_name="a",
        treatment_name="b",
    ).regressions
    assert len(regressed) > 2
    assert data["regressions_count"] == len(regressed)
    assert [f["sample_id"] for f in data["regressions"]] == [f.sample_id for f in regressed[:2]]


def test_the_last_line_of_a_retried_key_wins(client: TestClient) -> None:
    rows = get(client, "/api/runs/run-a/results", sample="s05", experiment="baseline")["rows"]
    assert [(r["sample_id"], r["status"]) for r in rows] == [("s05", "passed")]
    assert get(client, "/api/runs/run-a/results")["total"] == 2 * SAMPLES


# -- the results grid ---------------------------------------------------------------------

FILTERS: list[tuple[dict[str, str], Predicate]] = [
    ({}, lambda r: True),
    ({"experiment": "concise"}, lambda r: r.experiment_name == "concise"),
    ({"status": "passed"}, lambda r: r.passed),
    ({"status": "failed"}, lambda r: not r.passed and not r.is_error),
    ({"status": "error"}, lambda r: r.is_error),
    ({"status": "not_passed"}, lambda r: not r.passed),
    ({"error_kind": "timeout"}, lambda r: r.error_kind == "timeout"),
    ({"meta.difficulty": "hard"}, lambda r: r.metadata["difficulty"] == "hard"),
    ({"meta.level": "0"}, lambda r: r.metadata["level"] == 0),
    ({"score_min": "0.5"}, lambda r: r.score.value >= 0.5),
    ({"latency_min": "200", "latency_max": "250"}, lambda r: 200 <= r.latency_ms <= 250),
    ({"tokens_max": "80"}, lambda r: r.tokens <= 80),
    ({"sample": "s1"}, lambda r: "s1" in r.sample_id),
    ({"q": UNIQUE_WORD}, lambda r: (r.sample_id, r.experiment_name) == ("s07", "baseline")),
    (
        {"q": UNIQUE_WORD[:5].upper()},
        lambda r: (r.sample_id, r.experiment_name) == ("s07", "baseline"),
    ),
    ({"q": "model unreachable"}, lambda r: r.error_kind == "agent"),
    (
        {"experiment": "baseline", "status": "failed", "meta.difficulty": "hard"},
        lambda r: (
            r.experiment_name == "baseline"
            and status(r) == "failed"
            and r.metadata["difficulty"] == "hard"
        ),
    ),
]


@pytest.mark.parametrize(("params", "predicate"), FILTERS, ids=[str(p) for p, _ in FILTERS])
def test_filters_select_what_the_oracle_selects(
    client: TestClient, runs: DemoRuns, params: dict[str, str], predicate: Predicate
) -> None:
    page = get(client, "/api/runs/run-a/results", limit="500", **params)
    expected = {(r.sample_id, r.experiment_name) for r in runs.of("run-a", predicate)}
    assert expected, "each filter case must select something"
    assert page["total"] == len(expected)
    assert keys_of(page["rows"]) == expected


def test_pages_partition_the_results_and_sort_on_the_server(client: TestClient) -> None:
    seen: list[tuple[str, str]] = []
    for offset in range(0, 2 * SAMPLES, 7):
        page = get(client, "/api/runs/run-a/results", limit="7", offset=str(offset), sort="latency")
        assert page["total"] == 2 * SAMPLES
        seen.extend((r["sample_id"], r["experiment"]) for r in page["rows"])
    assert len(seen) == len(set(seen)) == 2 * SAMPLES
    top = get(client, "/api/runs/run-a/results", sort="latency", desc="1", limit="3")["rows"]
    latencies = [r["latency_ms"] for r in top]
    assert latencies == sorted(latencies, reverse=True)
    assert latencies[0] == 100.0 + 10 * (SAMPLES - 1)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"status": "bogus"}, "status must be one of"),
        ({"limit": "0"}, "limit must be between"),
        ({"limit": "100000"}, "limit must be between"),
        ({"offset": "-1"}, "offset must be >= 0"),
        ({"sort": "score; DROP TABLE results"}, "cannot sort by"),
        ({"score_min": "abc"}, "score_min must be a number"),
        ({"latency_max": "nan"}, "latency_max must be finite"),
        ({"color": "red"}, "unknown query parameter 'color'"),
    ],
)
def test_bad_parameters_are_answered_400_with_a_reason(
    client: TestClient, params: dict[str, str], message: str
) -> None:
    response = client.get("/api/runs/run-a/results", params=params)
    assert response.status_code == 400
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("query", "total"),
    [
        ('"', 0),
        ("*", 0),
        ("!!!", 0),
        ('"zanzibar"', 1),
        ("zanzibar)", 1),
        # Quotes cannot close the phrase and smuggle in an OR: "OR" is one more word that
        # must occur, and none does (an injected OR would match all 40 results).
        ('zanzibar" OR "answer', 0),
        ("NEAR(zanzibar answer)", 0),
    ],
)
def test_search_text_is_never_parsed_as_fts_syntax(
    client: TestClient, query: str, total: int
) -> None:
    assert get(client, "/api/runs/run-a/results", q=query)["total"] == total


def test_search_does_not_find_superseded_lines(client: TestClient) -> None:
    # run-a / baseline / s05 first failed with "flaky"; its retry passed and wins.
    assert get(client, "/api/runs/run-a/results", q="flaky")["total"] == 0


def test_unknown_runs_and_results_are_404(client: TestClient) -> None:
    assert client.get("/api/runs/nope").status_code == 404
    assert client.get("/api/runs/nope/results").status_code == 404
    assert client.get("/api/runs/run-a/results/999999").status_code == 404
    # Beyond SQLite's 64-bit integers: no such result either (not a 500).
    assert client.get(f"/api/runs/run-a/results/{2**63}").status_code == 404
    assert client.get(f"/api/runs/run-a/results/{10**30}").status_code == 404
    run_b_id = get(client, "/api/runs/run-b/results", limit="1")["rows"][0]["id"]
    assert client.get(f"/api/runs/run-a/results/{run_b_id}").status_code == 404


# -- one sample ---------------------------------------------------------------------------


def result_id(client: TestClient, run_id: str, sample: str, experiment: str) -> int:
    rows = get(client, f"/api/runs/{run_id}/results", sample=sample, experiment=experiment)["rows"]
    assert len(rows) == 1
    return int(rows[0]["id"])


def test_a_sample_shows_transcript_tool_calls_and_its_bundle(client: TestClient) -> None:
    data = get(client, f"/api/runs/run-a/results/{result_id(client, 'run-a', 's01', 'baseline')}")
    result = data["result"]
    assert result["score"]["reason"] == "expected 3, got 3"
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert result["messages"][1]["tool_calls"][0]["arguments"] == '{"a": 1, "b": 2}'
    assert result["tool_calls"] == [
        {"name": "add", "params": {"a": 1, "b": 2}, "message": "3", "success": True,
         "duration_ms": 0.0, "error": None}
    ]  # fmt: skip
    # The result's own input and expected value (the bundle's request says "3" as text).
    assert data["sample"] == {"recorded": True, "input": "What is 1 + 2?", "expected": 3}
    bundle = data["bundle"]
    assert data["bundle_error"] is None
    assert bundle["verified"] is True
    assert any("warmed up" in r["message"] for r in bundle["logs"])
    assert bundle["tool_calls"][0]["name"] == "add"
    assert any(k.endswith(":ToolInvoked") for k in bundle["session_after"])
    assert {s["experiment"] for s in data["siblings"]} == {"baseline", "concise"}


def test_a_sample_without_bundle_shows_what_its_result_recorded(client: TestClient) -> None:
    data = get(client, f"/api/runs/run-a/results/{result_id(client, 'run-a', 's03', 'concise')}")
    assert data["bundle"] is None and data["bundle_error"] is None
    assert data["sample"] == {"recorded": True, "input": "What is 3 + 2?", "expected": 5}
    assert data["row"]["status"] == "error"
    assert data["result"]["error_kind"] == "timeout"
    unrecorded = get(
        client, f"/api/runs/run-b/results/{result_id(client, 'run-b', 's03', 'baseline')}"
    )
    assert unrecorded["sample"]["recorded"] is False


# -- A/B ----------------------------------------------------------------------------------


def test_compare_matches_the_report_and_links_flips(client: TestClient, runs: DemoRuns) -> None:
    data = get(client, "/api/compare", base_run="run-a", base="baseline", treat="concise")
    expected = EvalReport.load(runs.root / "run-a").compare_experiments("baseline", "concise")
    assert data["p_value"] == pytest.approx(expected.p_value)
    assert data["delta"] == pytest.approx(expected.delta)
    assert data["delta_ci"] == pytest.approx([expected.delta_ci.low, expected.delta_ci.high])
    assert data["mcnemar"]["b"] == len(expected.regressions)
    regressed, improved = runs.flips()
    assert {f["sample_id"] for f in data["regressions"]} == regressed
    assert {f["sample_id"] for f in data["improvements"]} == improved
    assert regressed and improved
    flip = data["regressions"][0]
    linked = get(client, f"/api/runs/run-a/results/{flip['treatment']['id']}")
    assert linked["result"]["sample_id"] == flip["sample_id"]
    assert linked["result"]["experiment_name"] == "concise"
    assert linked["row"]["status"] == flip["treatment"]["status"] != "passed"


def test_compare_across_two_runs(client: TestClient, runs: DemoRuns) -> None:
    sides = {"base_run": "run-a", "base": "baseline", "treat_run": "run-b", "treat": "baseline"}
    data = get(client, "/api/compare", **sides)
    expected = compare_results(
        runs.of("run-a", lambda r: r.experiment_name == "baseline"),
        runs.results["run-b"],
        baseline_name="a",
        treatment_name="b",
    )
    assert data["n_pairs"] == expected.n_pairs == SAMPLES
    assert data["treatment"]["run_id"] == "run-b"
    assert {f["sample_id"] for f in data["improvements"]} == {
        f.sample_id for f in expected.improvements
    }
    assert data["p_value"] == pytest.approx(expected.p_value)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"base_run": "run-a", "base": "baseline", "treat": "baseline"}, 400),
        ({"base_run": "run-a", "base": "baseline", "treat": "nope"}, 404),
        ({"base_run": "nope", "base": "baseline", "treat": "concise"}, 404),
        ({"base_run": "run-a", "base": "baseline"}, 400),
    ],
)
def test_compare_rejects_bad_sides(client: TestClient, params: dict[str, str], code: int) -> None:
    assert client.get("/api/compare", params=params).status_code == code


# -- targets ------------------------------------------------------------------------------


def test_a_bundle_target_is_shown_on_its_own(runs: DemoRuns) -> None:
    with TestClient(create_viewer_app(runs.bundle), base_url="http://127.0.0.1") as c:
        assert get(c, "/api/info")["kind"] == "bundle"
        data = get(c, "/api/bundle")
        assert data["sample"]["input"] == "What is 1 + 2?"
        assert data["bundle"]["manifest"]["ids"]["sample_id"] == "s01"
        assert get(c, "/api/runs")["runs"] == []


def test_a_run_directory_target_shows_that_run(runs: DemoRuns, client: TestClient) -> None:
    assert get(client, "/api/info")["kind"] == "runs"
    assert client.get("/api/bundle").status_code == 404
    data = ViewerData.open(runs.root / "run-b")
    assert [r["run_id"] for r in data.runs()] == ["run-b"]


@pytest.mark.parametrize("kind", ["missing", "empty", "text"])
def test_targets_that_are_not_runs_or_bundles_are_refused(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "target"
    if kind == "empty":
        target.mkdir()
    elif kind == "text":
        target.write_text("not a zip")
    with pytest.raises(ViewerError, match=r"target|bundle|no such"):
        ViewerData.open(target)


def test_the_index_skips_corrupt_lines_and_counts_them(tmp_path: Path, runs: DemoRuns) -> None:
    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    good = (runs.root / "run-b" / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "results.jsonl").write_bytes(good[0] + b"{oops\n" + good[1] + b'{"cut')
    index = ResultIndex()
    run = index.add_run(run_dir)
    index.finish()
    assert (run.results, run.skipped_count) == (2, 1)
    assert "results.jsonl:2" in run.skipped[0]
    assert index.page("broken", ResultFilter()).total == 2


def test_served_html_report_has_its_own_csp(client: TestClient) -> None:
    response = client.get("/api/runs/run-a/report.html", params={"slice": "difficulty"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "style-src 'unsafe-inline'" in response.headers["content-security-policy"]
    assert "script-src" not in response.headers["content-security-policy"]
    assert "By difficulty" in response.text
    assert client.get("/api/runs/run-a/report.html", params={"slice": "nope"}).status_code == 400


# -- HTML report --------------------------------------------------------------------------


def test_html_report_is_self_contained_and_complete(tmp_path: Path, runs: DemoRuns) -> None:
    report = EvalReport.load(runs.root / "run-a")
    path = write_html_report(report, tmp_path / "report.html", slice_key="difficulty")
    text = path.read_text(encoding="utf-8")
    assert re.search(r"\b(src|href)\s*=", text) is None
    assert "<script" not in text and "http://" not in text and "https://" not in text
    summary = report.experiment("baseline").summarize()
    assert f"{summary.pass_rate * 100:.1f}%" in text
    assert f"[{summary.pass_rate_low * 100:.1f}, {summary.pass_rate_high * 100:.1f}]" in text
    assert "By difficulty" in text and "By level" not in text
    regressed, improved = runs.flips()
    flipped = text.split("Flipped samples", 1)[1]
    for sample_id in regressed | improved:
        assert f"<td>{sample_id}</td>" in flipped
    comparison = report.compare_experiments("baseline", "concise")
    assert f"{len(comparison.regressions)} regressed" in text


def test_html_report_picks_slices_and_escapes_values(runs: DemoRuns) -> None:
    text = render_html_report(EvalReport.load(runs.root / "run-a"))
    assert "By difficulty" in text and "By level" in text
    nasty = EvalReport(
        results=tuple(
            EvalResult(sample_id=f"<b>{i}</b>", experiment_name=name, latency_ms=1,
                       score=Score(value=float(ok), passed=ok, reason="<i>why</i>"))
            for i, (name, ok) in enumerate([("baseline", True), ("v2", False)] * 2)
        ),
        run_id="<script>x</script>",
    )  # fmt: skip
    html = render_html_report(nasty)
    assert "<b>" not in html and "<i>why" not in html and "<script>x" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"baseline": "nope"}, "no experiment 'nope'"), ({"slice_key": "nope"}, "no result has")],
)
def test_html_report_rejects_unknown_names(
    runs: DemoRuns, kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        render_html_report(EvalReport.load(runs.root / "run-a"), **kwargs)


def test_html_report_of_an_empty_report_renders() -> None:
    text = render_html_report(EvalReport())
    assert "0 results" in text and "Comparisons" not in text


# -- the command --------------------------------------------------------------------------


def test_wink_debug_serves_on_loopback_and_prints_the_url(runs: DemoRuns) -> None:
    wink = [sys.executable, "-c", "from weakincentives.cli import main; main()"]
    command = [*wink, "debug", str(runs.root), "--port", "0", "--no-open"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            assert match, line
            with urllib.request.urlopen(f"{match[0]}api/info", timeout=10) as response:
                info = response.read().decode()
            assert '"kind":"runs"' in info.replace(" ", "")
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=10)
    assert b"warning" not in err


def test_json_never_holds_nan(client: TestClient) -> None:
    # run-b has one experiment: its comparison-free blocks still carry intervals; none is NaN.
    text = client.get("/api/runs/run-b").text
    assert "NaN" not in text and "Infinity" not in text
    assert not any(
        isinstance(v, float) and not math.isfinite(v)
        for e in get(client, "/api/runs/run-b")["experiments"]
        for v in e.values()
    )


@pytest.mark.slow
def test_pages_of_100k_results_load_in_well_under_a_second(tmp_path: Path) -> None:
    timings = measure(write_synthetic_run(tmp_path, 100_000), full=False)
    assert timings["search_hits"] == 1000  # every 100th sample of both experiments
    pages = {k: v for k, v in timings.items() if k.endswith("_ms")}
    assert set(pages) == {"page_ms", "filter_ms", "search_ms", "search_rare_ms", "result_ms"}
    assert max(pages.values()) < 1000, timings
