"""The mailbox examples of the spec guides, run for real with FunctionAdapter agents.

Sources: `spec/guide-evals.md` ("Running Evaluations", "Production Deployment Pattern",
"Debug Bundles for Evaluations", "Reply-To Routing") and
`spec/guide-evaluation-chapter.md` ("Submit Samples and Collect Results", "Canary
Deployment", "Eval Run Collection with Reply-to", "Pattern: Regression Testing",
"Pattern: A/B Testing", "Pattern: Progressive Eval Runs"). The guides' code is kept
where it runs as written; `FunctionAdapter` stands in for `OpenAIAdapter`, in-memory
mailboxes for Redis, and a loop that the guides leave implicit is run explicitly.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import calculator_model, calculator_tool
from tests.runtime.workers import wait_for
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalLoop,
    EvalLoopConfig,
    EvalRequest,
    EvalResult,
    Experiment,
    Sample,
    collect_results,
    exact_match,
    submit_dataset,
    submit_experiments,
)
from weakincentives.prompt import LocalPromptOverridesStore, MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import (
    AgentLoop,
    AgentLoopRequest,
    AgentLoopResult,
    AgentLoopWorker,
    InMemoryMailbox,
    LoopGroup,
)
from weakincentives.runtime.mailbox import CompositeResolver, InMemoryMailboxFactory

RULES = "Answer arithmetic questions with the calculate tool."
ROUND_DOWN = "Round every answer down to a whole number."


@dataclass(frozen=True, slots=True)
class Question:
    text: str


QA = PromptTemplate[str](
    ns="guide",
    key="qa",
    sections=(
        MarkdownSection("Rules", "rules", RULES),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(calculator_tool(),),
)


class MyLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(QA).bind(Question(request))


def rules_model(request: ModelRequest) -> FunctionReply | str:
    """The calculator model, obeying a "round down" rule when the prompt has one."""
    reply = calculator_model(request)
    system = " ".join(m.content or "" for m in request.messages if m.role == "system")
    if request.tool_messages() and ROUND_DOWN in system and isinstance(reply, str):
        return f"{math.floor(float(reply)):g}"
    return reply


def off_by_one_model(request: ModelRequest) -> FunctionReply | str:
    """A broken release: every answer is one too high."""
    reply = calculator_model(request)
    if request.tool_messages() and isinstance(reply, str):
        return f"{float(reply) + 1:g}"
    return reply


QUESTIONS = {"2 + 2": "4", "7 / 2": "3.5", "9 / 3": "3", "5 / 4": "1.25"}


def make_dataset() -> Dataset[str, str]:
    return Dataset(
        samples=tuple(
            Sample(id=f"q{i}", input=f"What is {q}?", expected=a)
            for i, (q, a) in enumerate(QUESTIONS.items())
        )
    )


class RollbackError(Exception):
    """The guides' canary failure."""


# -- guide-evals.md: Running Evaluations -----------------------------------------------


def test_running_evaluations_submit_with_reply_to_run_collect_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_loop = MyLoop(adapter=FunctionAdapter(rules_model))
    dataset = make_dataset()

    # Create mailboxes for requests and results
    eval_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-requests")
    eval_results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-results")

    # Create EvalLoop wrapping your AgentLoop
    eval_loop = EvalLoop(
        loop=agent_loop,
        evaluator=exact_match,
        requests=eval_requests,
    )

    # Submit samples with reply_to for result routing
    experiment = Experiment(name="my-eval")
    for sample in dataset:
        eval_requests.send(
            EvalRequest(sample=sample, experiment=experiment),
            reply_to=eval_results,
        )

    # Run the evaluation worker
    eval_loop.run(max_iterations=len(dataset))

    # Collect results into a report
    report = collect_results(eval_results, expected_count=len(dataset))

    # Inspect the report
    print(f"Pass rate: {report.pass_rate:.1%}")
    print(f"Mean score: {report.mean_score:.2f}")
    print(f"Mean latency: {report.mean_latency_ms:.0f}ms")

    # Review failures
    for eval_result in report.results:
        if not eval_result.score.passed:
            print(f"Failed: {eval_result.sample_id} - {eval_result.score.reason}")

    out = capsys.readouterr().out
    assert "Pass rate: 100.0%" in out and "Mean score: 1.00" in out and "Failed" not in out
    assert report.complete and {r.experiment_name for r in report.results} == {"my-eval"}


def test_bulk_submission_without_result_collection() -> None:
    eval_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-requests")
    dataset = make_dataset()

    # Submit all samples (results are not collected unless you provide a reply mailbox)
    count = submit_dataset(dataset, BASELINE, eval_requests)

    assert count == len(dataset) == eval_requests.approximate_count()


# -- guide-evaluation-chapter.md: Submit Samples and Collect Results ------------------


def test_chapter_submit_dataset_with_reply_to_and_one_iteration() -> None:
    eval_dataset = make_dataset()
    eval_requests_mailbox: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-requests")
    eval_results_mailbox: InMemoryMailbox[EvalResult, None] = InMemoryMailbox(name="eval-results")
    # One iteration receives up to max_concurrent samples: the whole (small) dataset.
    eval_loop = EvalLoop(
        loop=MyLoop(adapter=FunctionAdapter(rules_model)),
        evaluator=exact_match,
        requests=eval_requests_mailbox,
        max_concurrent=len(eval_dataset),
    )

    # Submit all samples to the requests mailbox
    submit_dataset(
        eval_dataset,
        eval_requests_mailbox,
        reply_to=eval_results_mailbox,  # Results go here
    )

    # Run the evaluation worker
    eval_loop.run(max_iterations=1)

    # Collect results into a report
    report = collect_results(eval_results_mailbox, expected_count=len(eval_dataset))

    assert report.complete and report.pass_rate == 1.0
    assert report.failed_samples() == ()
    assert {r.experiment_name for r in report.results} == {"baseline"}


# -- Pattern: Regression Testing, Canary Deployment, Progressive Eval Runs ------------


@pytest.mark.parametrize(("model", "ships"), [(rules_model, True), (off_by_one_model, False)])
def test_regression_gate_and_canary(model: Any, ships: bool, tmp_path: Path) -> None:
    (tmp_path / "regression.jsonl").write_text(
        "\n".join(
            f'{{"id": "q{i}", "input": "What is {q}?", "expected": "{a}"}}'
            for i, (q, a) in enumerate(QUESTIONS.items())
        ),
        encoding="utf-8",
    )
    canary_eval_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="canary-requests")
    canary_results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="canary-results")
    eval_loop = EvalLoop(
        loop=MyLoop(adapter=FunctionAdapter(model)),
        evaluator=exact_match,
        requests=canary_eval_requests,
        max_concurrent=4,
    )

    def run_regression_tests() -> None:
        dataset = Dataset.load(tmp_path / "regression.jsonl", str, str)
        # Phase 1: quick smoke test
        smoke_test = Dataset(samples=dataset.samples[:2])
        submit_dataset(smoke_test, canary_eval_requests, reply_to=canary_results)
        eval_loop.run(max_iterations=1)
        smoke_report = collect_results(canary_results, expected_count=len(smoke_test))
        if smoke_report.pass_rate < 0.8:
            raise RollbackError(f"Smoke test failed: {smoke_report.pass_rate:.1%} pass rate")
        # Phase 2: full regression
        submit_dataset(dataset, canary_eval_requests, reply_to=canary_results)
        eval_loop.run(max_iterations=1)
        report = collect_results(canary_results, expected_count=len(dataset))
        if report.pass_rate < 0.95:
            raise RollbackError(f"Canary failed: {report.pass_rate:.1%} pass rate")

    if ships:
        run_regression_tests()
    else:
        with pytest.raises(RollbackError, match=r"Smoke test failed: 0\.0% pass rate"):
            run_regression_tests()
    assert canary_eval_requests.approximate_count() == 0


# -- A/B testing -----------------------------------------------------------------------


def test_ab_test_with_an_overrides_tag_compared_in_one_report(tmp_path: Path) -> None:
    store = LocalPromptOverridesStore(tmp_path / "overrides")
    store.store(
        "guide",
        "qa",
        "round-down",
        section_key="rules",
        original=RULES,
        body=f"{RULES} {ROUND_DOWN}",
    )
    treatment = Experiment(name="round-down", overrides_tag="round-down")
    loop = MyLoop(adapter=FunctionAdapter(rules_model), overrides_store=store)
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-requests")
    results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-results")
    dataset = make_dataset()
    submit_experiments(dataset, [BASELINE, treatment], requests, reply_to=results)

    EvalLoop(loop=loop, evaluator=exact_match, requests=requests, max_concurrent=4).run(
        until_drained=True, wait_time_seconds=0
    )
    report = collect_results(results, expected_count=2 * len(dataset))

    comparison = report.compare_experiments("baseline", "round-down")
    assert (comparison.baseline_pass_rate, comparison.treatment_pass_rate) == (1.0, 0.5)
    assert comparison.pass_rate_delta == -0.5
    assert sorted(flip.sample_id for flip in comparison.regressions) == ["q1", "q3"]
    rounded = report.experiment("round-down").results[0]
    assert ROUND_DOWN in (rounded.messages[0].content or "")  # the override was rendered
    assert ROUND_DOWN not in (report.experiment("baseline").results[0].messages[0].content or "")


def test_ab_test_with_two_loops_as_the_chapter_writes_it() -> None:
    bus = object()
    adapter_v1 = FunctionAdapter(off_by_one_model)
    adapter_v2 = FunctionAdapter(rules_model)
    evaluator = exact_match
    dataset = make_dataset()
    baseline_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="baseline-requests")
    variant_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="variant-requests")
    baseline_results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="baseline-results")
    variant_results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="variant-results")

    # Baseline
    baseline_loop = MyLoop(adapter=adapter_v1, bus=bus)
    baseline_eval = EvalLoop(loop=baseline_loop, evaluator=evaluator, requests=baseline_requests)

    # Variant
    variant_loop = MyLoop(adapter=adapter_v2, bus=bus)
    variant_eval = EvalLoop(loop=variant_loop, evaluator=evaluator, requests=variant_requests)

    # Run both
    submit_dataset(dataset, baseline_requests, reply_to=baseline_results)
    submit_dataset(dataset, variant_requests, reply_to=variant_results)
    group = LoopGroup([baseline_eval, variant_eval])  # the guide leaves the workers implicit
    group.start()
    try:
        baseline_report = collect_results(baseline_results, expected_count=len(dataset))
        variant_report = collect_results(variant_results, expected_count=len(dataset))
    finally:
        assert group.shutdown(timeout=5)

    # Compare
    assert variant_report.pass_rate > baseline_report.pass_rate  # "Variant wins!"
    assert (baseline_report.pass_rate, variant_report.pass_rate) == (0.0, 1.0)


# -- Production Deployment Pattern: AgentLoop and EvalLoop side by side ---------------


def test_production_requests_are_answered_while_evals_run() -> None:
    evals_may_finish = threading.Event()
    lock = threading.Lock()
    evals_started = 0

    def shared_model(request: ModelRequest) -> FunctionReply | str:
        nonlocal evals_started
        if request.turn == 0 and "eval" in request.last_user_text():
            with lock:
                evals_started += 1
            assert evals_may_finish.wait(10), "production was never answered"
        return calculator_model(request)

    agent_loop = MyLoop(adapter=FunctionAdapter(shared_model))  # one agent, two workers
    prod_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="agent-requests")
    prod_results: InMemoryMailbox[AgentLoopResult[str], None] = InMemoryMailbox(
        name="agent-results"
    )
    eval_requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-requests")
    eval_results: InMemoryMailbox[Any, Any] = InMemoryMailbox(name="eval-results")
    dataset = Dataset(
        samples=tuple(
            Sample(id=f"e{i}", input=f"eval: {i} * 2", expected=f"{2 * i}") for i in range(4)
        )
    )
    submit_dataset(dataset, eval_requests, reply_to=eval_results)

    eval_loop = EvalLoop(
        loop=agent_loop, evaluator=exact_match, requests=eval_requests, max_concurrent=2
    )
    production = AgentLoopWorker(agent_loop, requests=prod_requests, results=prod_results)
    group = LoopGroup([production, eval_loop], watchdog_timeout=30)
    group.start()
    try:
        wait_for(lambda: evals_started == 2)  # evals are running (and holding on)
        for question in ("3 * 3", "10 - 4", "1 + 1"):
            prod_requests.send(AgentLoopRequest(f"What is {question}?"))
        wait_for(lambda: prod_results.approximate_count() == 3)
        assert group.ready() and eval_results.approximate_count() == 0
        evals_may_finish.set()
        report = collect_results(eval_results, expected_count=len(dataset), timeout_seconds=10)
    finally:
        evals_may_finish.set()
        assert group.shutdown(timeout=5)

    answers = sorted(str(m.body.text) for m in prod_results.receive(max_messages=10))
    assert answers == ["2", "6", "9"]
    assert report.complete and report.pass_rate == 1.0


# -- Eval Run Collection with Reply-to, Debug Bundles ---------------------------------


def test_distributed_workers_reply_to_a_run_mailbox_resolved_by_name(tmp_path: Path) -> None:
    factory: InMemoryMailboxFactory[Any] = InMemoryMailboxFactory()
    resolver: CompositeResolver[Any] = CompositeResolver(registry={}, factory=factory)
    requests: InMemoryMailbox[Any, Any] = InMemoryMailbox(
        name="eval-requests", reply_resolver=resolver
    )
    run_id = "eval-run-1"
    together = threading.Barrier(2, timeout=10)  # each pair of samples needs both workers

    def paired_model(request: ModelRequest) -> FunctionReply | str:
        if request.turn == 0:
            together.wait()
        return calculator_model(request)

    loop = MyLoop(adapter=FunctionAdapter(paired_model))
    workers = [
        EvalLoop(
            loop=loop,
            evaluator=exact_match,
            requests=requests,
            name=f"worker-{n}",
            config=EvalLoopConfig(debug_bundle_dir=tmp_path / "eval_bundles"),
        )
        for n in (1, 2)
    ]
    dataset = make_dataset()
    submit_dataset(dataset, requests, reply_to=run_id, run_id=run_id)  # a name, resolved
    group = LoopGroup(workers)
    group.start()
    try:
        report = collect_results(
            factory.create(run_id), len(dataset), run_id=run_id, timeout_seconds=10
        )
    finally:
        assert group.shutdown(timeout=5)

    assert report.complete and report.pass_rate == 1.0
    assert [w.stats.succeeded for w in workers] == [2, 2]
    for result in report.results:
        if result.bundle_path:
            assert result.bundle_path.parent == tmp_path / "eval_bundles" / str(result.request_id)
    assert all(r.bundle_path is not None for r in report.results)
