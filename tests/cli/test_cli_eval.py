"""`wink eval run|report|compare` through typer's CliRunner: exit codes, JSON, errors."""

from __future__ import annotations

import importlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.cli._experiments import parse_experiment, parse_experiments
from weakincentives.cli._progress import LineProgress, RichProgress, progress_for
from weakincentives.cli._targets import resolve_evaluator, resolve_target
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError
from weakincentives.evals import EvalReport, EvalResult, RunStore, Score

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TASKS = """
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio

from weakincentives.evals import Experiment, Score
from weakincentives.runtime import FunctionLoop, Session

LIMIT = 3


@dataclass(frozen=True)
class Query:
    text: str


def upper(text: str) -> str:
    return text.upper()


async def async_upper(text: str) -> str:
    return text.upper()


def query_upper(query: Query) -> str:
    return query.text.upper()


def flagged(text: str, session: Session) -> str:
    experiment = session[Experiment].latest()
    fixed = experiment is not None and experiment.get_flag("fix", False)
    return text.upper() if fixed or text != "c" else text


async def slow(text: str) -> str:
    await anyio.sleep(30)  # cancelled by --timeout: the test never waits this long
    return text


def flaky(text: str) -> str:
    if text == "b" and not Path("fixed").exists():
        raise RuntimeError("flaky failure")
    return text.upper()


def loop_factory() -> FunctionLoop[str, str]:
    return FunctionLoop(upper)


def starts_with_a(output: str, expected: str) -> Score:
    return Score(value=1.0, passed=output.startswith("A"))


def make_evaluator():
    return starts_with_a


def needs_args(a: int, b: int, c: int) -> int:
    return a


def broken_factory() -> object:
    raise RuntimeError("no model configured")


class Suite:
    target = staticmethod(upper)
    evaluator = staticmethod(starts_with_a)
    dataset = None
"""


@pytest.fixture
def isolated_imports(tmp_path: Path) -> Iterator[None]:
    """Targets are imported into this process: undo their sys.path and sys.modules entries.

    Only the targets' own modules go (files under the test's directory or examples/): a
    library that a run imports on first use, such as numpy, cannot be imported twice.
    """
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    roots = (tmp_path.resolve(), EXAMPLES.resolve())
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file is None or any(Path(file).resolve().is_relative_to(root) for root in roots):
            del sys.modules[name]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports: None) -> Path:
    """A directory with `tasks.py` and a 4-row dataset (expected: 3 of 4 are upper case)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.py").write_text(TASKS)
    rows = [("a", "A"), ("b", "B"), ("c", "C"), ("d", "wrong")]
    write_rows(
        tmp_path / "data.jsonl",
        [
            {
                "id": i,
                "input": x,
                "expected": y,
                "metadata": {"half": "first" if i < 2 else "second"},
            }
            for i, (x, y) in enumerate(rows)
        ],
    )
    return tmp_path


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def run_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("eval", "run", *args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# -- wink eval run ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["tasks.py:upper", "tasks.py:async_upper", "tasks:upper", "tasks.py:loop_factory"]
)
def test_run_scores_every_sample_and_prints_json(work: Path, target: str) -> None:
    data = run_json(target, "--dataset", "data.jsonl", "--evaluator", "exact_match")
    assert data["total"] == 4
    assert data["overall"]["pass_rate"] == 0.75
    run_dir = Path(data["run_dir"])
    assert (work / run_dir / "results.jsonl").read_text().count("\n") == 4


def test_run_text_output_names_the_run_and_the_next_commands(work: Path) -> None:
    result = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl",
                    "--evaluator", "exact_match", "--run-id", "r1")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "4 of 4 results (complete)" in out
    assert "75.0%" in out
    for expected in ("runs/r1", "wink query runs/r1", "wink debug runs/r1", "--resume r1"):
        assert expected in out


@pytest.mark.parametrize(("threshold", "code"), [("0.75", 0), ("0.7", 0), ("0.8", 1), ("1", 1)])
def test_fail_under_sets_the_exit_code(work: Path, threshold: str, code: int) -> None:
    result = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl",
                    "--evaluator", "exact_match", "--fail-under", threshold)  # fmt: skip
    assert result.exit_code == code, result.output
    if code:
        assert "below --fail-under" in result.stderr


def test_experiments_run_side_by_side_and_are_compared_with_the_first(work: Path) -> None:
    data = run_json("tasks.py:flagged", "--dataset", "data.jsonl", "--evaluator", "exact_match",
                    "--experiment", "base", "--experiment", "fixed:v2,fix=true")  # fmt: skip
    assert data["baseline"] == "base"
    assert data["experiments"]["base"]["pass_rate"] == 0.5
    assert data["experiments"]["fixed"]["pass_rate"] == 0.75
    comparison = data["comparisons"]["fixed"]
    assert comparison["n_pairs"] == 4
    assert comparison["improvements"] == [{"sample_id": "2", "epoch": 0}]


def test_epochs_multiply_the_results(work: Path) -> None:
    data = run_json("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match",
                    "--epochs", "3", "--concurrency", "2")  # fmt: skip
    assert data["total"] == 12
    assert data["overall"]["pass_at_k"]["k"] == 3


def test_timeout_turns_a_slow_sample_into_a_timeout_error(work: Path) -> None:
    data = run_json("tasks.py:slow", "--dataset", "data.jsonl", "--evaluator", "exact_match",
                    "--timeout", "0.05")  # fmt: skip
    assert data["overall"]["errors_by_kind"] == {"timeout": 4}


def test_retry_errors_reruns_errored_results_on_resume(work: Path) -> None:
    base = ["tasks.py:flaky", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    assert run_json(*base, "--run-id", "r1")["overall"]["errors"] == 1
    (work / "fixed").touch()
    assert run_json(*base, "--resume", "r1")["overall"]["errors"] == 1
    retried = run_json(*base, "--resume", "r1", "--retry-errors")
    assert retried["overall"]["errors"] == 0
    assert retried["overall"]["passed"] == 3


def test_input_type_loads_inputs_as_dataclasses(work: Path) -> None:
    write_rows(work / "q.jsonl", [{"id": "x", "input": {"text": "hi"}, "expected": "HI"}])
    data = run_json("tasks.py:query_upper", "--dataset", "q.jsonl", "--evaluator", "exact_match",
                    "--input-type", "tasks:Query")  # fmt: skip
    assert data["overall"]["passed"] == 1


def test_input_type_is_inferred_from_the_task_annotation(work: Path) -> None:
    write_rows(work / "q.jsonl", [{"id": "x", "input": {"text": "hi"}, "expected": "HI"}])
    data = run_json("tasks.py:query_upper", "--dataset", "q.jsonl", "--evaluator", "exact_match")
    assert data["overall"]["passed"] == 1


@pytest.mark.parametrize(
    ("evaluators", "passed"),
    [
        (["tasks:starts_with_a"], 1),
        (["tasks:make_evaluator"], 1),
        (["exact_match", "contains_ci"], 3),
        (["regex_match=[A-C]"], 3),
    ],
)
def test_evaluators_by_name_reference_and_factory(
    work: Path, evaluators: list[str], passed: int
) -> None:
    args = [a for e in evaluators for a in ("--evaluator", e)]
    data = run_json("tasks.py:upper", "--dataset", "data.jsonl", *args)
    assert data["overall"]["passed"] == passed


def test_a_suite_brings_its_own_evaluator(work: Path) -> None:
    data = run_json("tasks.py:Suite", "--dataset", "data.jsonl")
    assert data["overall"]["passed"] == 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "expected": "X"}', "data.jsonl:2"),
        ("not json", "data.jsonl:2"),
        ('{"id": "a", "input": "x", "expected": "X", "extra": 1}', "data.jsonl:2"),
        ('{"id": "0", "input": "x", "expected": "X"}', "data.jsonl:2: field 'id': duplicate"),
    ],
)
def test_a_bad_dataset_exits_2_naming_file_and_line(work: Path, line: str, message: str) -> None:
    (work / "data.jsonl").write_text('{"id": "0", "input": "a", "expected": "A"}\n' + line + "\n")
    result = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl",
                    "--evaluator", "exact_match")  # fmt: skip
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (work / "runs").exists() or not any((work / "runs").iterdir())


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py:upper", "no such file"),
        ("tasks.py:uper", "did you mean upper"),
        ("tasks.py:LIMIT", "is a int"),
        ("no_such_module:upper", "no module named 'no_such_module'"),
        ("tasks.py", "must look like"),
        ("tasks.py:broken_factory", "no model configured"),
    ],
)
def test_a_bad_target_exits_2(work: Path, target: str, message: str) -> None:
    result = invoke("eval", "run", target, "--dataset", "data.jsonl", "--evaluator", "exact_match")
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--evaluator", "nope"], "not a built-in"),
        (["--evaluator", "tool_called"], "needs an argument: tool_called=TOOL"),
        (["--evaluator", "max_model_requests=x"], "max_model_requests=x"),
        ([], "no evaluator"),
        (["--evaluator", "exact_match", "--experiment", "a,flag"], "FLAG=VALUE"),
        (["--evaluator", "exact_match", "--experiment", "a", "--experiment", "a"], "twice"),
        (["--evaluator", "exact_match", "--run-id", "x", "--resume", "y"], "give one of them"),
        (["--evaluator", "exact_match", "--input-type", "tasks:upper"], "not a type"),
    ],
)
def test_bad_options_exit_2(work: Path, args: list[str], message: str) -> None:
    result = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_dataset_exits_2(work: Path) -> None:
    result = invoke("eval", "run", "tasks.py:upper", "--evaluator", "exact_match")
    assert result.exit_code == 2
    assert "no dataset" in result.stderr


def test_resume_skips_done_results_and_refuses_a_changed_configuration(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run_json(*base, "--run-id", "r1")
    results = work / "runs" / "r1" / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:2]))  # as if the run had stopped after two samples
    data = run_json(*base, "--resume", "r1")
    assert data["total"] == 4
    assert len(results.read_text().splitlines()) == 4
    changed = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl",
                     "--evaluator", "contains", "--resume", "r1")  # fmt: skip
    assert changed.exit_code == 2
    assert "configuration changed" in changed.stderr


def test_an_existing_run_id_exits_2(work: Path) -> None:
    base = ["tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run_json(*base, "--run-id", "r1")
    again = invoke("eval", "run", *base, "--run-id", "r1")
    assert again.exit_code == 2
    assert "already exists" in again.stderr


@pytest.mark.parametrize("cache", [True, False])
def test_the_example_suite_runs_from_a_file_path(work: Path, cache: bool) -> None:
    sys.path.insert(0, str(EXAMPLES))
    importlib.import_module("calc_agent").write_dataset(work / "calc.jsonl", 12)
    suite = str(EXAMPLES / "calc_suite.py") + ":suite"
    data = run_json(suite, "--dataset", "calc.jsonl", *(() if cache else ("--no-cache",)))
    assert data["total"] == 24
    assert set(data["experiments"]) == {"baseline", "careful"}
    # The only errors the offline model makes: a prose answer, twice (see calc_agent.py).
    assert set(data["overall"]["errors_by_kind"]) <= {"output_parsing"}
    assert data["experiments"]["careful"]["errors"] == 0
    assert (work / "runs" / "response-cache.sqlite").is_file() is cache


# -- wink eval report / compare --------------------------------------------------------------


@pytest.fixture
def two_runs(work: Path) -> Path:
    base = ["--dataset", "data.jsonl", "--evaluator", "exact_match"]
    run_json("tasks.py:flagged", *base, "--run-id", "ab",
             "--experiment", "base", "--experiment", "fixed,fix=true")  # fmt: skip
    run_json("tasks.py:upper", *base, "--run-id", "up")
    return work


def test_report_prints_json_and_slices(two_runs: Path) -> None:
    result = invoke("eval", "report", "ab", "--json", "--slice", "half")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run_id"] == "ab"
    assert data["comparisons"]["fixed"]["baseline"] == "base"
    second = data["slices"]["second"]
    assert (second["base"]["n"], second["base"]["pass_rate"]) == (2, 0.0)
    assert (second["fixed"]["n"], second["fixed"]["pass_rate"]) == (2, 0.5)


def test_report_text_accepts_a_run_directory(two_runs: Path) -> None:
    result = invoke("eval", "report", two_runs / "runs" / "ab", "--slice", "half")
    assert result.exit_code == 0, result.output
    assert "fixed vs base" in result.stdout
    assert "Pass rate by half" in result.stdout
    assert "50.0% [" in result.stdout


def test_report_refuses_a_slice_key_no_result_has(two_runs: Path) -> None:
    result = invoke("eval", "report", "ab", "--slice", "topic")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: --slice topic: no result has that metadata key; the run's keys: half"
    )


def test_report_writes_html(two_runs: Path) -> None:
    result = invoke("eval", "report", "ab", "--html", two_runs / "report.html")
    assert result.exit_code == 0, result.output
    assert "<html" in (two_runs / "report.html").read_text()


@pytest.mark.parametrize("run", ["nope", "runs/nope"])
def test_report_of_a_missing_run_exits_2(two_runs: Path, run: str) -> None:
    result = invoke("eval", "report", run)
    assert result.exit_code == 2
    assert "nope" in result.stderr


def test_compare_two_experiments_of_one_run(two_runs: Path) -> None:
    result = invoke("eval", "compare", "ab", "--baseline", "base", "--treatment", "fixed", "--json")
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout)["comparisons"]["fixed"]
    assert (comparison["baseline_pass_rate"], comparison["treatment_pass_rate"]) == (0.5, 0.75)


def test_compare_two_runs_pairs_by_sample(two_runs: Path) -> None:
    result = invoke("eval", "compare", "ab", "up", "--baseline", "base", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["baseline"] == "ab/base"
    comparison = data["comparisons"]["up/baseline"]
    assert comparison["n_pairs"] == 4
    assert comparison["pass_rate_delta"] == 0.25
    text = invoke("eval", "compare", "ab", "up", "--baseline", "base")
    assert "up/baseline vs ab/base" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up"], "one experiment"),
        (["ab", "up"], "pick them with --baseline NAME (one of base, fixed) and --treatment"),
        (["ab", "--baseline", "nope"], "nope"),
    ],
)
def test_compare_usage_errors_exit_2(two_runs: Path, args: list[str], message: str) -> None:
    result = invoke("eval", "compare", *args)
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    "command", [["eval"], ["eval", "run"], ["eval", "report"], ["eval", "compare"]]
)
def test_help_is_available(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.stdout


# -- the pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name", "tag", "flags"),
    [
        ("a", "a", "latest", {}),
        ("a:v2", "a", "v2", {}),
        ("a,x=1,y=true,z=text,w=[1]", "a", "latest", {"x": 1, "y": True, "z": "text", "w": [1]}),
        (" a : v2 , x = 0.5 ", "a", "v2", {"x": 0.5}),
    ],
)
def test_parse_experiment(spec: str, name: str, tag: str, flags: dict[str, Any]) -> None:
    experiment = parse_experiment(spec)
    assert (experiment.name, experiment.overrides_tag, dict(experiment.flags)) == (name, tag, flags)


@pytest.mark.parametrize("spec", ["", ":tag", "a:", "a,=1", "a,flag"])
def test_parse_experiment_rejects_malformed_values(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_experiment(spec)


def test_parse_experiments_defaults_when_none_are_given() -> None:
    default = (parse_experiment("x"),)
    assert parse_experiments([], default) == default
    assert [e.name for e in parse_experiments(["a", "b"], default)] == ["a", "b"]


@pytest.mark.parametrize(
    ("spec", "output", "expected", "passed"),
    [
        ("exact_match", "a", "a", True),
        ("contains_ci", "ABC", "b", True),
        ("numeric_close", "1.0", "1.0000001", False),
        ("numeric_close=0.01", "1.0", "1.001", True),
        ("json_equal", '{"a": 1}', {"a": 1}, True),
        ("numeric_close:answer", {"answer": "42", "work": "6*7"}, "42", True),
        ("numeric_close=0.01:answer", {"answer": 1.0}, 1.001, True),
        ("exact_match:answer", {"answer": "a"}, "a", True),
        ("contains:answer", {"answer": "abc"}, "b", True),
        ("exact_match:answer", {"result": "a"}, "a", False),
        ("regex_search=a:b", "xa:bx", None, True),  # a pattern with a colon is no field
    ],
)
def test_builtin_evaluators_by_name(spec: str, output: Any, expected: Any, passed: bool) -> None:
    assert resolve_evaluator(spec)(output, expected).passed is passed


def test_resolve_target_reads_a_suite_and_the_loop_input_type(work: Path) -> None:
    resolved = resolve_target("tasks.py:Suite")
    assert resolved.target.__name__ == "upper"
    assert len(resolved.evaluators) == 1
    loop = resolve_target(str(EXAMPLES / "calc_suite.py") + ":make_agent")
    assert loop.input_type.__name__ == "Question"


def test_progress_bar_shows_counts_pass_rate_and_errors() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    bar = RichProgress(console)
    bar.start(3, done=1)
    bar.advance(
        EvalResult(
            sample_id="a", experiment_name="x", score=Score(value=1.0, passed=True), latency_ms=1
        )
    )
    bar.advance(EvalResult(sample_id="b", experiment_name="x", score=Score(value=0.0, passed=False),
                           latency_ms=1, error="boom", error_kind="agent"))  # fmt: skip
    bar.finish()
    text = out.getvalue()
    assert "3/3" in text
    assert "pass 50.0%" in text
    assert "errors 1" in text
    assert (bar.done, bar.passed, bar.errors) == (2, 1, 1)


def test_progress_is_a_line_every_few_seconds_when_not_a_terminal() -> None:
    assert isinstance(progress_for(Console(file=io.StringIO(), force_terminal=False)), LineProgress)
    assert isinstance(progress_for(Console(file=io.StringIO(), force_terminal=True)), RichProgress)
    out, clock = io.StringIO(), FakeClock()
    lines = LineProgress(Console(file=out, force_terminal=False), interval=10.0, clock=clock)
    ok = EvalResult(sample_id="a", experiment_name="x", score=Score(value=1.0, passed=True),
                    latency_ms=1)  # fmt: skip
    bad = EvalResult(sample_id="b", experiment_name="x", score=Score(value=0.0, passed=False),
                     latency_ms=1, error="boom", error_kind="agent")  # fmt: skip
    lines.start(4, done=1)
    lines.advance(ok)
    assert out.getvalue() == ""  # less than an interval: quiet
    clock.advance(10.0)
    lines.advance(bad)
    assert out.getvalue() == "eval: 3/4 done (75%), 0.2/s, pass 50.0%, errors 1\n"
    clock.advance(2.0)
    lines.advance(ok)
    lines.finish()  # a last line, since one was printed
    assert out.getvalue().splitlines()[-1] == "eval: 4/4 done (100%), 0.2/s, pass 66.7%, errors 1"


def test_a_short_run_prints_no_progress_line() -> None:
    out = io.StringIO()
    lines = LineProgress(Console(file=out, force_terminal=False), clock=FakeClock())
    lines.start(None)
    lines.finish()
    assert out.getvalue() == ""


def test_a_run_store_run_reads_back_as_the_printed_report(work: Path) -> None:
    data = run_json("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match",
                    "--run-id", "r9")  # fmt: skip
    stored = EvalReport.load(RunStore(work / "runs").open("r9").path)
    assert stored.to_dict()["overall"] == data["overall"]


def test_a_rerun_of_the_example_suite_is_served_from_the_response_cache(work: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    importlib.import_module("calc_agent").write_dataset(work / "calc.jsonl", 6)
    suite = str(EXAMPLES / "calc_suite.py") + ":suite"

    first = invoke("eval", "run", suite, "--dataset", "calc.jsonl")
    second = invoke("eval", "run", suite, "--dataset", "calc.jsonl")

    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert "Response cache: 0 hits" in first.stdout
    assert "Response cache:" in second.stdout and "(100% hit rate), 0 stored" in second.stdout


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        ({"hits": 3, "misses": 1, "writes": 1}, "3 hits, 1 misses (75% hit rate), 1 stored"),
        ({"hits": 0, "misses": 0, "writes": 0}, "no lookups (nothing reached the model"),
    ],
)
def test_cache_summary(stats: dict[str, int], expected: str) -> None:
    from weakincentives.cli._eval import _cache_summary

    assert expected in _cache_summary(stats)


def test_an_overrides_tag_no_override_has_fails_before_any_sample(work: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    importlib.import_module("calc_agent").write_dataset(work / "calc.jsonl", 4)
    agent = str(EXAMPLES / "calc_suite.py") + ":make_agent"
    result = invoke("eval", "run", agent, "--dataset", "calc.jsonl", "--evaluator", "contains",
                    "--experiment", "terse:terse", "--run-id", "r1")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "'terse'" in result.stderr and "tags that exist: careful" in result.stderr
    assert not (work / "runs" / "r1").exists()  # refused before any sample ran


def test_run_records_provenance_inputs_and_failed_bundles(work: Path) -> None:
    data = run_json("tasks.py:flagged", "--dataset", "data.jsonl", "--evaluator", "exact_match",
                    "--run-id", "r1", "--bundles", "failed")  # fmt: skip
    assert data["total"] == 4
    run_dir = work / "runs" / "r1"
    manifest = json.loads((run_dir / "run.json").read_text())
    provenance = manifest["provenance"]
    assert provenance["dataset"]["path"] == "data.jsonl"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all("input" in r and "expected" in r for r in rows)
    bundled = {r["sample_id"] for r in rows if r["bundle_path"]}
    failed = {r["sample_id"] for r in rows if not r["score"]["passed"] or r["error"]}
    assert bundled == failed and failed
    assert len(list((run_dir / "bundles").rglob("*.zip"))) == len(failed)


def test_bundles_takes_all_or_failed(work: Path) -> None:
    result = invoke("eval", "run", "tasks.py:upper", "--dataset", "data.jsonl",
                    "--evaluator", "exact_match", "--bundles", "some")  # fmt: skip
    assert result.exit_code == 2
    assert "--bundles takes 'all' or 'failed'" in result.stderr


@pytest.mark.parametrize("run", ["r1", "runs/r1"])
def test_report_prints_the_provenance_header(work: Path, run: str) -> None:
    run_json("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match",
             "--run-id", "r1")  # fmt: skip
    result = invoke("eval", "report", run)
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[:7]
    assert [line.split(":")[0] for line in header] == [
        "agent", "judges", "package", "git", "host", "dataset", "command",
    ]  # fmt: skip
    assert "none recorded" in header[0]  # a plain function declares no model
    assert "data.jsonl" in header[5]
    data = json.loads(invoke("eval", "report", run, "--json").stdout)
    assert data["provenance"]["dataset"]["path"] == "data.jsonl"


@pytest.mark.parametrize("run", ["r1", "runs/r1"])
def test_report_refuses_a_run_of_a_newer_format(work: Path, run: str) -> None:
    run_json("tasks.py:upper", "--dataset", "data.jsonl", "--evaluator", "exact_match",
             "--run-id", "r1")  # fmt: skip
    manifest = work / "runs" / "r1" / "run.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format_version": 99}))
    result = invoke("eval", "report", run)
    assert result.exit_code == 2
    assert "format_version 99 is not one this weakincentives reads" in result.stderr
    assert "upgrade weakincentives" in result.stderr
    assert "Traceback" not in result.output
