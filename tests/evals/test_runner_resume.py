"""The local runner with a run store: append as results complete, interrupt, resume."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives.errors import ConfigurationError, FingerprintMismatchError
from weakincentives.evals import (
    Dataset,
    EvalReport,
    EvalResult,
    RunStore,
    Sample,
    dataset_sha256,
    evaluate,
    exact_match,
    run_eval,
)

N = 12


def samples(n: int = N, *, offset: int = 0) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i + offset}", expected=f"Q{i}") for i in range(n)]


class Counting:
    """A task function that records every input it is called with."""

    def __init__(
        self, fail: Callable[[str], bool] = lambda q: False, *, hold_after: int | None = None
    ) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._fail = fail
        self._hold_after = hold_after
        self.gate = threading.Event()
        """Calls after the first `hold_after` wait for this before they answer."""

    def __call__(self, question: str) -> str:
        with self._lock:
            self.calls.append(question)
            hold = self._hold_after is not None and len(self.calls) > self._hold_after
        if hold:
            self.gate.wait(10)
        if self._fail(question):
            raise RuntimeError(f"cannot answer {question}")
        return question.upper()


def interrupted_run(store: RunStore, after: int, **options: Any) -> Counting:
    """Run `samples()` under run id "r1" and cancel it once `after` results are in.

    Calls after the first `after` hold until the cancel, so the run is cut mid-way.
    """
    target = Counting(options.pop("fail", lambda q: False), hold_after=after)

    async def main() -> None:
        with anyio.CancelScope() as scope:

            def progress(result: EvalResult) -> None:
                if store.open("r1").counts.results >= after:
                    scope.cancel()

            await evaluate(
                options.pop("dataset", samples()), target, exact_match, store=store,
                run_id="r1", max_concurrent=2, progress=progress, **options,
            )  # fmt: skip
        target.gate.set()  # the held samples end now; the cancelled run drops their results

    anyio.run(main)
    return target


def test_results_are_appended_as_they_complete_with_full_transcripts(tmp_path: Path) -> None:
    store = RunStore(tmp_path)

    report = run_eval(samples(), str.upper, exact_match, store=store, run_id="full")

    run = store.open("full")
    assert run.status == "complete"
    assert run.counts.results == N and run.manifest.counts.expected == N
    stored = {r.key: r for r in run.latest_results()}
    assert set(stored) == {r.key for r in report.results}
    one = stored[("s3", "baseline", 0)]
    assert one.output == "Q3" and one.messages and one.request_id
    # The report keeps a slim copy: the store has the rest.
    kept = next(r for r in report.results if r.sample_id == "s3")
    assert kept.output is None and kept.messages == () and kept.request_id is None
    assert kept.score.passed and kept.run_id == "full" and report.run_id == "full"
    assert report.config["store"] == str(run.path)


def test_an_interrupted_run_is_marked_and_resumes_without_rerunning(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    first = interrupted_run(store, after=4)
    run = store.open("r1")
    assert run.status == "interrupted"
    done = run.completed_keys()
    assert 4 <= len(done) < N

    second = Counting()
    report = run_eval(samples(), second, exact_match, store=store, resume="r1")

    done_inputs = {f"q{key[0][1:]}" for key in done}
    assert sorted(second.calls) == sorted({f"q{i}" for i in range(N)} - done_inputs)
    assert len(first.calls) + len(second.calls) >= N
    assert report.total == N and report.complete and report.pass_rate == 1.0
    assert report.config["resumed"] is True and report.config["skipped"] == len(done)
    assert store.open("r1").status == "complete"
    assert store.open("r1").counts.results == N


def test_resume_refuses_a_changed_dataset_with_the_diff(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    interrupted_run(store, after=2)
    before = store.open("r1").counts.results
    changed = samples(offset=1)

    with pytest.raises(FingerprintMismatchError, match=r"dataset sha256: [0-9a-f]{12}…") as err:
        run_eval(changed, Counting(), exact_match, store=store, resume="r1")

    assert "cannot resume run r1" in str(err.value)
    assert store.open("r1").counts.results == before


@pytest.mark.parametrize(
    ("options", "change"),
    [({"epochs": 2}, "epochs: 1 -> 2"), ({"fingerprint_extra": {"model": "b"}}, "extra")],
)
def test_resume_refuses_other_changes_too(
    tmp_path: Path, options: dict[str, Any], change: str
) -> None:
    store = RunStore(tmp_path)
    run_eval(samples(), str.upper, exact_match, store=store, run_id="r1")

    with pytest.raises(FingerprintMismatchError, match=change):
        run_eval(samples(), str.upper, exact_match, store=store, resume="r1", **options)


@pytest.mark.parametrize("retry", [False, True])
def test_retry_errors_reruns_only_the_errored_keys(tmp_path: Path, retry: bool) -> None:
    store = RunStore(tmp_path)
    flaky = {"q2", "q5"}
    first = run_eval(
        samples(), Counting(lambda q: q in flaky), exact_match, store=store, run_id="r1"
    )
    assert first.error_count == 2

    again = Counting()
    report = run_eval(samples(), again, exact_match, store=store, resume="r1", retry_errors=retry)

    assert sorted(again.calls) == (sorted(flaky) if retry else [])
    assert report.total == N
    assert report.error_count == (0 if retry else 2)
    assert next(r for r in report.results if r.sample_id == "s2").passed is retry
    latest = {r.key: r for r in store.open("r1").latest_results()}
    assert latest[("s5", "baseline", 0)].is_error is not retry


def test_a_streamed_run_records_its_hash_when_it_completes(tmp_path: Path) -> None:
    store = RunStore(tmp_path)

    report = run_eval(iter(samples()), Counting(), exact_match, store=store, run_id="stream")

    manifest = store.open("stream").manifest
    assert manifest.fingerprint.dataset_sha256 == Dataset(samples=tuple(samples())).sha256
    assert manifest.counts.expected == N
    assert report.config["dataset_sha256"] == manifest.fingerprint.dataset_sha256
    again = run_eval(samples(), Counting(), exact_match, store=store, resume="stream")
    assert again.total == N and again.config["skipped"] == N


def test_resuming_a_stream_needs_its_hash(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run_eval(samples(), str.upper, exact_match, store=store, run_id="r1")

    with pytest.raises(ConfigurationError, match="dataset_sha256="):
        run_eval(iter(samples()), str.upper, exact_match, store=store, resume="r1")


def test_a_streamed_file_with_its_hash_up_front_is_resumable(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    Dataset(samples=tuple(samples())).save(path)
    digest = dataset_sha256(path, str, str)
    store = RunStore(tmp_path / "runs")

    def stream() -> Iterator[Sample[str, str]]:
        return Dataset.stream(path, str, str)

    interrupted_run(store, after=3, dataset=stream(), dataset_sha256=digest)
    assert store.open("r1").status == "interrupted"
    again = Counting()
    report = run_eval(stream(), again, exact_match, store=store, resume="r1", dataset_sha256=digest)

    assert report.total == N and report.complete
    assert len(again.calls) == N - report.config["skipped"]


def test_ctrl_c_marks_the_run_interrupted(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    count = {"n": 0}

    def progress(result: EvalResult) -> None:
        count["n"] += 1
        if count["n"] == 3:
            signal.raise_signal(signal.SIGINT)  # what Ctrl-C does: asyncio cancels the run

    target = Counting(hold_after=3)  # the 4th sample waits until after the interrupt
    with pytest.raises(KeyboardInterrupt):
        run_eval(
            samples(), target, exact_match, store=store, run_id="r1", progress=progress,
            max_concurrent=1,
        )  # fmt: skip
    target.gate.set()

    run = store.open("r1")
    assert run.status == "interrupted"
    assert run.counts.results == 3
    report: EvalReport = run_eval(samples(), Counting(), exact_match, store=store, resume="r1")
    assert report.total == N and report.config["skipped"] == 3
