"""Every sample ends in a result and every run ends by itself: exits, hangs, fail-fast.

In-process tests of `run_eval`, plus subprocesses where only a real process can tell
(a hung thread that would keep the interpreter alive after the run).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from weakincentives.evals import RunStore, Sample, Score, evaluate, exact_match, run_eval
from weakincentives.runtime import AgentLoop, FunctionLoop


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(n)]


def exits(question: str) -> str:
    if question == "q1":
        sys.exit(3)
    if question == "q2":
        raise KeyboardInterrupt  # user code, in a worker thread: not a Ctrl-C
    return question.upper()


async def exits_async(question: str) -> str:
    await anyio.sleep(0)
    return exits(question)


@pytest.mark.parametrize(
    "target",
    [exits, FunctionLoop(exits, name="exits"), exits_async],
    ids=["function", "function-loop", "async-function"],
)
@pytest.mark.parametrize("timeout", [None, 30.0], ids=["threads", "timed"])
def test_sys_exit_and_keyboard_interrupt_in_the_agent_are_error_results(
    target: Any, timeout: float | None
) -> None:
    report = run_eval(samples(4), target, exact_match, timeout=timeout)

    by_id = {r.sample_id: r for r in report.results}
    assert report.complete and len(report.results) == 4
    assert by_id["s1"].error_kind == "agent"
    assert by_id["s1"].error == "SystemExit: the code under test called sys.exit(3)"
    assert by_id["s2"].error_kind == "agent"
    assert (by_id["s2"].error or "").startswith("KeyboardInterrupt")
    assert by_id["s0"].passed and by_id["s3"].passed


def test_sys_exit_in_the_evaluator_is_an_evaluator_error() -> None:
    def evaluator(output: str, expected: str) -> Score:
        if output == "Q1":
            sys.exit("bye")
        return exact_match(output, expected)

    report = run_eval(samples(3), str.upper, evaluator)

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["s1"].error_kind == "evaluator"
    assert by_id["s1"].error == "SystemExit: the code under test called sys.exit('bye')"


def test_an_agent_loop_calling_sys_exit_is_an_error_result() -> None:
    class Exiting(AgentLoop[str, str]):
        def create_prompt(self, request: str) -> Any:
            sys.exit(2)

    from weakincentives.adapters import FunctionAdapter

    loop = Exiting(adapter=FunctionAdapter(lambda request: "x"))
    report = run_eval(samples(2), loop, exact_match)
    assert {r.error_kind for r in report.results} == {"agent"}


HUNG = """
import sys, threading
from weakincentives.evals import RunStore, Sample, exact_match, run_eval

def agent(question):
    if question == "q1":
        threading.Event().wait()  # never returns
    return question.upper()

samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"Q{i}") for i in range(4)]
report = run_eval(samples, agent, exact_match, timeout=0.5, store=RunStore(sys.argv[1]))
print(len(report.results), report.error_count, flush=True)
"""


@pytest.mark.slow
def test_a_hung_sync_agent_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    script = tmp_path / "hung.py"
    script.write_text(textwrap.dedent(HUNG))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "1"]


# -- fail fast --------------------------------------------------------------------------------


def down(question: str) -> str:
    raise ConnectionError("Connection refused: http://127.0.0.1:9/v1")


def test_a_run_whose_first_results_all_fail_alike_stops_early(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    report = run_eval(samples(200), down, exact_match, store=store, run_id="r", max_concurrent=2)

    assert not report.complete
    assert 10 <= len(report.results) < 200
    stopped = report.config["stopped"]
    assert "the first 10 results all failed with" in stopped
    assert "(agent): Connection refused: http://127.0.0.1:9/v1" in stopped
    assert store.open("r").manifest.status == "interrupted"


def test_mixed_failures_do_not_stop_a_run() -> None:
    def flaky(question: str) -> str:
        if int(question[1:]) % 2:
            raise ConnectionError(f"refused {question}")  # a different message each time
        return question.upper()

    report = run_eval(samples(40), flaky, exact_match)
    assert report.complete and len(report.results) == 40


@pytest.mark.parametrize(("max_errors", "ran"), [(3, 3), (0, 40)])
def test_max_errors_stops_after_that_many_errors(max_errors: int, ran: int) -> None:
    def half(question: str) -> str:
        if int(question[1:]) % 2:
            raise ValueError(f"bad {question}")
        return question.upper()

    report = run_eval(samples(40), half, exact_match, max_concurrent=1, max_errors=max_errors,
                      fail_fast=0)  # fmt: skip
    assert report.error_count == min(max_errors or 40, 20)
    if max_errors:
        assert not report.complete
        assert report.config["stopped"] == f"{max_errors} errors reached max_errors={max_errors}"
    else:
        assert report.complete and len(report.results) == ran


def test_fail_fast_can_be_turned_off() -> None:
    report = run_eval(samples(30), down, exact_match, fail_fast=0)
    assert report.complete and report.error_count == 30


def test_evaluate_stops_early_under_trio_too() -> None:
    import trio

    reports: list[Any] = []

    async def main() -> None:
        reports.append(await evaluate(samples(100), down, exact_match, max_concurrent=1))

    trio.run(main)
    assert not reports[0].complete and len(reports[0].results) == 10
