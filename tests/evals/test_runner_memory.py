"""With a run store, the local runner keeps nothing per finished sample (issue 20, point 3).

Each result goes to `results.jsonl` as it completes; the report reads the results back
(`StoredResults`) when they are first asked for, and the store's writer counts keys
without remembering them. How flat the memory stays is measured by `bench/w3_memory.py`;
these tests check the mechanism and that the report is the same as before.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives import serde
from weakincentives.errors import RunStoreError, SerdeError
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Sample,
    Score,
    StoredResults,
    evaluate,
    exact_match,
    run_eval,
)
from weakincentives.evals.runner._scheduler import slim
from weakincentives.evals.store import decode_report_fields
from weakincentives.runtime import TokenUsage

N = 40


def samples(n: int = N) -> list[Sample[str, str]]:
    # Every third answer is wrong, every seventh question raises: all three kinds of result.
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


def answer(question: str) -> str:
    number = int(question[1:])
    if number % 7 == 3:
        raise ValueError(f"no answer to {question}")
    return question.upper() if number % 3 else question


def summary(results: Any) -> list[tuple[object, ...]]:
    return sorted(
        (r.sample_id, r.passed, r.score.value, r.score.reason, r.error, r.error_kind, r.epoch)
        for r in results
    )


@pytest.mark.parametrize("max_concurrent", [1, 4])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_report_of_a_stored_run_reads_the_same_results_back(
    tmp_path: Path, kind: str, max_concurrent: int
) -> None:
    async def async_answer(question: str) -> str:
        return answer(question)

    target: Any = answer if kind == "sync" else async_answer
    in_memory = run_eval(samples(), target, exact_match, max_concurrent=max_concurrent)
    stored = run_eval(samples(), target, exact_match, max_concurrent=max_concurrent, store=tmp_path)

    assert isinstance(stored.results, StoredResults)
    assert not isinstance(in_memory.results, StoredResults)
    assert len(stored.results) == stored.total == N
    assert summary(stored.results) == summary(slim(r) for r in in_memory.results)
    assert (stored.pass_rate, stored.error_count, stored.complete) == (
        in_memory.pass_rate,
        in_memory.error_count,
        in_memory.complete,
    )
    # Read back once, then kept: the run directory is no longer needed.
    first = stored.results[0]
    shutil.rmtree(tmp_path)
    assert stored.results[0] is first
    assert stored.results == tuple(stored.results)


def test_results_read_back_are_slim_and_match_the_file(tmp_path: Path) -> None:
    report = run_eval(samples(6), answer, exact_match, store=tmp_path)
    on_disk = RunStore(tmp_path).open(report.run_id or "").iter_results()
    by_id = {r.sample_id: r for r in on_disk}
    for result in report.results:
        assert result == slim(by_id[result.sample_id])
        assert result.messages == () and result.output is None


def test_the_length_needs_no_reading(tmp_path: Path) -> None:
    report = run_eval(samples(5), answer, exact_match, store=tmp_path)
    shutil.rmtree(tmp_path)
    assert len(report.results) == report.total == 5
    with pytest.raises(RunStoreError, match="reads its results from the run directory"):
        _ = report.pass_rate


def test_a_resumed_run_lists_the_earlier_results_then_its_own(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    first = run_eval(samples(6), answer, exact_match, store=store, run_id="r1")
    assert first.error_count == 1
    second = run_eval(samples(6), answer, exact_match, store=store, resume="r1", retry_errors=True)
    ids = [r.sample_id for r in second.results]
    assert ids[:5] == [r.sample_id for r in first.results if r.error is None]
    assert ids[5:] == ["s3"]  # the errored key, run again
    assert second.total == 6 and second.config["skipped"] == 5
    # The first report ends where its call stopped writing: the resume's lines are not its.
    assert sorted(r.sample_id for r in first.results) == [f"s{i}" for i in range(6)]


def test_a_changed_file_is_reported_not_misread(tmp_path: Path) -> None:
    report = run_eval(samples(4), answer, exact_match, store=tmp_path, run_id="r1")
    results_file = tmp_path / "r1" / "results.jsonl"
    lines = results_file.read_bytes().splitlines(keepends=True)
    results_file.write_bytes(b"".join(lines[:2]))
    with pytest.raises(RunStoreError, match="expected 4 results"):
        list(report.results)


def test_evaluate_under_trio_reads_back_too(tmp_path: Path) -> None:
    pytest.importorskip("trio")

    async def main() -> int:
        report = await evaluate(samples(8), answer, exact_match, store=tmp_path)
        return sum(1 for r in report.results if r.passed)

    assert anyio.run(main, backend="trio") == run_eval(samples(8), answer, exact_match).passed_count


def _result(sample_id: str, *, error: str | None = None) -> EvalResult:
    score = Score(value=0.0 if error else 1.0, passed=error is None)
    return EvalResult(
        sample_id=sample_id, experiment_name="x", score=score, latency_ms=1, error=error,
        error_kind="agent" if error else None,
    )  # fmt: skip


def test_a_writer_that_expects_unique_keys_counts_them_without_keeping_them(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    with store.create(Fingerprint(dataset_sha256="0" * 64, target="t"), run_id="r1") as run:
        run.append(_result("a", error="boom"))
        run.expect_unique_keys()
        run.extend([_result("b"), _result("c", error="boom")])
        run.append(_result("a"))  # supersedes the key recorded before the promise
        assert (run.counts.results, run.counts.passed, run.counts.errors) == (3, 2, 1)
        assert run.completed_keys(include_errors=False) == {("a", "x", 0), ("b", "x", 0)}
    reopened = store.open("r1")
    assert (reopened.counts.results, reopened.counts.passed, reopened.counts.errors) == (3, 2, 1)


def _varied() -> list[EvalResult]:
    metric = Metric(name="f1", value=0.5, weight=2.0, metadata={"k": [1, "x"]})
    return [
        _result("plain"),
        _result("failed", error="boom"),
        dataclasses.replace(
            _result("rich"),
            score=Score(metrics=(metric,), reason="half"),
            usage=TokenUsage(input_tokens=7, output_tokens=3, reasoning_tokens=1),
            metadata={"topic": "math", "n": 3},
            environment={"files": ["a.txt"]},
            bundle_path=Path("bundles/x.zip"),
            cost=2,
            judge_cost=0.25,
            epoch=2,
            delivery_count=3,
            run_id="r9",
            output={"long": "x" * 50},
        ),
    ]


@pytest.mark.parametrize("index", range(3))
def test_reading_report_fields_gives_what_full_validation_gives(index: int) -> None:
    result = _varied()[index]
    line = serde.dumps(result)
    full = serde.loads(EvalResult, line)
    fast = decode_report_fields(line)
    assert slim(fast) == slim(full)
    assert type(fast.cost) is type(full.cost) and type(fast.latency_ms) is type(full.latency_ms)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"epoch": "2"}, id="a string for an int"),
        pytest.param({"latency_ms": 12.6}, id="a float latency"),
        pytest.param({"usage": {"input_tokens": 1, "new_counter": 2}}, id="an unknown field"),
    ],
)
def test_a_line_in_another_shape_is_read_by_the_validator(change: dict[str, Any]) -> None:
    data = json.loads(serde.dumps(_result("x")))
    data.update(change)
    line = json.dumps(data).encode()
    try:
        expected: object = slim(serde.loads(EvalResult, line))
    except SerdeError as exc:
        expected = type(exc)
    try:
        got: object = slim(decode_report_fields(line))
    except SerdeError as exc:
        got = type(exc)
    assert got == expected
