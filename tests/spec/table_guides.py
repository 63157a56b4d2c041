"""How each block of the two user guides runs (`guide-evals.md`, `guide-evaluation-chapter.md`).

Read with `tests/spec/blocks.py` (what the kinds mean) and `tests/spec/standins.py` (the
stand-ins). Each check asserts what the block's prose or comments promise.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.spec import standins as s
from tests.spec.blocks import Env, Handling
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

G = "guide-evals.md"
C = "guide-evaluation-chapter.md"

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


GUIDE_EVALS: tuple[Handling, ...] = (
    Handling(f"{G}#1", "4d129fa92a51", "not python", "an ASCII drawing of the composition"),
    Handling(
        f"{G}#2",
        "bc2ff16c6da8",
        "with context",
        "`Path` is used without an import; `qa.jsonl` is the file the chapter describes",
        setup=qa_jsonl,
        check=check_dataset_loaded(2),
    ),
    Handling(f"{G}#3", "d639cb537a23", "as written", check=check_my_evaluator),
    Handling(
        f"{G}#4",
        "020e56303774",
        "with context",
        "tagged `text` but Python; `my_custom_check` and `fuzzy_match` are the chapter's "
        "(`guide-evaluation-chapter.md#8`)",
        setup=evaluator_helpers,
        check=check_builtins(last_passed=True),
    ),
    Handling(
        f"{G}#5",
        "f594ed7f652e",
        "with context",
        "tagged `text` but Python; uses `contains` imported by block 4; `OpenAIAdapter` is "
        "a FunctionAdapter over the stand-in judge model",
        after=(4,),
        check=check_judge_evaluator,
    ),
    Handling(
        f"{G}#6",
        "3129370b179b",
        "with context",
        "uses `exact_match` imported by block 4",
        after=(4,),
        check=check_session_evaluator("search"),
    ),
    Handling(f"{G}#7", "2c8f88b9f23c", "as written", check=check_session_evaluator("search")),
    Handling(
        f"{G}#8",
        "c1469979786c",
        "with context",
        "`agent_loop` is the reader's AgentLoop (a stand-in)",
        setup=agent_and_mailboxes,
        check=check_eval_loop,
    ),
    Handling(
        f"{G}#9",
        "0d7c95cb0160",
        "with context",
        "continues block 8; `dataset` is the reader's dataset (three stand-in questions)",
        setup=agent_and_mailboxes,
        after=(8,),
        check=check_report_printed,
    ),
    Handling(
        f"{G}#10",
        "3c446d9e4ea0",
        "with context",
        "`dataset` and `eval_requests` as in blocks 8 and 9",
        setup=agent_and_mailboxes,
        check=check_submitted,
    ),
    Handling(
        f"{G}#11",
        "576032e55470",
        "adapted",
        PRODUCTION_WHY + "; `EvalLoop` and `exact_match` as imported by block 8",
        setup=production,
        edits=production_edits("eval_loop.run()\n", "eval_loop.run(max_iterations=1)\n"),
        check=check_production,
    ),
    Handling(
        f"{G}#12",
        "9af245d54086",
        "with context",
        "`agent_loop`, `exact_match` and `eval_requests` as in "
        "block 8; the check runs one sample and finds its bundle under ./eval_bundles/",
        setup=bundles,
        check=check_bundles,
    ),
    Handling(
        f"{G}#13",
        "a2511502b3ca",
        "with context",
        "`report` comes from a block-12 loop run on two stand-in samples",
        setup=bundle_report,
        check=check_bundle_paths_printed,
    ),
    Handling(
        f"{G}#14",
        "98d99ca5ad90",
        "not python",
        'shell commands; the check runs `wink query BUNDLE "SELECT * FROM logs"` on a real '
        "bundle and `wink debug --help` (the viewer itself is tested in tests/debug)",
        check=check_wink_commands,
    ),
    Handling(
        f"{G}#15",
        "4fbca772511d",
        "with context",
        "`requests`, `client_responses`, `AnalysisRequest` and `process` are the chapter's "
        "(`guide-evaluation-chapter.md#26`)",
        setup=reply_to,
        check=check_one_reply,
    ),
)


# -- guide-evaluation-chapter.md ------------------------------------------------------------

MERMAID = {
    1: "a0609b1d749c",
    4: "b91fa2e0334d",
    9: "e1eef99df6a3",
    11: "60d1e5bc49cd",
    14: "24d02bbae914",
    19: "0cc3d2d03271",
    21: "7141062e79b0",
    23: "591d890d045f",
    25: "e2dbab93ea05",
    27: "943bf6e8c2dd",
    30: "fd50a59b464a",
}
"""The chapter's Mermaid diagrams: block number -> sha."""


def check_score(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["score"] == Score(value=1.0, passed=True, reason="Correct answer found")


def check_protocol(env: Env, ns: dict[str, Any]) -> None:
    """Our evaluators satisfy the guide's `Evaluator` protocol: same call shape."""
    import inspect

    del env
    spec = inspect.signature(ns["Evaluator"].__call__)
    ours = inspect.signature(s.exact_match)
    assert list(spec.parameters)[1:] == list(ours.parameters) == ["output", "expected"]


def chapter_canary(env: Env) -> dict[str, Any]:
    requests = s.mailbox(env, "canary-eval-requests")
    results = s.mailbox(env, "canary-results")
    s.background_eval_worker(env, requests)
    promoted: list[bool] = []

    class RollbackError(Exception):
        pass

    return {
        "regression_dataset": s.qa_dataset(),
        "canary_eval_requests": requests,
        "canary_results": results,
        "canary_eval_results": results,
        "RollbackError": RollbackError,
        "promote_canary_to_production": lambda: promoted.append(True),
        "promoted": promoted,
    }


def check_promoted(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["report"].pass_rate == 1.0 and ns["promoted"] == [True]


def redis_client(env: Env) -> dict[str, Any]:
    """A client of the suite's throwaway redis-server; the block's queues are purged after."""
    from tests.helpers.redis_server import shared_redis

    client = shared_redis().client()
    env.closers.append(client.close)
    return {"STANDIN_REDIS": client}


def redis_production(env: Env) -> dict[str, Any]:
    from weakincentives.contrib.mailbox import RedisMailbox
    from weakincentives.runtime.mailbox import CompositeResolver, InMemoryMailboxFactory

    names = production(env)
    client = redis_client(env)["STANDIN_REDIS"]
    for name in ("agent-requests", "agent-results", "eval-requests"):
        box: RedisMailbox[Any, Any] = RedisMailbox(name=name, client=client)
        box.purge()
        env.closers.append(box.purge)
    prod = RedisMailbox[Any, Any](name="agent-requests", client=client)
    prod.send("What is 2 + 2?")
    replies = s.mailbox(env, "eval-results")
    resolver = CompositeResolver(
        registry={"eval-results": replies}, factory=InMemoryMailboxFactory()
    )
    evals = RedisMailbox[Any, Any](name="eval-requests", client=client, reply_resolver=resolver)
    evals.send(
        s.EvalRequest(sample=s.qa_dataset(1).samples[0], experiment=BASELINE),
        reply_to="eval-results",
    )
    env.closers.append(lambda: stop_production(names["stop"]))  # closers run last first
    return {"STANDIN_REDIS": client, "STANDIN_LOOP": names["agent_loop"], "stop": names["stop"]}


def stop_production(stop: threading.Event) -> None:
    """Stop the block's production thread (started unnamed) before its client closes."""
    stop.set()
    for thread in threading.enumerate():
        if thread.name.endswith("(run_production)"):
            thread.join(timeout=10)


def check_redis_production(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["prod_eval_loop"].stats.succeeded == 1
    for _ in range(200):
        if ns["prod_results"].approximate_count():
            break
        threading.Event().wait(0.02)
    [message] = ns["prod_results"].receive()
    assert message.body["text"] == "4"  # an untyped Redis mailbox delivers JSON values


def check_redis_collection(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["run_id"].startswith("eval-run-") and ns["collected"] == []
    assert ns["results_mailbox"].name == ns["run_id"]


def multiple_replies(env: Env) -> dict[str, Any]:
    names = reply_to(env)
    names["requests"].send(s.AnalysisRequest(query="Fix it"), reply_to=names["client_responses"])
    names["fix"] = "patched"
    return names


def check_three_replies(env: Env, ns: dict[str, Any]) -> None:
    del env
    bodies = [m.body for m in ns["client_responses"].receive(max_messages=10)]
    assert [type(b).__name__ for b in bodies] == ["Progress", "Progress", "Complete"]
    assert bodies[-1].result == "patched"


def practice_names(env: Env) -> dict[str, Any]:
    return {**EVAL_NAMES, "adapter": s.FunctionAdapter(s.spec_model)}


def check_practice_judge(env: Env, ns: dict[str, Any]) -> None:
    check_judge_evaluator(env, ns)


def two_reports(env: Env) -> dict[str, Any]:
    class RollbackError(Exception):
        pass

    report = report_of(env)
    return {"canary_report": report, "baseline_report": report, "RollbackError": RollbackError}


def logging_names(env: Env) -> dict[str, Any]:
    import logging

    return {"logging": logging, "report": report_of(env), "deployment_version": "1.3.0"}


def redis_run_mailbox(env: Env) -> dict[str, Any]:
    from uuid import uuid4

    from weakincentives.contrib.mailbox import RedisMailbox

    return {
        "uuid4": uuid4,
        "RedisMailbox": RedisMailbox,
        "redis_client": redis_client(env)["STANDIN_REDIS"],
    }


def failing_report(env: Env) -> dict[str, Any]:
    return {"report": report_of(env, fail="q2")}


def check_triage(env: Env, ns: dict[str, Any]) -> None:
    del ns
    printed = env.stdout()
    assert "Sample: q2" in printed and "Sample: q1" not in printed
    assert "Latency: " in printed and "Reason: " in printed


def regression(env: Env) -> dict[str, Any]:
    requests = s.mailbox(env, "eval-requests")
    results = s.mailbox(env, "results")
    jsonl = env.tmp / "regression.jsonl"
    jsonl.write_text('{"id": "r1", "input": "What is 2 + 2?", "expected": "4"}\n', encoding="utf-8")

    class RegressionError(Exception):
        pass

    return {
        **EVAL_NAMES,
        "eval_requests": requests,
        "results_mailbox": results,
        "eval_loop": s.EvalLoop(loop=s.qa_loop(), evaluator=exact_match, requests=requests),
        "RegressionError": RegressionError,
    }


def check_regression_runs(env: Env, ns: dict[str, Any]) -> None:
    del env
    ns["run_regression_tests"]()  # raises RegressionError below 95%
    assert ns["eval_loop"].stats.succeeded == 1


def ab_testing(env: Env) -> dict[str, Any]:
    return {
        **EVAL_NAMES,
        "EvalLoop": s.EvalLoop,
        "MyLoop": s.QALoop,
        "adapter_v1": s.FunctionAdapter(s.off_by_one_model),
        "adapter_v2": s.FunctionAdapter(s.spec_model),
        "bus": None,
        "evaluator": exact_match,
        "dataset": s.qa_dataset(),
        **{
            name: s.mailbox(env, name.replace("_", "-"))
            for name in (
                "baseline_requests",
                "variant_requests",
                "baseline_results",
                "variant_results",
            )
        },
    }


def check_variant_wins(env: Env, ns: dict[str, Any]) -> None:
    assert ns["variant_report"].pass_rate == 1.0
    assert ns["baseline_report"].pass_rate < 1.0  # the off-by-one release fails the sums
    assert "Variant wins!" in env.stdout()


def progressive(env: Env) -> dict[str, Any]:
    requests = s.mailbox(env, "eval-requests")
    return {
        "worker": s.background_eval_worker(env, requests),
        **EVAL_NAMES,
        "dataset": s.qa_dataset(),
        "eval_requests": requests,
        "results": s.mailbox(env, "results"),
    }


def check_progressive(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["worker"].stats.succeeded == 6  # the smoke test's 3, then the full run's 3


def plan_slice(env: Env) -> dict[str, Any]:
    from dataclasses import dataclass

    del env

    @dataclass(frozen=True)
    class Plan:
        steps: tuple[str, ...]

    return {"Plan": Plan}


def check_custom_session_check(env: Env, ns: dict[str, Any]) -> None:
    del env
    check, plan = ns["custom_session_check"], ns["Plan"]
    assert check("x", "x", SessionView(session_with("search"))).passed
    busy = check("x", "x", SessionView(session_with(*["search"] * 11)))
    assert not busy.passed and busy.reason == "Too many tool calls: 11 (max 10)"
    planned = session_with("search")
    planned.dispatch(plan(steps=("look",)))
    simple = check("x", "x", SessionView(planned))
    assert simple.value == 0.5 and not simple.passed


def report_names(env: Env) -> dict[str, Any]:
    results = s.mailbox(env, "results")
    for result in s.eval_results(s.qa_dataset(), fail="q3"):
        results.send(result)
    return {
        "collect_results": collect_results,
        "results_mailbox": results,
        "dataset": s.qa_dataset(),
    }


def check_report_views(env: Env, ns: dict[str, Any]) -> None:
    report = ns["report"]
    assert report.total_samples == 3 and len(report.passed_samples()) == 2
    printed = env.stdout()
    assert "Failed: q3" in printed and "Passed: q1" in printed


def check_loop_wraps(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["eval_loop"].requests is ns["eval_requests"]
    assert ns["main_loop"] is not Ellipsis


def loop_standin(env: Env) -> dict[str, Any]:
    del env
    return {"STANDIN_LOOP": s.qa_loop()}


def submit_standins(env: Env) -> dict[str, Any]:
    del env
    return {"STANDIN_DATASET": s.qa_dataset(1)}


CHAPTER: tuple[Handling, ...] = (
    *(Handling(f"{C}#{n}", sha, "not python", "a Mermaid diagram") for n, sha in MERMAID.items()),
    Handling(f"{C}#2", "8e721a72d391", "as written", check=check_dataset_loaded(1)),
    Handling(
        f"{C}#3",
        "508adc23473c",
        "with context",
        "continues block 2 (`Dataset`); `qa.jsonl` holds the two rows its comment shows",
        setup=qa_jsonl,
        after=(2,),
        check=check_dataset_loaded(2),
    ),
    Handling(f"{C}#5", "fd6b5d6e5b8f", "as written", check=check_score),
    Handling(
        f"{C}#6",
        "79efc0429543",
        "with context",
        "uses `Score` imported by block 5",
        after=(5,),
        check=check_my_evaluator,
    ),
    Handling(
        f"{C}#7",
        "572c95249616",
        "with context",
        "uses `Score` imported by block 5",
        after=(5,),
        check=check_protocol,
    ),
    Handling(
        f"{C}#8",
        "af724a7ec830",
        "with context",
        "uses `Score` imported by block 5",
        after=(5,),
        check=check_builtins(last_passed=False),
    ),
    Handling(
        f"{C}#10",
        "01bb33ea5464",
        "as written",
        "`OpenAIAdapter` is a FunctionAdapter over the stand-in judge model",
        check=check_judge_evaluator,
    ),
    Handling(
        f"{C}#12",
        "451011b1f5cb",
        "with context",
        "uses `all_of` imported by block 8",
        after=(8,),
        check=check_session_evaluator("search"),
    ),
    Handling(f"{C}#13", "e5848a8ac832", "as written", check=check_session_evaluator("search")),
    Handling(
        f"{C}#15",
        "03a3d843da22",
        "with context",
        "`Plan` is the reader's own slice type (a stand-in)",
        setup=plan_slice,
        check=check_custom_session_check,
    ),
    Handling(
        f"{C}#16",
        "6982e28744dd",
        "with context",
        "uses the session evaluators imported by block 12",
        after=(12,),
        check=check_session_evaluator("research"),
    ),
    Handling(
        f"{C}#17",
        "0e26cfcacddc",
        "adapted",
        "`main_loop: MainLoop[Any, str] = ...` is the reader's "
        "MainLoop: the `...` becomes the stand-in agent",
        setup=loop_standin,
        edits=(
            ("main_loop: MainLoop[Any, str] = ...", "main_loop: MainLoop[Any, str] = STANDIN_LOOP"),
        ),
        check=check_loop_wraps,
    ),
    Handling(
        f"{C}#18",
        "0fb561acd5e9",
        "adapted",
        "continues block 17; `eval_dataset = ...` becomes one stand-in sample (`max_iterations"
        '=1` is one receive, one sample); the block\'s new `InMemoryMailbox(name="eval-requests")` '
        "is block 17's loop's mailbox (with Redis, one name is one queue; in memory, two "
        "objects are two queues and the loop would never see the samples)",
        setup=submit_standins,
        after=(17,),
        edits=(
            (
                "eval_dataset: Dataset[str, str] = ...",
                "eval_dataset: Dataset[str, str] = STANDIN_DATASET",
            ),
            (
                "eval_requests_mailbox: InMemoryMailbox[Any, Any] = "
                'InMemoryMailbox(name="eval-requests")',
                "eval_requests_mailbox: InMemoryMailbox[Any, Any] = eval_requests",
            ),
        ),
        check=check_report_printed,
    ),
    Handling(
        f"{C}#20",
        "ff04d8752f7e",
        "with context",
        "`collect_results`, `results_mailbox` (three results, one failed) and `dataset` come "
        "from the blocks before; `report.failed_samples` is read both as a count and as a "
        "method (see the contradictions)",
        setup=report_names,
        check=check_report_views,
    ),
    Handling(
        f"{C}#22",
        "2a176be00cac",
        "adapted",
        PRODUCTION_WHY + "; `prod_redis_client = ...` is a client of the suite's redis-server, "
        "`prod_main_loop = ...` the stand-in agent",
        setup=redis_production,
        edits=(
            ("prod_redis_client: Any = ...", "prod_redis_client: Any = STANDIN_REDIS"),
            (
                "prod_main_loop: MainLoop[Any, str] = ...",
                "prod_main_loop: MainLoop[Any, str] = STANDIN_LOOP",
            ),
            *production_edits(
                "prod_eval_loop.run()  # Blocks", "prod_eval_loop.run(max_iterations=1)  # Blocks"
            ),
        ),
        check=check_redis_production,
    ),
    Handling(
        f"{C}#24",
        "46e38bd7a246",
        "with context",
        "the canary worker runs in the background (an EvalLoop thread); `canary_results` and "
        "`canary_eval_results` name one mailbox (the block sends to one, collects from the other)",
        setup=chapter_canary,
        check=check_promoted,
    ),
    Handling(f"{C}#26", "413c736d943d", "as written", check=check_one_reply),
    Handling(
        f"{C}#28",
        "c34d2c1245c1",
        "adapted",
        "`redis_client = ...` is a client of the suite's redis-server",
        setup=redis_client,
        edits=(("redis_client: Any = ...", "redis_client: Any = STANDIN_REDIS"),),
        check=check_redis_collection,
    ),
    Handling(
        f"{C}#29",
        "f93284a0428d",
        "with context",
        "`requests` holds one request with a reply mailbox, `fix` is the worker's result",
        setup=multiple_replies,
        check=check_three_replies,
    ),
    Handling(
        f"{C}#31",
        "2c3af4b7acf5",
        "with context",
        "`exact_match`, `llm_judge` and a judge `adapter` from before",
        setup=practice_names,
        check=check_practice_judge,
    ),
    Handling(
        f"{C}#32",
        "0bcb971a0310",
        "with context",
        "evaluators imported by the blocks before",
        setup=practice_names,
        check=check_session_evaluator("research"),
    ),
    Handling(
        f"{C}#33",
        "49f225579395",
        "with context",
        "evaluators imported by the blocks before",
        setup=practice_names,
        check=check_call_limit,
    ),
    Handling(
        f"{C}#34",
        "ce55cdab8ccf",
        "with context",
        "two stand-in reports and the reader's `RollbackError`",
        setup=two_reports,
    ),
    Handling(
        f"{C}#35",
        "d1b72b8aab89",
        "with context",
        "`logging` import, a stand-in `report` and version",
        setup=logging_names,
    ),
    Handling(
        f"{C}#36",
        "7b2a9056c947",
        "with context",
        "`uuid4`, `RedisMailbox` and a real `redis_client`",
        setup=redis_run_mailbox,
    ),
    Handling(
        f"{C}#37",
        "a5f1a8392a0d",
        "with context",
        "`report` with one failed sample (q2)",
        setup=failing_report,
        check=check_triage,
    ),
    Handling(
        f"{C}#38",
        "aa3a252586f0",
        "with context",
        "the names of the blocks before, `regression.jsonl`, an EvalLoop on `eval_requests`, "
        "the reader's `RegressionError`; the check calls the function",
        setup=regression,
        check=check_regression_runs,
    ),
    Handling(
        f"{C}#39",
        "81b8ada3846d",
        "adapted",
        "the block builds both EvalLoops but never runs them, so its `collect_results` would "
        "wait for results that never come: each loop runs until drained before collecting; "
        "`adapter_v1` is an off-by-one release, `adapter_v2` a correct one",
        setup=ab_testing,
        edits=(
            (
                "baseline_report = collect_results(",
                "baseline_eval.run(until_drained=True, wait_time_seconds=0)\n"
                "variant_eval.run(until_drained=True, wait_time_seconds=0)\n"
                "baseline_report = collect_results(",
            ),
        ),
        check=check_variant_wins,
    ),
    Handling(
        f"{C}#40",
        "1f94d0665665",
        "adapted",
        "the block `return`s at top level (a function body): it runs as one; the eval worker "
        "runs in the background",
        setup=progressive,
        as_function=True,
        check=check_progressive,
    ),
)
