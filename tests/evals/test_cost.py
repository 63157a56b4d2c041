"""Cost per result, per experiment and per A/B pair; --max-cost stops and resumes a run."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.adapters.pricing import ModelPrice, PriceTable
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Experiment,
    Sample,
    Score,
    cost_delta,
    cost_summary,
    exact_match,
    llm_judge,
    run_eval,
    stats,
    summarize_costs,
)
from weakincentives.evals.scoring import JudgeOutput
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop
from weakincentives.runtime.session import TokenUsage

PRICES = PriceTable(
    {
        "agent-model": ModelPrice(input=1000.0, output=2000.0, cached_input=100.0),
        "judge-model": ModelPrice(input=10.0, output=20.0),
    }
)
USAGE = TokenUsage(input_tokens=100, output_tokens=10, cached_tokens=50)
AGENT_COST = (50 * 1000.0 + 50 * 100.0 + 10 * 2000.0) / 1e6  # $0.075 a call
JUDGE_USAGE = TokenUsage(input_tokens=300, output_tokens=40)
JUDGE_COST = (300 * 10.0 + 40 * 20.0) / 1e6


@dataclass(frozen=True)
class Question:
    text: str


def _echo(request: ModelRequest) -> FunctionReply:
    return FunctionReply(text=request.last_user_text().upper(), usage=USAGE)


class EchoLoop(AgentLoop[str, Any]):
    def create_prompt(self, request: str) -> Prompt[Any]:
        template = PromptTemplate[Any](
            ns="cost", key="echo",
            sections=(MarkdownSection("Q", "q", "$text", Question, role="user"),),
        )  # fmt: skip
        return Prompt(template).bind(Question(request))


def echo_loop(model_name: str = "agent-model") -> EchoLoop:
    return EchoLoop(adapter=FunctionAdapter(_echo, model_name=model_name))


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"## Q\n\nQ{i}") for i in range(n)]


def result(sample: str, cost: float | None, judge: float | None = None, epoch: int = 0) -> Any:
    return EvalResult(
        sample_id=sample, experiment_name="e", score=Score(value=1.0), latency_ms=1,
        epoch=epoch, cost=cost, judge_cost=judge,
    )  # fmt: skip


# -- per result ---------------------------------------------------------------------------


def test_every_result_records_the_agents_cost() -> None:
    report = run_eval(samples(3), echo_loop(), exact_match, prices=PRICES)

    assert report.pass_rate == 1.0
    assert [r.cost for r in report.results] == [pytest.approx(AGENT_COST)] * 3
    assert all(r.judge_cost is None for r in report.results)  # no judge ran


def test_an_unpriced_model_records_none_never_zero() -> None:
    report = run_eval(samples(2), echo_loop("mystery-model"), exact_match, prices=PRICES)

    assert [r.cost for r in report.results] == [None, None]
    summary = cost_summary(report.results)
    assert (summary.priced, summary.unpriced) == (0, 2)
    assert summary.to_dict()["total_usd"] is None
    assert summary.describe().startswith("unpriced")


def test_the_package_price_table_is_the_default() -> None:
    loop = echo_loop("gpt-4o-mini")

    report = run_eval(samples(1), loop, exact_match)

    (only,) = report.results
    expected = (50 * 0.15 + 50 * 0.075 + 10 * 0.6) / 1e6
    assert only.cost == pytest.approx(expected)


def test_the_judges_cost_is_recorded_apart() -> None:
    def judge_model(request: ModelRequest) -> FunctionReply:
        verdict = JudgeOutput(justification="fine", rating="excellent")
        return FunctionReply(output=verdict, usage=JUDGE_USAGE)

    judge = llm_judge(FunctionAdapter(judge_model, model_name="judge-model"), "is it upper case")

    report = run_eval(samples(2), echo_loop(), judge, prices=PRICES)

    assert [r.judge_cost for r in report.results] == [pytest.approx(JUDGE_COST)] * 2
    assert [r.cost for r in report.results] == [pytest.approx(AGENT_COST)] * 2
    summary = cost_summary(report.results)
    assert summary.judge_usd == pytest.approx(2 * JUDGE_COST)
    assert summary.total_usd == pytest.approx(2 * (AGENT_COST + JUDGE_COST))


def test_costs_survive_the_run_store(tmp_path: Path) -> None:
    report = run_eval(samples(2), echo_loop(), exact_match, prices=PRICES, store=tmp_path)

    loaded = EvalReport.load(tmp_path / str(report.run_id))

    assert [r.cost for r in loaded.results] == [pytest.approx(AGENT_COST)] * 2
    assert all(r.cost == pytest.approx(AGENT_COST) for r in report.results)  # slim kept it


# -- summaries and deltas -----------------------------------------------------------------


def test_summary_totals_means_and_an_interval_from_the_stats_module() -> None:
    results = [
        result("a", 0.10, 0.01),
        result("b", 0.20),
        result("c", 0.30, 0.02),
        result("d", None),
    ]

    summary = cost_summary(results)

    per = [0.11, 0.20, 0.32]
    expected = stats.mean_ci(per)
    assert (summary.n, summary.priced, summary.unpriced) == (4, 3, 1)
    assert summary.agent_usd == pytest.approx(0.60)
    assert summary.judge_usd == pytest.approx(0.03)
    assert summary.total_usd == pytest.approx(0.63)
    assert (summary.mean_usd, summary.low_usd, summary.high_usd) == pytest.approx(
        (expected.mean, expected.low, expected.high)
    )
    assert "1 of 4 results unpriced" in summary.describe()
    assert summarize_costs((r.cost, r.judge_cost) for r in results) == summary


def test_cost_delta_pairs_by_sample_and_epoch_and_skips_unpriced_pairs() -> None:
    base = [result("a", 0.10), result("b", 0.20), result("c", 0.30), result("a", 0.50, epoch=1)]
    treat = [result("a", 0.05), result("b", 0.25), result("c", None), result("a", 0.40, epoch=1)]

    delta = cost_delta(base, treat)

    assert delta is not None
    diffs = [-0.05, 0.05, -0.10]
    expected = stats.mean_ci(diffs)
    assert delta.n_pairs == 3
    assert (delta.delta_usd, delta.low_usd, delta.high_usd) == pytest.approx(
        (expected.mean, expected.low, expected.high)
    )
    assert delta.relative == pytest.approx(expected.mean / ((0.10 + 0.20 + 0.50) / 3))
    assert cost_delta(base, [result("z", 1.0)]) is None
    assert cost_delta(base, [result("a", None), result("b", None)]) is None  # unpriced side


def test_cost_delta_reads_a_repeated_baseline_key_as_its_last_result() -> None:
    # The last baseline result of a key decides, priced or not (as a dict built in order).
    treat = [result("a", 0.40)]
    assert cost_delta([result("a", 0.10), result("a", None)], treat) is None
    delta = cost_delta([result("a", None), result("a", 0.10)], treat)
    assert delta is not None
    assert delta.n_pairs == 1
    assert delta.delta_usd == pytest.approx(0.30)


def test_a_single_priced_result_has_no_interval() -> None:
    summary = cost_summary([result("a", 0.5)])

    assert summary.mean_usd == 0.5
    assert math.isnan(summary.low_usd)
    assert "[" not in summary.describe()


def test_report_json_and_terminal_show_cost_and_the_ab_delta() -> None:
    base = run_eval(samples(3), echo_loop(), exact_match, prices=PRICES)
    costly = run_eval(
        samples(3), echo_loop(), exact_match, prices=PRICES,
        experiments=[Experiment(name="treatment")],
    )  # fmt: skip
    # Double the treatment's recorded cost, as a costlier prompt would.
    doubled = [dataclasses.replace(r, cost=2 * (r.cost or 0.0)) for r in costly.results]
    report = EvalReport(results=(*base.results, *doubled))

    data = report.to_dict(baseline="baseline")

    assert data["experiments"]["baseline"]["cost"]["total_usd"] == pytest.approx(3 * AGENT_COST)
    assert data["experiments"]["treatment"]["cost"]["total_usd"] == pytest.approx(6 * AGENT_COST)
    delta = data["comparisons"]["treatment"]["cost_delta"]
    assert delta["n_pairs"] == 3
    assert delta["delta_usd"] == pytest.approx(AGENT_COST)
    assert delta["relative"] == pytest.approx(1.0)
    json.dumps(data)  # JSON-safe
    console = Console(width=200, record=True, color_system=None)
    report.render(console, baseline="baseline")
    text = console.export_text()
    assert "Cost" in text and "$0.2250" in text  # 3 x $0.075
    assert "Cost delta" in text and "+$0.0750/sample" in text


# -- --max-cost ---------------------------------------------------------------------------


def test_max_cost_stops_starting_samples_and_the_run_resumes(tmp_path: Path) -> None:
    data = samples(10)
    budget = 3 * AGENT_COST - 1e-9  # reached by the third result

    first = run_eval(
        data, echo_loop(), exact_match, prices=PRICES, store=tmp_path, max_concurrent=1,
        max_cost=budget,
    )  # fmt: skip

    assert first.total == 3
    assert first.config["cost_stopped"] is True
    assert not first.complete
    run_dir = tmp_path / str(first.run_id)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"

    again = run_eval(
        data, echo_loop(), exact_match, prices=PRICES, store=tmp_path, max_concurrent=1,
        max_cost=budget, resume=first.run_id,
    )  # fmt: skip
    assert again.total == 3  # the earlier results already spent the budget

    rest = run_eval(
        data, echo_loop(), exact_match, prices=PRICES, store=tmp_path, max_concurrent=4,
        max_cost=1.0, resume=first.run_id,
    )  # fmt: skip
    assert rest.total == 10 and rest.complete
    assert rest.config["cost_stopped"] is False
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"


def test_unpriced_results_do_not_count_against_max_cost() -> None:
    report = run_eval(
        samples(4), echo_loop("mystery-model"), exact_match, prices=PRICES, max_cost=0.01,
        max_concurrent=1,
    )  # fmt: skip

    assert report.total == 4  # nothing priced was spent
    assert report.config["cost_stopped"] is False


def test_a_zero_budget_starts_nothing() -> None:
    report = run_eval(samples(4), echo_loop(), exact_match, prices=PRICES, max_cost=0.0)

    assert report.total == 0
    assert report.config["cost_stopped"] is True


@pytest.mark.parametrize("bad", [-1.0, "ten"])
def test_a_bad_max_cost_is_a_configuration_error(bad: Any) -> None:
    from weakincentives.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="max_cost"):
        run_eval(samples(1), echo_loop(), exact_match, max_cost=bad)
