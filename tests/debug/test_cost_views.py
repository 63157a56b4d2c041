"""Every view of a run's cost shows the numbers the report computes: query, viewer, HTML."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.clock import FakeClock
from weakincentives.debug import create_viewer_app, render_html_report
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    RunStore,
    Score,
    cost_delta,
    cost_summary,
)
from weakincentives.runtime.session import TokenUsage

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
BASE_COSTS = [0.010, 0.020, 0.030, None]
TREAT_COSTS = [0.015, 0.030, 0.040, 0.050]


def result(sample: str, experiment: str, cost: float | None, judge: float | None) -> EvalResult:
    return EvalResult(
        sample_id=sample, experiment_name=experiment, score=Score(value=1.0, passed=True),
        latency_ms=5, usage=TokenUsage(input_tokens=100, output_tokens=10), cost=cost,
        judge_cost=judge,
    )  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cost") / "runs"
    store = RunStore(root, clock=FakeClock(START), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="r1") as run:
        for i, (b, t) in enumerate(zip(BASE_COSTS, TREAT_COSTS, strict=True)):
            run.append(result(f"s{i}", "baseline", b, 0.001))
            run.append(result(f"s{i}", "treatment", t, None))
    return root / "r1"


@pytest.fixture(scope="module")
def report(run_dir: Path) -> EvalReport:
    return EvalReport.load(run_dir)


def test_wink_query_has_cost_columns_with_null_for_unpriced(run_dir: Path) -> None:
    sql = (
        "SELECT experiment, round(sum(cost_usd), 6) AS agent, count(cost_usd) AS priced, "
        "count(*) - count(cost_usd) AS unpriced, round(sum(judge_cost_usd), 6) AS judge "
        "FROM results GROUP BY experiment ORDER BY experiment"
    )
    out = CliRunner().invoke(app, ["query", str(run_dir), sql, "--format", "json", "--no-cache"])

    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert rows == [
        {"experiment": "baseline", "agent": 0.06, "priced": 3, "unpriced": 1, "judge": 0.004},
        {"experiment": "treatment", "agent": 0.135, "priced": 4, "unpriced": 0, "judge": None},
    ]


@pytest.fixture(scope="module")
def client(run_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_viewer_app(run_dir.parent), base_url="http://127.0.0.1") as c:
        yield c


def get(client: TestClient, url: str, **params: Any) -> Any:
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_viewer_shows_the_reports_cost_per_experiment(
    client: TestClient, report: EvalReport
) -> None:
    run = get(client, "/api/runs/r1")

    for block in run["experiments"]:
        expected = cost_summary(report.experiment(block["name"]).results).to_dict()
        shown = block["cost"]
        assert shown["priced"] == expected["priced"]
        assert shown["unpriced"] == expected["unpriced"]
        assert shown["total_usd"] == pytest.approx(expected["total_usd"])
        assert shown["per_sample_ci_usd"] == pytest.approx(expected["per_sample_ci_usd"])


def test_the_viewer_compare_shows_the_reports_cost_delta(
    client: TestClient, report: EvalReport
) -> None:
    data = get(client, "/api/compare", base_run="r1", base="baseline", treat="treatment")

    expected = cost_delta(
        report.experiment("baseline").results, report.experiment("treatment").results
    )
    assert expected is not None
    shown = data["cost_delta"]
    assert shown["n_pairs"] == expected.n_pairs == 3
    assert shown["delta_usd"] == pytest.approx(expected.delta_usd)
    assert shown["delta_ci_usd"] == pytest.approx([expected.low_usd, expected.high_usd])


def test_the_html_report_has_a_cost_section(report: EvalReport) -> None:
    html = render_html_report(report, baseline="baseline")

    assert "<h2>Cost</h2>" in html
    assert cost_summary(report.experiment("baseline").results).describe() in html
    delta = cost_delta(
        report.experiment("baseline").results, report.experiment("treatment").results
    )
    assert delta is not None and delta.describe() in html
