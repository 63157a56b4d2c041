"""The report of a stored run of several experiments or epochs, from compact columns.

`EvalReport.load(run, slim=True)` of a run whose keys occur once keeps none of its
results when it has several experiments or epochs: the tables come from counts, and
comparisons, clustered intervals, pass@k, flaky samples, slices and the cost delta from
a compact form of each result (`report._columns`). Every number must be the one the
report of the same (slim) results in memory gives, to the bit, in every view, and
`wink eval report` must print the same bytes as when it read the run into memory.
"""

from __future__ import annotations

import io
import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.errors import ConfigurationError, InvalidStatisticError
from weakincentives.evals import (
    EvalReport,
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    StoredResults,
)
from weakincentives.evals.report import _persistence
from weakincentives.runtime.session import TokenUsage

SHAPES = {
    "experiments": (("base", "v2", "v3"), 1),
    "epochs": (("base",), 3),
    "both": (("base", "v2"), 2),
}
"""Run shape name -> (experiments, epochs)."""


def results(
    n: int, experiments: tuple[str, ...], epochs: int, *, seed: int = 0
) -> list[EvalResult]:
    """Results in a run store's order, with errors, uneven scores, costs, checks, gaps."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        for epoch in range(epochs):
            for name in experiments:
                if name != "base" and (i * 7 + len(name)) % 20 == 3:
                    continue  # a sample the treatment never ran: unpaired
                error = rng.random() < 0.08
                value = rng.choice([0.0, 0.25, 0.5, 1.0, 1.0])
                out.append(
                    EvalResult(
                        sample_id=f"s{i:03d}",
                        experiment_name=name,
                        epoch=epoch,
                        latency_ms=rng.randint(0, 40),
                        error="boom" if error else None,
                        error_kind=rng.choice(["agent", "timeout"]) if error else None,
                        score=Score(
                            value=value,
                            passed=value >= 0.5,
                            metrics=(Metric(name="exact", value=float(value == 1.0)),),
                        ),
                        usage=TokenUsage(input_tokens=i % 7, output_tokens=i % 3),
                        cost=None if i % 4 == 0 else rng.choice([0.001, 0.0025, 0.1]),
                        judge_cost=rng.choice([None, 0.0005]),
                        metadata={"topic": rng.choice(["a", "b", "c"]), "level": i % 2},
                    )
                )
    return out


def write_run(root: Path, items: list[EvalResult]) -> Path:
    store = RunStore(root, sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="r") as run:
        run.extend(items)
    return root / "r"


@pytest.fixture(params=list(SHAPES))
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    experiments, epochs = SHAPES[request.param]
    return write_run(tmp_path / "runs", results(60, experiments, epochs))


def loaded(run: Path) -> tuple[EvalReport, EvalReport]:
    """The report as `wink eval report` reads it now, and the same results in memory."""
    compact = EvalReport.load(run, slim=True)
    assert isinstance(compact.results, StoredResults) and compact.results.compact
    slim = tuple(EvalReport.load(run, slim=True).results)
    in_memory = EvalReport(
        results=slim, run_id=compact.run_id, config=compact.config,
        expected_count=compact.expected_count,
    )  # fmt: skip
    return compact, in_memory


def text(report: EvalReport, baseline: str | None = None) -> str:
    buffer = io.StringIO()
    report.render(Console(file=buffer, width=200), baseline=baseline)
    return buffer.getvalue()


def held(report: EvalReport) -> bool:
    """Whether the report's stored results were read and kept (`StoredResults._all`)."""
    return getattr(report.results, "_kept", None) is not None


def views(report: EvalReport) -> str:
    names = report.experiment_names
    data: dict[str, Any] = {
        "dict": report.to_dict(),
        "text": text(report),
        "summary": report.summarize().to_dict(),
        "flaky": report.flaky_samples(),
        "fewest": report.fewest_attempts(),
        "keys": sorted(report.metadata_keys()),
        "slices": report.slice_by("topic"),
        "slices_fn": report.slice_by(lambda r: r.epoch % 2),
    }
    for name in names:
        part = report.experiment(name)
        data[name] = {
            "summary": part.summarize().to_dict(), "flaky": report.flaky_samples(experiment=name),
            "slices": part.slice_by("topic"), "slices_level": part.slice_by("level"),
            "fewest": part.fewest_attempts(),
        }  # fmt: skip
    if report.epochs > 1:
        data["pass_at_k"] = [report.pass_at_k(2), report.pass_hat_k(2)]
        k = report.epochs
        data["by_experiment"] = [
            report.pass_at_k_by_experiment(k),
            report.pass_hat_k_by_experiment(k),
        ]
    for name in names[1:]:
        data[f"cost {name}"] = report.cost_delta(names[0], name)
        data[f"text {name}"] = text(report, baseline=name)
    return json.dumps(data, sort_keys=True, default=repr)


def test_every_view_shows_the_numbers_of_the_results_in_memory(run: Path) -> None:
    compact, in_memory = loaded(run)
    assert views(compact) == views(in_memory)
    assert not held(compact)


def test_comparisons_are_the_same_and_read_their_flips_back(run: Path) -> None:
    compact, in_memory = loaded(run)
    names = compact.experiment_names
    if len(names) < 2:
        pytest.skip("one experiment: nothing to compare")
    for treatment in names[1:]:
        ours = compact.compare_experiments(names[0], treatment, bootstrap_resamples=300)
        theirs = in_memory.compare_experiments(names[0], treatment, bootstrap_resamples=300)
        assert ours.regressions and ours.improvements and ours.unpaired_baseline
        assert ours == theirs  # the flipped pairs' results too, read back from the file
        assert [f.baseline for f in ours.regressions] == [f.baseline for f in theirs.regressions]
        assert ours.regressions[1:3] == theirs.regressions[1:3]
    assert compact.compare_all(names[0]) == in_memory.compare_all(names[0])
    assert not held(compact)


def test_an_experiment_s_results_are_read_when_asked_for(run: Path) -> None:
    compact, in_memory = loaded(run)
    for name in compact.experiment_names:
        assert tuple(compact.experiment(name).results) == in_memory.experiment(name).results


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.compare_experiments("base", "nope"),
        lambda r: r.pass_at_k(1, experiment="nope"),
        lambda r: r.flaky_samples(experiment="nope"),
        lambda r: r.cost_delta("nope", "base"),
    ],
)
def test_an_unknown_experiment_is_the_same_error(
    tmp_path: Path, call: Callable[[EvalReport], object]
) -> None:
    compact, in_memory = loaded(write_run(tmp_path, results(10, ("base", "v2"), 2)))
    with pytest.raises(ConfigurationError) as ours:
        call(compact)
    with pytest.raises(ConfigurationError) as theirs:
        call(in_memory)
    assert str(ours.value) == str(theirs.value)


def test_pass_at_k_beyond_the_attempts_is_the_same_error(tmp_path: Path) -> None:
    compact, in_memory = loaded(write_run(tmp_path, results(10, ("base", "v2"), 2)))
    messages = []
    for report in (compact, in_memory):
        with pytest.raises(InvalidStatisticError) as error:
            report.pass_at_k(3)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_the_compact_form_grows_by_a_few_bytes_per_result(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        run = write_run(tmp_path / str(n), results(n, ("base", "v2"), 2, seed=1))
        EvalReport.load(run, slim=True).to_dict()  # warm: imports, decoders
        tracemalloc.start()
        try:
            text(EvalReport.load(run, slim=True))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(250), peak(2_500)  # 1,000 and 10,000 results
    # Holding the slim results took about 1,500 bytes each; the columns 27 plus the
    # sample ids, and what the statistics build while they run.
    assert (large - small) / 9_000 < 250


@pytest.mark.parametrize("shape", [*SHAPES, "single"])
@pytest.mark.parametrize(
    "args", [[], ["--json"], ["--slice", "topic"], ["--json", "--slice", "level"]]
)
def test_wink_eval_report_prints_the_bytes_it_printed_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, args: list[str]
) -> None:
    # "single": one experiment, one epoch (streamed without columns; a slice counts).
    experiments, epochs = SHAPES.get(shape, (("base",), 1))
    run = write_run(tmp_path / "runs", results(40, experiments, epochs, seed=4))
    monkeypatch.setenv("COLUMNS", "160")
    argv = ["eval", "report", str(run), *args]
    streamed = CliRunner().invoke(app, argv)
    with monkeypatch.context() as patch:
        patch.setattr(_persistence, "_streamed_run", lambda path: None)  # the full reader
        held = CliRunner().invoke(app, argv)
    assert streamed.exit_code == held.exit_code == 0, streamed.output
    assert streamed.stdout == held.stdout
    assert len(streamed.stdout) > 500
