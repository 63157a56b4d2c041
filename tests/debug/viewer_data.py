"""Runs for the viewer tests, written with the real `RunStore` and real debug bundles.

`write_runs(root)` writes two runs under `root/runs`:

- `run-a` (made as `PROVENANCE` says): experiments `baseline` and `concise`, 20 samples
  each, with inputs, expected values, transcripts and tool calls, two errors, flips both
  ways, one retried key (its first line is an error, the last line a pass: the viewer
  must show the pass), and a bundle for `s01` of the baseline;
- `run-b`: experiment `baseline` only, for comparisons across runs; its results have no
  input or expected value (as with `record_inputs=False`).

The expected answers are computed here from the same rules (`DemoRuns.results`), so the
tests check the viewer against an independent oracle.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from weakincentives.clock import FakeClock
from weakincentives.debug import DebugBundleConfig, bundle_recorder
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    ToolCallRecord,
    TurnUsage,
    compare_results,
)
from weakincentives.runtime.session import (
    ChatMessage,
    Session,
    TokenUsage,
    ToolCall,
    ToolInvoked,
    ToolResult,
)

UNIQUE_WORD = "zanzibar"
"""Appears in exactly one model message: run-a, baseline, sample s07."""
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
"""Markup in one output (run-a, concise, s02): the viewer must show it as text."""
SAMPLES = 20
PROVENANCE = {
    "agent": {"provider": "function", "model": "calc-v1", "base_url": None,
              "parameters": {"temperature": 0.0}, "adapter": "FunctionAdapter", "version": "1"},
    "judges": [],
    "package_version": "0.1.0", "python_version": "3.11.7", "git_commit": "abc1234",
    "git_dirty": True, "host": "ci-box", "command": ["wink", "eval", "run", "calc.jsonl"],
    "dataset": {"path": "calc.jsonl", "sha256": "0" * 64},
}  # fmt: skip
"""What produced run-a (the manifest's `provenance`)."""
LOG = logging.getLogger("tests.debug.viewer")


@dataclass(frozen=True, slots=True)
class DemoRuns:
    """Where the runs are and what they hold (last line per key)."""

    root: Path
    """Directory holding `run-a` and `run-b`."""
    results: dict[str, list[EvalResult]]
    """Run id -> its final results (the oracle)."""
    bundle: Path
    """The bundle written for run-a / baseline / s01."""

    def of(self, run_id: str, predicate: Callable[[EvalResult], bool]) -> list[EvalResult]:
        return [r for r in self.results[run_id] if predicate(r)]

    def flips(self) -> tuple[set[str], set[str]]:
        """Sample ids that regressed and improved from baseline to concise in run-a."""
        c = compare_results(
            self.of("run-a", lambda r: r.experiment_name == "baseline"),
            self.of("run-a", lambda r: r.experiment_name == "concise"),
            baseline_name="baseline",
            treatment_name="concise",
        )
        return {f.sample_id for f in c.regressions}, {f.sample_id for f in c.improvements}


def passes(run_id: str, experiment: str, i: int) -> bool:
    if run_id == "run-b":
        return i % 2 == 0
    if experiment == "baseline":
        return i % 4 != 0
    return i % 5 != 0


def make_result(run_id: str, experiment: str, i: int, *, bundle: Path | None = None) -> EvalResult:
    sample_id = f"s{i:02d}"
    ok = passes(run_id, experiment, i)
    answer = i + 2 if ok else i + 3
    words = f"The answer is {answer}"
    if (run_id, experiment, i) == ("run-a", "baseline", 7):
        words += f", as in {UNIQUE_WORD}"
    error = error_kind = None
    if (run_id, experiment, i) == ("run-a", "concise", 3):
        error, error_kind = "timed out after 30 s", "timeout"
    elif (run_id, experiment, i) == ("run-a", "baseline", 11):
        error, error_kind = "RuntimeError: model unreachable", "agent"
    output: object = XSS if (run_id, experiment, i) == ("run-a", "concise", 2) else str(answer)
    messages: tuple[ChatMessage, ...] = (
        ChatMessage(role="user", content=f"What is {i} + 2?"),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id=f"c{i}", name="add", arguments=f'{{"a": {i}, "b": 2}}'),),
        ),
        ChatMessage(role="tool", content=str(i + 2), tool_call_id=f"c{i}", name="add"),
        ChatMessage(role="assistant", content=words),
    )
    cost = None if i == 9 else 0.00002 * (3 + i % 4) + (0.00001 if experiment == "concise" else 0)
    # Two model calls (the tool call, the answer) that add up to the usage and the cost; an
    # error ended the sample after the first one (its transcript stops at the tool's answer).
    turns: tuple[TurnUsage, ...] = (
        TurnUsage(20 + i, 4, None if cost is None else cost * 0.25),
        TurnUsage(30, 6 + i, None if cost is None else cost * 0.75),
    )
    if error is not None:
        messages, turns = messages[:3], turns[:1]
    return EvalResult(
        sample_id=sample_id,
        experiment_name=experiment,
        score=Score(
            value=1.0 if ok else 0.0,
            passed=ok,
            reason=f"expected {i + 2}, got {answer}",
            metrics=(Metric("correct", 1.0 if ok else 0.0, weight=1.0), Metric("turns", 2.0)),
        ),
        latency_ms=100 + 10 * i,
        error=error,
        error_kind=error_kind,  # type: ignore[arg-type]  # a literal chosen above
        usage=TokenUsage(
            input_tokens=sum(t.input_tokens for t in turns),
            output_tokens=sum(t.output_tokens for t in turns),
        ),
        metadata={"difficulty": "hard" if i % 3 == 0 else "easy", "level": i % 3},
        output=output,
        # run-b was made with record_inputs off: no input, no expected.
        input=f"What is {i} + 2?" if run_id == "run-a" else None,
        expected=i + 2 if run_id == "run-a" else None,
        messages=messages,
        turns=turns,
        tool_calls=(
            ToolCallRecord(name="add", params={"a": i, "b": 2}, message=str(i + 2), success=True),
        ),
        bundle_path=bundle,
        # Priced like a small model; s09 unpriced; odd samples judged.
        cost=None if cost is None else sum(t.cost or 0.0 for t in turns),
        judge_cost=0.00001 if i % 2 else None,
    )


def write_bundle(directory: Path) -> Path:
    clock = FakeClock()
    session = Session(session_id="sess-s01", clock=clock)
    config = DebugBundleConfig(directory=directory)
    with bundle_recorder(
        config, request_id="req-s01", kind="eval", clock=clock, sample_id="s01",
        experiment="baseline", run_id="run-a",
    ) as rec:  # fmt: skip
        rec.set_request(
            {"sample": {"id": "s01", "input": "What is 1 + 2?", "expected": "3"}, "epoch": 0}
        )
        rec.set_session_before(session)
        LOG.warning("calculator warmed up for s01")
        session.dispatch(
            ToolInvoked(
                name="add",
                params={"a": 1, "b": 2},
                result=ToolResult(message="3", value=3),
                success=True,
                call_id="c1",
                duration_ms=1.5,
            )
        )
        rec.set_session_after(session)
    assert rec.path is not None
    return rec.path


def write_runs(root: Path) -> DemoRuns:
    store = RunStore(root / "runs", clock=FakeClock(), sync_interval=None)
    bundle = write_bundle(root / "bundles")
    results: dict[str, list[EvalResult]] = {}
    for run_id, experiments in (("run-a", ("baseline", "concise")), ("run-b", ("baseline",))):
        final = []
        recorded = PROVENANCE if run_id == "run-a" else None
        with store.create(
            Fingerprint(dataset_sha256="0" * 64), run_id=run_id, provenance=recorded
        ) as run:
            for experiment in experiments:
                for i in range(SAMPLES):
                    is_bundled = (run_id, experiment, i) == ("run-a", "baseline", 1)
                    result = make_result(
                        run_id, experiment, i, bundle=bundle if is_bundled else None
                    )
                    if (run_id, experiment, i) == ("run-a", "baseline", 5):
                        # A retried key: the first attempt errored, the retry passed.
                        run.append(dataclasses.replace(result, error="flaky", error_kind="agent"))
                    run.append(result)
                    final.append(dataclasses.replace(result, run_id=run_id))
        results[run_id] = final
    return DemoRuns(root=root / "runs", results=results, bundle=bundle)
