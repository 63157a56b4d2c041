"""W1 overhead: N samples, the agent answers instantly, exact match, run store written.

Reports milliseconds per sample over the plain-asyncio baseline (`bench._baseline`) for

- `baseline_threads`: a plain thread pool doing the same work (the cost of threads alone);
- `evalloop_function`: `EvalLoop` over `InMemoryMailbox` with a `FunctionLoop` target;
- `evalloop_async`: the same with an `async def` function (its samples run as tasks on
  the loop's event loop, not in threads);
- `evalloop_agent`: `EvalLoop` with an `AgentLoop` on `FunctionAdapter` (prompt render,
  model function, structured output parse);
- `evalloop_agent_async`: the same agent on a `FunctionAdapter` whose model is an
  `async def` (an async adapter: each sample is a task on one event loop);
- `runner_function`, `runner_async`, `runner_agent`: the local runner (`run_eval`, i.e.
  `evaluate()`) with a plain sync task function, an `async def` task function, and the
  same `AgentLoop`; `runner_agent_async` with the agent on the async model.

Every variant answers with the same agent function `answer` and writes one JSONL line per
sample: the framework through a `RunStore`, the baselines with plain file writes. Each
variant runs several times, interleaved with the others so that machine noise hits them
alike; the best (fastest) repeat counts. The drivers here are reused by W2 (with a sleeping
agent) and W3 (in a fresh subprocess, for peak RSS).
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import quick
from bench._baseline import run_baseline, run_thread_baseline
from weakincentives import AgentLoop, FunctionLoop, MarkdownSection, Prompt, PromptTemplate
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import (
    BASELINE,
    EvalLoop,
    EvalResult,
    Fingerprint,
    RunHandle,
    RunStore,
    Sample,
    exact_match,
    run_eval,
    submit_dataset,
)
from weakincentives.runtime import InMemoryMailbox

__all__ = [
    "AGENTS",
    "CONCURRENCY",
    "DRIVERS",
    "TARGETS",
    "Driver",
    "Job",
    "answer",
    "iter_samples",
    "main",
    "measure",
    "run_job",
]

CONCURRENCY = 10
"""Samples in flight for every W1 variant (the agent is instant: this is not about waiting)."""

TARGETS: dict[str, tuple[str, float]] = {
    # The task path (a plain function, results in the store) and the agent path (on an
    # async adapter), over plain asyncio writing the same lines.
    "runner_function_overhead_ms": ("<=", 0.025),
    "runner_agent_async_overhead_ms": ("<=", 0.08),
    "runner_agent_overhead_ms": ("<=", 0.5),
}

FINGERPRINT = Fingerprint(dataset_sha256="0" * 64, target="bench")
"""Fixed, so creating a run never shells out to git."""


@dataclass(frozen=True, kw_only=True)
class Job:
    """One timed run of a driver."""

    n: int
    """Samples to evaluate."""
    concurrency: int
    """Samples in flight at once."""
    root: Path
    """A fresh directory for the run store (or the baseline's results file)."""
    delay: float = 0.0
    """Seconds the agent waits before answering (W2); 0 answers at once."""
    agent: AgentLoop[Any, Any] | None = None
    """The agent of an agent driver, built before the clock starts (`run_job`): a user
    builds the loop once, then calls `evaluate()`; building the first one in a process
    is measured on its own by `bench.cold`."""


Driver = Callable[[Job], int]
"""Runs a job to the end and returns the number of results written."""


# -- the agent -----------------------------------------------------------------------


def answer(question: str) -> str:
    """The agent function every variant calls: `q17` -> `a17`."""
    return "a" + question[1:]


class SleepyAnswer:
    """`answer` after a real `time.sleep(delay)`: a latency-bound agent in a thread."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __call__(self, question: str) -> str:
        time.sleep(self.delay)
        return answer(question)


class AsyncAnswer:
    """`answer` as an `async def`, after `await asyncio.sleep(delay)` when `delay` > 0."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def __call__(self, question: str) -> str:
        if self.delay:
            await asyncio.sleep(self.delay)
        return answer(question)


def agent_function(delay: float) -> Callable[[str], str]:
    """The synchronous agent of a job: `answer`, or `answer` after a sleep."""
    return SleepyAnswer(delay) if delay else answer


def iter_samples(n: int) -> Iterator[Sample[str, str]]:
    """`q0`/`a0` ... as samples, made lazily."""
    for i in range(n):
        yield Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}")


@dataclass(frozen=True)
class Question:
    """The prompt-based agent's request."""

    text: str


@dataclass(frozen=True)
class Reply:
    """The prompt-based agent's structured output."""

    text: str


TEMPLATE = PromptTemplate[Reply](
    ns="bench",
    key="answer",
    sections=(
        MarkdownSection("Task", "task", "Answer the question with its answer code."),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    output_type=Reply,
)


class AnswerAgent(AgentLoop[Question, Reply]):
    """A production-shaped agent: one template, structured output."""

    def create_prompt(self, request: Question) -> Prompt[Reply]:
        return Prompt(TEMPLATE).bind(request)


class AnswerModel:
    """The `FunctionAdapter` model: reads the question from the prompt, calls `answer`."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __call__(self, request: ModelRequest) -> FunctionReply:
        if self.delay:
            time.sleep(self.delay)
        question = request.last_user_text().rsplit("\n", 1)[-1]
        return FunctionReply(output=Reply(answer(question)))


class AsyncAnswerModel:
    """`AnswerModel` as an `async def` (`await asyncio.sleep(delay)`): an async adapter."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def __call__(self, request: ModelRequest) -> FunctionReply:
        if self.delay:
            await asyncio.sleep(self.delay)
        question = request.last_user_text().rsplit("\n", 1)[-1]
        return FunctionReply(output=Reply(answer(question)))


def agent_loop(delay: float = 0.0) -> AnswerAgent:
    """The prompt-based agent on `FunctionAdapter`."""
    return AnswerAgent(adapter=FunctionAdapter(AnswerModel(delay)))


def async_agent_loop(delay: float = 0.0) -> AnswerAgent:
    """The prompt-based agent on `FunctionAdapter` with an async model (`is_async`)."""
    return AnswerAgent(adapter=FunctionAdapter(AsyncAnswerModel(delay)))


def iter_agent_samples(n: int) -> Iterator[Sample[Question, Reply]]:
    """The samples of the prompt-based agent."""
    for i in range(n):
        yield Sample(id=f"s{i}", input=Question(f"q{i}"), expected=Reply(f"a{i}"))


# -- drivers ---------------------------------------------------------------------------


def baseline_driver(job: Job) -> int:
    """Plain asyncio (an `asyncio.sleep` agent when the job has a delay)."""
    agent: Callable[[Any], Any] = AsyncAnswer(job.delay) if job.delay else answer
    return run_baseline(
        iter_samples(job.n), agent, job.root / "results.jsonl", concurrency=job.concurrency
    )


def evalloop_function_driver(job: Job) -> int:
    """`EvalLoop` + `InMemoryMailbox` + `FunctionLoop`, results appended to a `RunStore`."""
    loop: FunctionLoop[str, str] = FunctionLoop(agent_function(job.delay), name="answer")
    return run_evalloop(job, loop, iter_samples(job.n))


def evalloop_async_driver(job: Job) -> int:
    """`EvalLoop` with a `FunctionLoop` around an `async def` (tasks on one event loop)."""
    loop: FunctionLoop[str, str] = FunctionLoop(AsyncAnswer(job.delay), name="answer")
    return run_evalloop(job, loop, iter_samples(job.n))


def evalloop_agent_driver(job: Job) -> int:
    """`EvalLoop` + `InMemoryMailbox` + `AgentLoop` on `FunctionAdapter`, into a `RunStore`."""
    return run_evalloop(job, job.agent or agent_loop(job.delay), iter_agent_samples(job.n))


def evalloop_agent_async_driver(job: Job) -> int:
    """`EvalLoop` + the agent on an async model: samples as tasks on the worker's loop."""
    agent = job.agent or async_agent_loop(job.delay)
    return run_evalloop(job, agent, iter_agent_samples(job.n))


def run_evalloop(job: Job, loop: AgentLoop[Any, Any], samples: Iterator[Sample[Any, Any]]) -> int:
    """Submit, run the loop until drained, and append each result to a run as it arrives.

    A collector thread appends results while the loop runs (as a results consumer
    would), so a latency-bound run is not charged for collecting afterwards.
    """
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    requests: InMemoryMailbox[Any, EvalResult] = InMemoryMailbox(name="bench-requests")
    results: InMemoryMailbox[EvalResult, Any] = InMemoryMailbox(name="bench-results")
    sent = submit_dataset(samples, BASELINE, requests, reply_to=results, run_id=run_id)
    worker = EvalLoop(
        loop=loop, evaluator=exact_match, requests=requests, max_concurrent=job.concurrency
    )
    with RunStore(job.root).create(FINGERPRINT, run_id=run_id, expected_results=sent) as run:
        collector = threading.Thread(target=_collect, args=(results, run, sent))
        collector.start()
        worker.run(until_drained=True, wait_time_seconds=0)
        collector.join()
    return sent


def _collect(results: InMemoryMailbox[EvalResult, Any], run: RunHandle, expected: int) -> None:
    got = 0
    while got < expected:
        batch = results.receive(max_messages=10, wait_time_seconds=1.0)
        run.extend(message.body for message in batch)  # one write per batch
        for message in batch:
            message.acknowledge()
        got += len(batch)


def baseline_threads_driver(job: Job) -> int:
    """A plain thread pool running the synchronous agent (what threads can reach at best)."""
    return run_thread_baseline(
        iter_samples(job.n),
        agent_function(job.delay),
        job.root / "results.jsonl",
        concurrency=job.concurrency,
    )


def runner_function_driver(job: Job) -> int:
    """`run_eval` (the local runner) with a plain sync task function and a run store."""
    report = run_eval(
        iter_samples(job.n), agent_function(job.delay), exact_match,
        max_concurrent=job.concurrency, store=job.root,
    )  # fmt: skip
    return len(report.results)


def runner_async_driver(job: Job) -> int:
    """`run_eval` with an `async def` task function (awaited on the event loop)."""
    report = run_eval(
        iter_samples(job.n), AsyncAnswer(job.delay), exact_match,
        max_concurrent=job.concurrency, store=job.root,
    )  # fmt: skip
    return len(report.results)


def runner_agent_driver(job: Job) -> int:
    """`run_eval` with the `AgentLoop` on `FunctionAdapter` and a run store."""
    report = run_eval(
        iter_agent_samples(job.n), job.agent or agent_loop(job.delay), exact_match,
        max_concurrent=job.concurrency, store=job.root,
    )  # fmt: skip
    return len(report.results)


def runner_agent_async_driver(job: Job) -> int:
    """`run_eval` with the agent on an async model (awaited on the event loop)."""
    report = run_eval(
        iter_agent_samples(job.n), job.agent or async_agent_loop(job.delay), exact_match,
        max_concurrent=job.concurrency, store=job.root,
    )  # fmt: skip
    return len(report.results)


DRIVERS: dict[str, Driver] = {
    "baseline": baseline_driver,
    "baseline_threads": baseline_threads_driver,
    "evalloop_function": evalloop_function_driver,
    "evalloop_async": evalloop_async_driver,
    "evalloop_agent": evalloop_agent_driver,
    "evalloop_agent_async": evalloop_agent_async_driver,
    "runner_function": runner_function_driver,
    "runner_async": runner_async_driver,
    "runner_agent": runner_agent_driver,
    "runner_agent_async": runner_agent_async_driver,
}
"""Every driver, by name; `baseline` is the reference of every ratio."""

AGENTS: dict[str, Callable[[float], AgentLoop[Any, Any]]] = {
    "evalloop_agent": agent_loop,
    "evalloop_agent_async": async_agent_loop,
    "runner_agent": agent_loop,
    "runner_agent_async": async_agent_loop,
}
"""The agent each agent driver runs, by driver name (built by `run_job`, untimed)."""


# -- measuring -------------------------------------------------------------------------


def measure(
    chosen: dict[str, Driver], *, n: int, repeats: int, concurrency: int, delay: float = 0.0
) -> dict[str, list[float]]:
    """Run every driver `repeats` times, interleaved; return wall seconds per repeat.

    Each driver first runs once, untimed, on a few samples: one-time costs (imports,
    serializer builds) are not per-sample costs.
    """
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for name, driver in chosen.items():
        with tempfile.TemporaryDirectory(prefix=f"wink-bench-{name}-") as tmp:
            driver(Job(n=min(n, 20), concurrency=concurrency, root=Path(tmp)))
    for _ in range(repeats):
        for name, driver in chosen.items():
            times[name].append(run_job(name, driver, n=n, concurrency=concurrency, delay=delay))
    return times


def run_job(name: str, driver: Driver, *, n: int, concurrency: int, delay: float = 0.0) -> float:
    """Run `driver` once in a fresh directory; return its wall time in seconds.

    An agent driver's loop (`AGENTS`) is built first, outside the timed call.

    Raises:
        RuntimeError: the driver did not write one result per sample.
    """
    build = AGENTS.get(name)
    agent = build(delay) if build is not None else None
    with tempfile.TemporaryDirectory(prefix=f"wink-bench-{name}-") as tmp:
        job = Job(n=n, concurrency=concurrency, root=Path(tmp), delay=delay, agent=agent)
        gc.collect()
        start = time.perf_counter()
        written = driver(job)
        elapsed = time.perf_counter() - start
    if written != n:
        raise RuntimeError(f"{name} wrote {written} results for {n} samples")
    return elapsed


def main() -> dict[str, float]:
    n, repeats = (200, 1) if quick() else (5000, 5)
    chosen = dict(DRIVERS)
    print(f"W1 overhead: N={n}, instant agent, concurrency {CONCURRENCY}, best of {repeats}")
    times = measure(chosen, n=n, repeats=repeats, concurrency=CONCURRENCY)
    base_ms = min(times["baseline"]) * 1000.0 / n
    metrics = {"baseline_ms": base_ms}
    for name, runs in times.items():
        if name == "baseline":
            continue
        ms = min(runs) * 1000.0 / n
        metrics[f"{name}_ms"] = ms
        metrics[f"{name}_overhead_ms"] = ms - base_ms
        metrics[f"{name}_ratio"] = ms / base_ms
    return metrics
