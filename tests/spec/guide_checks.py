"""Stand-ins and checks for the two user guides' blocks (shared by their tables)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.spec import standins as s
from tests.spec.blocks import Env
from weakincentives.evals import (
    BASELINE,
    Dataset,
    EvalReport,
    Sample,
    Score,
    adapt,
    all_of,
    all_tools_succeeded,
    collect_results,
    contains,
    exact_match,
    is_session_aware,
    llm_judge,
    submit_dataset,
    token_usage_under,
    tool_call_count,
    tool_called,
    tool_not_called,
)
from weakincentives.runtime.session import Session, SessionView

# -- shared stand-ins and checks ----------------------------------------------------------

EVAL_NAMES = {
    "exact_match": exact_match,
    "contains": contains,
    "all_of": all_of,
    "adapt": adapt,
    "llm_judge": llm_judge,
    "tool_called": tool_called,
    "tool_not_called": tool_not_called,
    "tool_call_count": tool_call_count,
    "all_tools_succeeded": all_tools_succeeded,
    "token_usage_under": token_usage_under,
    "submit_dataset": submit_dataset,
    "collect_results": collect_results,
    "Dataset": Dataset,
    "Path": Path,
}
"""Names a continuation block uses because an earlier block of the guide imported them."""


def evaluator_helpers(env: Env) -> dict[str, Any]:
    del env

    def my_custom_check(output: object, expected: object) -> Score:
        return Score(value=1.0, passed=True)

    def fuzzy_match(output: object, expected: object) -> Score:
        return Score(value=0.9, passed=True)

    return {"my_custom_check": my_custom_check, "fuzzy_match": fuzzy_match}


def session_with(*tools: str, tokens: int = 100) -> Session:
    """A session in which the agent called `tools` (each succeeding) and used `tokens`."""
    from weakincentives.runtime.session import PromptExecuted, TokenUsage, ToolInvoked
    from weakincentives.runtime.session import ToolResult as SessionToolResult

    session = Session()
    for i, name in enumerate(tools):
        session.dispatch(
            ToolInvoked(
                name=name,
                params={"query": "capital"},
                result=SessionToolResult(message="ok", value=None, success=True),
                success=True,
                call_id=f"c{i}",
                duration_ms=1.0,
            )
        )
    session.dispatch(
        PromptExecuted(
            prompt_ns="spec",
            prompt_key="qa",
            prompt_name="spec:qa",
            text="Paris",
            usage=TokenUsage(input_tokens=tokens, output_tokens=0),
        )
    )
    return session


def check_session_evaluator(*needs: str) -> Any:
    """The block's `evaluator` passes when the agent called `needs`, and fails without."""

    def check(env: Env, ns: dict[str, Any]) -> None:
        del env
        evaluator = ns["evaluator"]
        assert is_session_aware(evaluator)
        good = evaluator("Paris", "Paris", SessionView(session_with(*needs)))
        assert good.passed, good.reason
        bad = evaluator("Paris", "Paris", SessionView(session_with("fallback")))
        assert not bad.passed

    return check


def check_call_limit(env: Env, ns: dict[str, Any]) -> None:
    """Block 33's evaluator: the right answer with at most two expensive calls."""
    del env
    evaluator = ns["evaluator"]
    assert evaluator("4", "4", SessionView(session_with("expensive_api"))).passed
    assert not evaluator("4", "4", SessionView(session_with(*["expensive_api"] * 3))).passed
    assert not evaluator("5", "4", SessionView(session_with())).passed


def check_judge_evaluator(env: Env, ns: dict[str, Any]) -> None:
    del env
    evaluator = ns["evaluator"]
    assert evaluator("The capital is Paris.", "Paris").passed
    assert not evaluator("The capital is Lyon.", "Paris").passed


def check_report_printed(env: Env, ns: dict[str, Any]) -> None:
    report = ns["report"]
    assert report.total == report.passed_count > 0
    assert report.pass_rate == 1.0
    assert "Pass rate: 100.0%" in env.stdout()


def agent_and_mailboxes(env: Env) -> dict[str, Any]:
    return {
        "agent_loop": s.qa_loop(),
        "dataset": s.qa_dataset(),
        "eval_requests": s.mailbox(env, "eval-requests"),
    }


def stop_production(stop: threading.Event) -> None:
    """Stop the block's production thread (started unnamed) before its client closes."""
    stop.set()
    for thread in threading.enumerate():
        if thread.name.endswith("(run_production)"):
            thread.join(timeout=10)


def production(env: Env) -> dict[str, Any]:
    """The production side of the co-located worker examples: requests already queued."""
    stop = threading.Event()
    env.closers.append(lambda: stop_production(stop))
    names = agent_and_mailboxes(env)
    prod_requests = s.mailbox(env, "agent-requests")
    prod_requests.send("What is 2 + 2?")
    names["eval_requests"].send(
        s.EvalRequest(sample=s.qa_dataset(1).samples[0], experiment=BASELINE),
        reply_to=s.mailbox(env, "eval-results"),
    )
    return {
        **names,
        "prod_requests": prod_requests,
        "prod_results": s.mailbox(env, "agent-results"),
        "stop": stop,
        "EvalLoop": s.EvalLoop,
        "exact_match": exact_match,
    }


def check_production(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["eval_loop"].stats.succeeded == 1
    answered = ns["prod_results"]
    for _ in range(200):  # the production thread answers within a few hundred ms
        if answered.approximate_count():
            break
        threading.Event().wait(0.02)
    [message] = answered.receive()
    assert message.body.text == "4"


def production_edits(forever: str, run: str) -> tuple[tuple[str, str], ...]:
    return (
        ("    while True:\n", "    while not stop.is_set():\n"),
        ("prod_requests.receive()", "prod_requests.receive(wait_time_seconds=0.05)"),
        (forever, run),
    )


PRODUCTION_WHY = (
    "production loops never end: `while True` waits on a stop event set after the block, "
    "the in-memory receive long-polls 50 ms instead of spinning, and the eval worker makes "
    "one receive (`max_iterations=1`) instead of serving forever; one production request "
    "and one eval request are queued first, and the check sees both answered"
)


def bundles(env: Env) -> dict[str, Any]:
    names = agent_and_mailboxes(env)
    names["exact_match"] = exact_match
    return names


def check_bundles(env: Env, ns: dict[str, Any]) -> None:
    del env
    loop, requests = ns["eval_loop"], ns["eval_requests"]
    replies = s.mailbox(Env(tmp=Path()), "bundle-replies")
    requests.send(
        s.EvalRequest(sample=s.qa_dataset(1).samples[0], experiment=BASELINE), reply_to=replies
    )
    loop.run(until_drained=True, wait_time_seconds=0)
    [result] = [m.body for m in replies.receive()]
    assert result.bundle_path is not None and result.bundle_path.is_file()
    assert Path("eval_bundles").resolve() in result.bundle_path.resolve().parents


def bundle_report(env: Env) -> dict[str, Any]:
    requests = s.mailbox(env, "eval-requests")
    replies = s.mailbox(env, "eval-results")
    loop = s.bundle_eval_loop(env, s.qa_loop(), requests)
    for sample in s.qa_dataset(2):
        requests.send(s.EvalRequest(sample=sample, experiment=BASELINE), reply_to=replies)
    loop.run(until_drained=True, wait_time_seconds=0)
    return {"report": collect_results(replies, expected_count=2, timeout_seconds=5)}


def check_bundle_paths_printed(env: Env, ns: dict[str, Any]) -> None:
    del ns
    printed = env.stdout()
    assert printed.count("Bundle for q") == 2 and ".zip" in printed


def check_wink_commands(env: Env, ns: dict[str, Any]) -> None:
    """`wink query BUNDLE "SELECT * FROM logs"` runs on a real bundle; `wink debug` exists."""
    del ns
    from typer.testing import CliRunner

    from weakincentives.cli import app

    report = bundle_report(env)["report"]
    bundle = report.results[0].bundle_path
    assert bundle is not None
    runner = CliRunner()
    query = runner.invoke(app, ["query", str(bundle), "SELECT * FROM logs"], env={"COLUMNS": "200"})
    assert query.exit_code == 0, query.output
    debug = runner.invoke(app, ["debug", "--help"], env={"COLUMNS": "200"})
    assert debug.exit_code == 0, debug.output


def reply_to(env: Env) -> dict[str, Any]:
    return {
        "requests": s.mailbox(env, "requests"),
        "client_responses": s.mailbox(env, "client-123"),
        "AnalysisRequest": s.AnalysisRequest,
        "process": lambda body: f"answer to {body.query}",
    }


def check_one_reply(env: Env, ns: dict[str, Any]) -> None:
    del env
    replies = [m.body for m in ns["client_responses"].receive(max_messages=10)]
    assert len(replies) == 1
    assert ns["requests"].approximate_count() == 0


def report_of(env: Env, *, fail: str | None = None) -> EvalReport:
    del env
    return EvalReport(results=tuple(s.eval_results(s.qa_dataset(), fail=fail)))


# -- guide-evals.md ------------------------------------------------------------------------


def check_dataset_loaded(size: int) -> Any:
    def check(env: Env, ns: dict[str, Any]) -> None:
        del env
        dataset = ns["dataset"]
        assert len(dataset) == size
        assert all(isinstance(sample, Sample) for sample in dataset)

    return check


def qa_jsonl(env: Env) -> dict[str, Any]:
    s.write_qa_jsonl(env.tmp / "qa.jsonl")
    return {"Path": Path}


def check_my_evaluator(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["my_evaluator"]("The answer is PARIS", "paris").passed
    miss = ns["my_evaluator"]("Lyon", "Paris")
    assert not miss.passed and miss.reason == "Missing expected answer"


def check_builtins(last_passed: bool) -> Any:
    """The comments' verdicts hold; `evaluator` ends as `any_of(exact_match, fuzzy_match)`."""

    def check(env: Env, ns: dict[str, Any]) -> None:
        del env
        assert ns["score"].passed is last_passed
        assert ns["evaluator"]("hello", "Hello").value == 0.9  # fuzzy_match's 0.9 is the max
        assert ns["evaluator"]("hello", "Hello").passed

    return check


def check_eval_loop(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["eval_loop"].requests is ns["eval_requests"]


def check_submitted(env: Env, ns: dict[str, Any]) -> None:
    assert ns["count"] == len(ns["dataset"]) == ns["eval_requests"].approximate_count()
    assert f"Submitted {ns['count']} samples" in env.stdout()
