"""The local runner under trio: the same `evaluate` runs on either event loop."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import anyio
import pytest
import trio

from tests.helpers import calculator_model, calculator_tool
from weakincentives.adapters import FunctionAdapter
from weakincentives.evals import (
    EvalResult,
    RunStore,
    Sample,
    Score,
    evaluate,
    exact_match,
    run_eval,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop

CALC = PromptTemplate[str](
    ns="tests",
    key="runner-trio-calc",
    sections=(MarkdownSection("Question", "question", "$question", role="user"),),
    tools=(calculator_tool(),),
)


class CalcLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(CALC).bind(question=request)


def calc(question: str) -> str:
    a, op, b = question.split()
    return str(int(a) * int(b) if op == "*" else int(a) + int(b))


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"c{i}", input=f"{i} * 3", expected=f"{i * 3}") for i in range(n)]


def test_trio_runs_a_sync_agent_loop_as_in_the_spec() -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))

    report = trio.run(functools.partial(evaluate, samples(6), loop, exact_match, epochs=2))

    assert report.total == 12 and report.pass_rate == 1.0
    assert all(r.tool_calls and r.tool_calls[0].name == "calculate" for r in report.results)


def test_trio_awaits_an_async_target_natively() -> None:
    async def multiply(question: str) -> str:
        await trio.sleep(0)  # a trio-native await: the target runs on trio's loop
        return calc(question)

    report = trio.run(functools.partial(evaluate, samples(5), multiply, exact_match))

    assert report.pass_rate == 1.0


def test_run_eval_can_pick_the_trio_backend() -> None:
    report = run_eval(samples(3), calc, exact_match, backend="trio")
    assert report.pass_rate == 1.0


def test_trio_timeout_abandons_the_stuck_thread() -> None:
    release = threading.Event()

    def agent(question: str) -> str:
        if question.startswith("1 "):
            release.wait(10)
        return calc(question)

    try:
        report = trio.run(functools.partial(evaluate, samples(3), agent, exact_match, timeout=0.05))
    finally:
        release.set()

    assert sorted((r.sample_id, r.error_kind) for r in report.results) == [
        ("c0", None),
        ("c1", "timeout"),
        ("c2", None),
    ]


def test_trio_cancellation_marks_the_stored_run_interrupted(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    seen: list[EvalResult] = []
    gate, calls, lock = threading.Event(), [0], threading.Lock()

    def score(output: str, expected: str) -> Score:
        return exact_match(output, expected)

    def held(question: str) -> str:
        with lock:
            calls[0] += 1
            hold = calls[0] > 3
        if hold:  # samples after the third wait until the run was cancelled
            gate.wait(10)
        return calc(question)

    async def main() -> None:
        with trio.CancelScope() as scope:

            def progress(result: EvalResult) -> None:
                seen.append(result)
                if len(seen) == 3:
                    scope.cancel()

            await evaluate(
                samples(50), held, score, store=store, run_id="cut",
                max_concurrent=2, progress=progress,
            )  # fmt: skip
        assert scope.cancelled_caught

    trio.run(main)
    gate.set()

    run = store.open("cut")
    assert run.status == "interrupted"
    assert 3 <= run.counts.results < 50


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_targets_work_on_both_backends(backend: str) -> None:
    async def triple(question: str) -> str:
        await anyio.sleep(0)
        return str(int(question.split()[0]) * 3)

    report = run_eval(samples(4), triple, exact_match, backend=backend)

    assert report.pass_rate == 1.0
