"""A new run's one-time work waits for its first samples (issue 20, cold start).

Before any sample starts, the run directory, the writer's lock and the results file are
made: a store that cannot be written fails then, with nothing started. The manifest
(`run.json`, with the run's provenance) is written once the first samples of a run on the
event loop are under way, and always before the first result reaches the results file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.errors import RunStoreError, SerdeError
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    RunStore,
    Sample,
    Score,
    exact_match,
    run_eval,
)
from weakincentives.evals._records import ADAPTERS_ATTR
from weakincentives.evals.store import RunHandle, RunProvenance, _handle
from weakincentives.evals.store._files import lock_is_held
from weakincentives.evals.store._provenance import models_of
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop
from weakincentives.runtime.session import TokenUsage

BACKENDS = ["asyncio", "trio"]
FINGERPRINT = Fingerprint(dataset_sha256="0" * 64)


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(n)]


def recording_task(kind: str, started: list[str]) -> Callable[[str], Any]:
    """A `sync` or `async` task function that records each input it starts on."""

    def sync_task(question: str) -> str:
        started.append(question)
        return question

    async def async_task(question: str) -> str:
        started.append(question)
        return question

    return sync_task if kind == "sync" else async_task


def result(sample_id: str) -> EvalResult:
    return EvalResult(
        sample_id=sample_id,
        experiment_name="baseline",
        score=Score(value=1.0, passed=True),
        latency_ms=1,
    )


class Journal:
    """What happened, in order: samples starting, `run.json` and result writes."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def first(self, event: str) -> int:
        return self.events.index(event)


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> Journal:
    log = Journal()
    write_manifest, write = _handle.write_manifest, RunHandle._write

    def manifest_spy(run_dir: Path, manifest: Any, **kwargs: Any) -> None:
        write_manifest(run_dir, manifest, **kwargs)
        log.add(f"manifest {manifest.status}")

    def write_spy(self: RunHandle, fd: int, data: bytes) -> RunStoreError | None:
        log.add("results")
        return write(self, fd, data)

    monkeypatch.setattr(_handle, "write_manifest", manifest_spy)
    monkeypatch.setattr("weakincentives.evals.store._run_store.write_manifest", manifest_spy)
    monkeypatch.setattr(RunHandle, "_write", write_spy)
    return log


def manifest(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


# -- the order of a run's start ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_samples_start_before_run_json_is_written_and_results_after_it(
    backend: str, tmp_path: Path, journal: Journal
) -> None:
    async def task(question: str) -> str:
        journal.add(f"start {question}")
        await anyio.sleep(0.01)
        return "a" + question[1:]

    report = run_eval(
        samples(8), task, exact_match, store=tmp_path, run_id="r", max_concurrent=4,
        backend=backend,
    )  # fmt: skip

    assert report.pass_rate == 1.0
    events = journal.events
    assert set(events[:4]) == {f"start q{i}" for i in range(4)}  # the first wave
    assert events[4] == "manifest running"  # then run.json, before any result
    assert events.index("manifest running") < events.index("results")
    assert events[-1] == "manifest complete"
    on_disk = manifest(tmp_path / "r")
    assert on_disk["status"] == "complete" and on_disk["counts"]["results"] == 8
    assert on_disk["provenance"]["python_version"]  # the provenance, collected later


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_result_that_comes_before_run_json_waits_for_it(
    backend: str, tmp_path: Path, journal: Journal
) -> None:
    async def instant(question: str) -> str:  # never waits: done in its first step
        journal.add(f"start {question}")
        return "a" + question[1:]

    run_eval(
        samples(3), instant, exact_match, store=tmp_path, run_id="r", max_concurrent=1,
        backend=backend,
    )  # fmt: skip

    events = journal.events
    assert events[0] == "start q0"
    assert events.index("manifest running") < events.index("results")
    assert [line["sample_id"] for line in lines(tmp_path / "r")] == ["s0", "s1", "s2"]


def test_a_sample_in_a_thread_finds_run_json_with_its_provenance(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def task(question: str) -> str:
        if not seen:
            seen.append(manifest(tmp_path / "r"))
        return "a" + question[1:]

    run_eval(samples(2), task, exact_match, store=tmp_path, run_id="r")
    assert seen[0]["status"] == "running"
    assert seen[0]["provenance"]["python_version"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_crash_after_the_first_wave_started_leaves_a_readable_run(
    backend: str, tmp_path: Path
) -> None:
    found: list[str] = []

    async def task(question: str) -> str:
        await anyio.sleep(0.01)
        if question == "q2":  # the second wave: what a crash here would leave
            handle = RunStore(tmp_path).open("r")
            found.append(handle.status)
            found.append(str(handle.manifest.provenance["python_version"]))
        return "a" + question[1:]

    run_eval(
        samples(4), task, exact_match, store=tmp_path, run_id="r", max_concurrent=2,
        backend=backend,
    )  # fmt: skip
    assert found[0] == "running" and found[1]


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


# -- a store that cannot be written: nothing starts ----------------------------------


def unwritable_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "runs"
    root.write_text("a file where the store's directory should be\n")
    return root


def unopenable_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = os.open

    def refuse(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("results.jsonl"):
            raise OSError(28, "No space left on device")
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    return tmp_path / "runs"


@pytest.mark.parametrize("broken", [unwritable_root, unopenable_results])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_store_that_cannot_be_written_fails_before_any_sample_starts(
    broken: Callable[[Path, pytest.MonkeyPatch], Path],
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    task = recording_task(kind, started)
    root = broken(tmp_path, monkeypatch)
    with pytest.raises(RunStoreError, match=r"cannot (create run store root|open)"):
        run_eval(samples(3), task, exact_match, store=root, run_id="r")
    assert started == []


# -- the handle: a manifest written later --------------------------------------------


def first_append(run: RunHandle) -> None:
    run.append(result("s1"))


def first_extend(run: RunHandle) -> None:
    run.extend([result("s1")])


def first_publish(run: RunHandle) -> None:
    run.publish()


def first_record_provenance(run: RunHandle) -> None:
    run.record_provenance({"git_dirty": True})


def first_manifest(run: RunHandle) -> None:
    assert run.manifest.provenance["host"] == "h"


@pytest.mark.parametrize(
    "first",
    [first_append, first_extend, first_publish, first_record_provenance, first_manifest],
)
def test_a_deferred_manifest_is_written_once_by_whatever_needs_it_first(
    first: Callable[[RunHandle], None], tmp_path: Path, journal: Journal
) -> None:
    calls: list[int] = []

    def provenance() -> dict[str, Any]:
        calls.append(1)
        return {"host": "h"}

    run = RunStore(tmp_path).create(
        FINGERPRINT, run_id="r", provenance=provenance, defer_manifest=True
    )
    assert not (run.path / "run.json").exists() and calls == []
    assert run.results_path.exists()  # the results file is open already

    first(run)
    assert manifest(run.path)["provenance"]["host"] == "h"
    assert manifest(run.path)["status"] == "running"
    run.publish()  # already written: nothing to do
    run.append(result("s2"))
    run.finish()

    assert calls == [1]
    assert journal.events.index("manifest running") < journal.events.index("results")
    final = manifest(run.path)
    assert final["status"] == "complete" and final["provenance"]["host"] == "h"
    assert final["counts"]["results"] == (2 if first in (first_append, first_extend) else 1)
    if first is first_record_provenance:
        assert final["provenance"]["git_dirty"] is True


def test_a_run_finished_before_its_manifest_was_written_records_it_then(
    tmp_path: Path, journal: Journal
) -> None:
    run = RunStore(tmp_path).create(
        FINGERPRINT, run_id="r", provenance=lambda: {"host": "h"}, defer_manifest=True
    )
    run.finish("interrupted")
    assert journal.events == ["manifest interrupted"]
    assert manifest(run.path)["provenance"] == {"host": "h"}
    assert RunStore(tmp_path).open("r").status == "interrupted"


def test_appends_racing_from_threads_all_wait_for_the_one_manifest(
    tmp_path: Path, journal: Journal
) -> None:
    gate = threading.Event()
    calls: list[int] = []

    def slow_provenance() -> dict[str, Any]:
        calls.append(1)
        gate.wait(5.0)
        return {"host": "h"}

    run = RunStore(tmp_path).create(
        FINGERPRINT, run_id="r", provenance=slow_provenance, defer_manifest=True
    )
    threads = [threading.Thread(target=run.append, args=(result(f"s{i}"),)) for i in range(8)]
    for thread in threads:
        thread.start()
    threading.Event().wait(0.05)
    assert "results" not in journal.events  # every append waits for run.json
    gate.set()
    for thread in threads:
        thread.join(5.0)
    run.finish()
    assert calls == [1]
    assert journal.events[0] == "manifest running"
    assert journal.events.count("results") == 8
    assert RunStore(tmp_path).open("r").counts.results == 8


def test_a_manifest_that_cannot_be_written_lets_no_result_through(tmp_path: Path) -> None:
    attempts: list[int] = []

    def broken() -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise RunStoreError("cannot write run.json: No space left on device")
        return {"host": "h"}

    run = RunStore(tmp_path).create(FINGERPRINT, run_id="r", provenance=broken, defer_manifest=True)
    with pytest.raises(RunStoreError, match="No space left"):
        run.append(result("s1"))
    assert run.results_path.read_bytes() == b""  # nothing written without a manifest
    run.append(result("s1"))  # the next try writes both
    run.finish()
    assert [line["sample_id"] for line in lines(run.path)] == ["s1"]
    assert manifest(run.path)["provenance"] == {"host": "h"}


# -- the fingerprint's models, without the rest of the provenance ---------------------


def model(request: ModelRequest) -> FunctionReply:
    return FunctionReply(text="a")


class Loop(AgentLoop[str, Any]):
    def create_prompt(self, request: str) -> Any:  # pragma: no cover - never run
        raise NotImplementedError


def judged(output: str, expected: str) -> Score:  # pragma: no cover - never run
    return exact_match(output, expected)


def targets() -> Iterator[tuple[str, object, object]]:
    adapter = FunctionAdapter(model, model_name="m1")

    def task(question: str) -> str:  # pragma: no cover - never run
        return question

    yield "plain", task, exact_match
    yield "agent", Loop(adapter=adapter), exact_match
    setattr(judged, ADAPTERS_ATTR, (FunctionAdapter(model, model_name="judge"),))
    yield "judged", task, judged


@pytest.mark.parametrize(("name", "target", "evaluator"), list(targets()))
def test_models_of_is_what_the_collected_provenance_says(
    name: str, target: object, evaluator: object
) -> None:
    collected = RunProvenance.collect(target=target, evaluator=evaluator, git_dirty=None)
    assert models_of(target, evaluator) == collected.models()
    assert (models_of(target, evaluator) == {}) is (name == "plain")


# -- the package's price table: read when a cost is first looked up -------------------


def test_the_package_price_table_is_read_only_when_a_result_is_priced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from weakincentives.adapters import pricing
    from weakincentives.evals.runner import _evaluate

    reads: list[int] = []

    def counted() -> pricing.PriceTable:
        reads.append(1)
        return pricing.default_prices()

    monkeypatch.setattr(_evaluate, "default_prices", counted)
    run_eval(samples(3), lambda q: "a" + q[1:], exact_match)
    assert reads == []  # a plain function: nothing to price

    def priced(request: ModelRequest) -> FunctionReply:
        return FunctionReply(text="a", usage=TokenUsage(input_tokens=1000, output_tokens=100))

    class Echo(AgentLoop[str, Any]):
        def create_prompt(self, request: str) -> Any:
            template = PromptTemplate[Any](
                ns="cold", key="echo", sections=(MarkdownSection("Q", "q", "$text", Q),)
            )
            return Prompt(template).bind(Q(request))

    loop = Echo(adapter=FunctionAdapter(priced, model_name="gpt-4o-mini"))
    report = run_eval(samples(2), loop, exact_match)
    assert reads == [1]  # once, for the first cost
    assert [r.cost for r in report.results] == [pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6)] * 2


@dataclass(frozen=True)
class Q:
    text: str


# -- the fingerprint: checked before the first sample, completed with run.json --------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_fingerprint_extra_that_cannot_be_stored_fails_before_any_sample_starts(
    kind: str, tmp_path: Path
) -> None:
    started: list[str] = []
    task = recording_task(kind, started)
    with pytest.raises(SerdeError):
        run_eval(samples(2), task, exact_match, store=tmp_path, fingerprint_extra={"x": object()})
    assert started == []


def test_a_new_runs_deferred_fingerprint_is_the_one_its_resume_computes(tmp_path: Path) -> None:
    adapter = FunctionAdapter(model, model_name="m1")
    judge = FunctionAdapter(model, model_name="judge")

    def judged_task(question: str) -> str:
        return "a" + question[1:]

    judged_task.adapter = adapter  # type: ignore[attr-defined]

    def scorer(output: str, expected: str) -> Score:
        return exact_match(output, expected)

    setattr(scorer, ADAPTERS_ATTR, (judge,))
    data = samples(3)
    run_eval(data[:2], judged_task, scorer, store=tmp_path, run_id="r", max_samples=2)
    stored = manifest(tmp_path / "r")["fingerprint"]
    assert stored["models"]["agent"]["parameters"]["model_name"] == "m1"
    assert stored["models"]["judge"]["parameters"]["model_name"] == "judge"
    assert stored["dataset_sha256"] != "unhashed-stream"
    report = run_eval(data[:2], judged_task, scorer, store=tmp_path, resume="r")
    assert len(report.results) == 2  # the same fingerprint: resumed, not refused


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_run_json_that_cannot_be_written_ends_the_run_and_lets_go_of_it(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise RunStoreError("cannot write run.json: No space left on device")

    def sync_task(question: str) -> str:
        return "a" + question[1:]

    async def async_task(question: str) -> str:
        await anyio.sleep(0.01)
        return "a" + question[1:]

    monkeypatch.setattr(_handle, "write_manifest", disk_full)
    task = sync_task if kind == "sync" else async_task
    with pytest.raises(RunStoreError, match="No space left"):
        run_eval(samples(4), task, exact_match, store=tmp_path, run_id="r", max_concurrent=2)
    assert (tmp_path / "r" / "results.jsonl").read_bytes() == b""  # no result without it
    assert not lock_is_held(tmp_path / "r" / ".lock")  # the writer let go of the run


# -- git's answer, when it came before run.json could hold it ------------------------


@pytest.mark.parametrize("ends_at_once", [True, False])
def test_an_answer_already_given_is_recorded_after_the_grace_period_or_by_finish(
    ends_at_once: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import Future

    from weakincentives.evals.runner._git_dirty import GRACE, GitDirty

    rewrites: list[object] = []
    real = RunHandle.record_provenance

    def spy(self: RunHandle, changes: Any) -> bool:
        rewrites.append(dict(changes))
        return bool(real(self, changes))

    monkeypatch.setattr(RunHandle, "record_provenance", spy)
    run = RunStore(tmp_path).create(FINGERPRINT, run_id="r")
    answered: Future[bool | None] = Future()
    answered.set_result(True)

    dirty = GitDirty(run, answered)  # never writes run.json from the caller's thread
    assert rewrites == []
    if ends_at_once:  # a short run: finish records it, one write of run.json
        run.finish(provenance=dirty.final())
        threading.Event().wait(GRACE * 2)
        assert rewrites == []
    else:  # a run still going after the grace period: recorded mid-run (a crash keeps it)
        for _ in range(200):
            if rewrites:
                break
            threading.Event().wait(0.01)
        assert rewrites == [{"git_dirty": True}]
        run.finish(provenance=dirty.final())
    assert manifest(run.path)["provenance"]["git_dirty"] is True
