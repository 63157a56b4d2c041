"""`EvalReport.load(run, slim=True)`: the same report as the full read, from fewer fields.

`wink eval report` and `wink eval compare` read runs this way: the transcript, output,
input and expected value of each line are skipped, not validated. Every number, table and
chart must stay exactly what the full read gives, and a bad line must still be named by
file and line.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.debug import render_html_report
from weakincentives.errors import InvalidReportError, SerdeError
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    FlippedSample,
    Metric,
    RunStore,
    Score,
    ToolCallRecord,
)
from weakincentives.evals.store import SlimDecoder, slim_copy
from weakincentives.runtime.session import ChatMessage, TokenUsage, ToolCall

EXPERIMENTS = ("baseline", "v2", "v3")
TOPICS = ("algebra", "geometry", "logic")
KINDS = ("timeout", "agent", "judge", "output_parsing")


def _result(i: int, experiment: str, epoch: int) -> EvalResult:
    """Sample `i` of a run: passes vary by experiment and epoch, some error, all priced."""
    shift = EXPERIMENTS.index(experiment)
    exact = (i + shift + epoch) % 3 != 0
    contains = (i * 7 + shift) % 5 != 0
    error = f"{KINDS[i % 4]} failed on sample {i}" if (i + shift) % 11 == 0 else None
    score = Score.from_metrics(
        [
            Metric("exact_match", float(exact), weight=1.0),
            Metric("contains", float(contains), weight=1.0),
            Metric("turns", float(1 + i % 4), metadata={"limit": 4}),
        ],
        threshold=0.75,
        reason=f"exact={exact} contains={contains}",
    )
    if error is not None:
        score = Score(value=0.0, passed=False, reason=error)
    return EvalResult(
        sample_id=f"s{i:03d}",
        experiment_name=experiment,
        score=score,
        latency_ms=20 + (i * 37 + shift * 11) % 400,
        error=error,
        error_kind=KINDS[i % 4] if error else None,  # type: ignore[arg-type]
        epoch=epoch,
        request_id=f"req-{experiment}-{i}-{epoch}",
        run_id="slim-run",
        usage=TokenUsage(input_tokens=100 + i, output_tokens=10 + i % 7, cached_tokens=i % 3),
        metadata={"topic": TOPICS[i % 3], "difficulty": i % 4, "tags": ["x", str(i % 2)]},
        output=f"answer {i}",
        messages=(
            ChatMessage(role="user", content=f"question {i}"),
            ChatMessage(
                role="assistant",
                tool_calls=(ToolCall(id=f"c{i}", name="calc", arguments=f'{{"x": {i}}}'),),
            ),
            ChatMessage(role="tool", content=str(i), tool_call_id=f"c{i}", name="calc"),
            ChatMessage(role="assistant", content=f"answer {i}"),
        ),
        tool_calls=(ToolCallRecord("calc", {"x": i}, str(i), True, 1.5),),
        input={"question": i},
        expected=f"answer {i}",
        cost=0.001 * (1 + i % 5),
        judge_cost=0.0002 if i % 2 else None,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run of 3 experiments x 40 samples x 3 epochs, then re-run lines for some keys."""
    store = RunStore(tmp_path, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="slim-run") as run:
        for experiment in EXPERIMENTS:
            run.extend([_result(i, experiment, e) for i in range(40) for e in range(3)])
        # Re-runs (`--retry-errors`): the later line for a key wins.
        rerun = _result(0, "baseline", 0)
        run.append(
            EvalResult(
                sample_id=rerun.sample_id, experiment_name="baseline", epoch=0,
                score=Score(value=1.0, passed=True, reason="fixed"), latency_ms=5,
                metadata=rerun.metadata, usage=TokenUsage(input_tokens=3), cost=0.5,
            )
        )  # fmt: skip
    return tmp_path / "slim-run"


def _rendered(report: EvalReport, baseline: str | None) -> str:
    out = io.StringIO()
    report.render(Console(file=out, width=160, color_system=None), baseline=baseline)
    return out.getvalue()


def test_the_slim_read_gives_the_same_report(run_dir: Path) -> None:
    full = EvalReport.load(run_dir)
    slim = EvalReport.load(run_dir, slim=True)
    assert slim.total == full.total == 3 * 40 * 3
    assert slim.results == tuple(slim_copy(r) for r in full.results)
    assert slim.results[0].messages == () and slim.results[0].output is None
    assert full.results[0].score.reason == "fixed"  # the re-run line won in both
    assert (slim.run_id, slim.expected_count, slim.config) == (
        full.run_id,
        full.expected_count,
        full.config,
    )
    for baseline in ("baseline", None):
        assert slim.to_dict(baseline=baseline) == full.to_dict(baseline=baseline)
        assert _rendered(slim, baseline) == _rendered(full, baseline)
    assert render_html_report(slim, baseline="v2", slice_key="topic") == render_html_report(
        full, baseline="v2", slice_key="topic"
    )
    for name in EXPERIMENTS:
        for key in ("topic", "difficulty"):
            assert slim.experiment(name).slice_by(key) == full.experiment(name).slice_by(key)
        assert slim.pass_at_k(3, experiment=name) == full.pass_at_k(3, experiment=name)
        assert slim.flaky_samples(experiment=name) == full.flaky_samples(experiment=name)
    slim_comparisons, full_comparisons = slim.compare_all("baseline"), full.compare_all("baseline")
    assert list(slim_comparisons) == list(full_comparisons) == ["v2", "v3"]
    for name, comparison in slim_comparisons.items():
        assert _without_transcripts(comparison) == _without_transcripts(full_comparisons[name])
    assert slim.errors_by_kind() == full.errors_by_kind()


def _without_transcripts(comparison: Any) -> Any:
    """The comparison, its flipped pairs' results slimmed as the slim read has them."""

    def slimmed(flips: tuple[FlippedSample, ...]) -> tuple[FlippedSample, ...]:
        return tuple(
            dataclasses.replace(f, baseline=slim_copy(f.baseline), treatment=slim_copy(f.treatment))
            for f in flips
        )

    return dataclasses.replace(
        comparison,
        regressions=slimmed(comparison.regressions),
        improvements=slimmed(comparison.improvements),
    )


def _line(**changes: Any) -> bytes:
    data = serde.dump(_result(7, "v2", 1))
    for key, value in changes.items():
        data[key] = value
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"latency_ms": 12.5},  # older records: a float, rounded as the full read rounds it
        {"latency_ms": "17"},  # pydantic's lax string -> int (msgspec refuses; full read)
        {"score": {"value": 1, "passed": True}},  # an int for a float
        {"score": {"metrics": [{"name": "a", "value": 1, "weight": 2}]}},  # value, passed derived
        {"score": {"value": "0.5", "passed": "true"}},  # lax forms the full read accepts
        {"usage": {"input_tokens": 4}},
        {"epoch": 2.0, "cost": 3},
        {"metadata": {"nested": {"a": [1, 2.5, None]}}, "judge_cost": None},
        {"messages": "not a transcript"},  # skipped, not validated (the full read refuses)
    ],
)
def test_a_line_reads_as_the_full_read_reads_it(changes: dict[str, Any]) -> None:
    line = _line(**changes)
    slim = SlimDecoder()(line)
    if "messages" in changes:
        assert slim == slim_copy(_result(7, "v2", 1))
        with pytest.raises(SerdeError, match="messages"):
            serde.loads(EvalResult, line)
        return
    assert slim == slim_copy(serde.loads(EvalResult, line))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"error_kind": "nonsense"}, "error_kind"),
        ({"score": {"value": 1.0, "passed": True, "metrics": [{"name": "a"}]}}, "value"),
        ({"score": {"value": 1.0, "metrics": [{"name": "a", "value": 1, "weight": -1}]}}, ">= 0"),
        ({"latency_ms": "slow"}, "latency_ms"),
        ({"sample_id": None}, "sample_id"),
    ],
)
@pytest.mark.parametrize("slim", [False, True])
def test_a_bad_line_is_an_error_naming_file_line_and_field(
    tmp_path: Path, changes: dict[str, Any], field: str, slim: bool
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(_line() + b"\n" + _line(**changes) + b"\n" + _line() + b"\n")
    with pytest.raises(InvalidReportError, match=rf"results\.jsonl:2: .*{field}"):
        EvalReport.load(path, slim=slim)


def test_the_slim_read_skips_a_cut_last_line_and_refuses_broken_json(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    line = _line()
    path.write_bytes(line + b"\n" + line[:40])
    assert EvalReport.load(path, slim=True).total == 1
    path.write_bytes(line + b"\n" + line[:40] + b"\n" + line + b"\n")
    with pytest.raises(InvalidReportError, match=r"results\.jsonl:2: not a valid result line"):
        EvalReport.load(path, slim=True)


def test_compare_renames_results_without_losing_a_field() -> None:
    from weakincentives.cli._pairing import _renamed

    original = _result(3, "v2", 2)
    assert _renamed(original, "B/v2") == dataclasses.replace(original, experiment_name="B/v2")


@pytest.mark.parametrize("slim", [True, False])
def test_experiment_prefix_names_the_results_as_they_are_read(run_dir: Path, slim: bool) -> None:
    plain = EvalReport.load(run_dir, slim=slim)
    prefixed = EvalReport.load(run_dir, slim=slim, experiment_prefix="A/")
    assert prefixed.experiment_names == tuple(f"A/{n}" for n in plain.experiment_names)
    assert prefixed.results == tuple(
        dataclasses.replace(r, experiment_name=f"A/{r.experiment_name}") for r in plain.results
    )  # the same results (the re-run line still wins), only named otherwise
    assert (prefixed.run_id, prefixed.expected_count) == (plain.run_id, plain.expected_count)


def test_a_line_only_the_full_validator_reads_gets_the_prefix_too(tmp_path: Path) -> None:
    line = json.loads(_line())
    line["epoch"] = "2"  # valid for pydantic (lax), refused by msgspec (strict)
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (read,) = EvalReport.load(path, slim=True, experiment_prefix="B/").results
    assert (read.experiment_name, read.epoch) == (f"B/{line['experiment_name']}", 2)


def test_read_run_id_reads_only_the_manifest_or_header(run_dir: Path, tmp_path: Path) -> None:
    assert EvalReport.read_run_id(run_dir) == "slim-run"
    report = EvalReport.load(run_dir, slim=True)
    saved = EvalReport(results=report.results[:2], run_id="saved-id").save(tmp_path / "r.jsonl")
    assert EvalReport.read_run_id(saved) == "saved-id"
    assert EvalReport.read_run_id(tmp_path / "r.jsonl") == EvalReport.load(saved).run_id
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(_line() + b"\n")
    assert EvalReport.read_run_id(bare) is None
    assert EvalReport.read_run_id(tmp_path / "missing") is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.jsonl").write_text("")
    (tmp_path / "broken" / "run.json").write_text("{oops")
    assert EvalReport.read_run_id(tmp_path / "broken") is None
