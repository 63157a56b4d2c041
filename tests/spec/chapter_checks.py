"""Stand-ins and checks for the blocks of `guide-evaluation-chapter.md`."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from tests.spec import standins as s
from tests.spec.blocks import Env, all_blocks
from tests.spec.guide_checks import (
    EVAL_NAMES,
    check_judge_evaluator,
    production,
    reply_to,
    report_of,
    session_with,
    stop_production,
)
from weakincentives.evals import (
    BASELINE,
    Score,
    collect_results,
    exact_match,
)
from weakincentives.runtime.session import SessionView

C = "guide-evaluation-chapter.md"

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
    assert list(spec.parameters)[1:] == s.positional(s.exact_match) == ["output", "expected"]


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


def check_rollback(env: Env, ns: dict[str, Any]) -> None:
    """The block promoted nothing; with a degraded canary the same code raises."""
    block = next(b for b in all_blocks() if b.key == f"{C}#34")
    degraded = dict(ns, canary_report=report_of(env, fail="q1"))
    with pytest.raises(ns["RollbackError"], match="Canary performance degraded"):
        exec(block.code, degraded)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logging_names(env: Env) -> dict[str, Any]:
    handler, root = _Records(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(level)

    env.closers.append(restore)
    return {
        "logging": logging,
        "report": report_of(env),
        "deployment_version": "1.3.0",
        "records": handler.records,
    }


def check_logged(env: Env, ns: dict[str, Any]) -> None:
    del env
    [record] = [r for r in ns["records"] if r.getMessage() == "Eval run complete"]
    assert record.__dict__["pass_rate"] == 1.0 and record.__dict__["version"] == "1.3.0"


def redis_run_mailbox(env: Env) -> dict[str, Any]:
    from uuid import uuid4

    from weakincentives.contrib.mailbox import RedisMailbox

    return {
        "uuid4": uuid4,
        "RedisMailbox": RedisMailbox,
        "redis_client": redis_client(env)["STANDIN_REDIS"],
    }


def check_run_mailbox(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["run_id"].startswith("eval-run-") and ns["results_mailbox"].name == ns["run_id"]
    assert ns["results_mailbox"].approximate_count() == 0


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
