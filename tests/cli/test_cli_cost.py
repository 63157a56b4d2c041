"""`wink eval run --price/--prices/--max-cost`: costs in the report, a clean stop, a resume."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from weakincentives.cli import app

AGENT = """
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop
from weakincentives.runtime.session import TokenUsage


@dataclass(frozen=True)
class Question:
    text: str


def model(request: ModelRequest) -> FunctionReply:
    text = request.last_user_text().rsplit("\\n", 1)[-1].upper()
    return FunctionReply(text=text, usage=TokenUsage(input_tokens=1000, output_tokens=100))


class Upper(AgentLoop[str, Any]):
    def create_prompt(self, request: str) -> Prompt[Any]:
        template = PromptTemplate[Any](
            ns="cli", key="upper",
            sections=(MarkdownSection("Q", "q", "$text", Question, role="user"),),
        )
        return Prompt(template).bind(Question(request))


def loop() -> Upper:
    return Upper(adapter=FunctionAdapter(model, model_name="cli-model"))
"""
COST = (1000 * 2.0 + 100 * 10.0) / 1e6  # --price cli-model=2,10: $0.003 a sample


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    path, modules = list(sys.path), set(sys.modules)
    (tmp_path / "agent.py").write_text(AGENT)
    rows = [{"id": i, "input": x, "expected": x.upper()} for i, x in enumerate("abcdefgh")]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    yield tmp_path
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name == "agent":
            del sys.modules[name]


BASE = ["eval", "run", "agent.py:loop", "--dataset", "data.jsonl", "--evaluator", "exact_match",
        "--concurrency", "1", "--no-cache"]  # fmt: skip


def run(*args: str) -> Any:
    return CliRunner().invoke(app, [*BASE, *args])


def test_price_flag_prices_the_run_and_json_shows_it(work: Path) -> None:
    out = run("--price", "cli-model=2,10", "--json")

    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    cost = data["overall"]["cost"]
    assert (cost["priced"], cost["unpriced"]) == (8, 0)
    assert cost["total_usd"] == pytest.approx(8 * COST)
    assert cost["per_sample_usd"] == pytest.approx(COST)


def test_without_a_price_the_report_says_unpriced(work: Path) -> None:
    out = run()

    assert out.exit_code == 0, out.output
    assert "unpriced" in out.stdout


def test_a_price_file(work: Path) -> None:
    (work / "prices.toml").write_text("[models.cli-model]\ninput = 2\noutput = 10\n")

    out = run("--prices", "prices.toml", "--json")

    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["overall"]["cost"]["total_usd"] == pytest.approx(8 * COST)


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--price", "cli-model=two,10"], "--price"), (["--prices", "absent.json"], "price file")],
)
def test_bad_prices_exit_2(work: Path, args: list[str], message: str) -> None:
    out = run(*args)

    assert out.exit_code == 2
    assert message in out.stderr


def test_max_cost_stops_with_exit_3_and_a_higher_limit_resumes(work: Path) -> None:
    limit = f"{3 * COST - 1e-9:.9f}"  # reached by the third sample

    stopped = run("--price", "cli-model=2,10", "--max-cost", limit, "--run-id", "r1")

    assert stopped.exit_code == 3, stopped.output
    assert "--max-cost" in stopped.stderr and "--resume" in stopped.stderr
    results = work / "runs" / "r1" / "results.jsonl"
    assert len(results.read_text().splitlines()) == 3
    assert json.loads((work / "runs" / "r1" / "run.json").read_text())["status"] == "interrupted"

    resumed = run("--price", "cli-model=2,10", "--max-cost", "1", "--resume", "r1", "--json")

    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["total"] == 8
    assert len(results.read_text().splitlines()) == 8


@pytest.mark.parametrize(
    "args", [["--max-cost", "1"], ["--price", "m=1,2"], ["--prices", "prices.json"]]
)
def test_cost_options_are_refused_with_redis(work: Path, args: list[str]) -> None:
    out = run("--redis", "redis://127.0.0.1:1", *args)

    assert out.exit_code == 2
    assert "cannot be used with --redis" in out.stderr
