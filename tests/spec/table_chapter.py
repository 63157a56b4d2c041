"""How each block of `guide-evaluation-chapter.md` runs (see `tests/spec/blocks.py`)."""

from __future__ import annotations

from tests.spec.blocks import Handling
from tests.spec.chapter_checks import (
    MERMAID,
    ab_testing,
    chapter_canary,
    check_custom_session_check,
    check_logged,
    check_loop_wraps,
    check_practice_judge,
    check_progressive,
    check_promoted,
    check_protocol,
    check_redis_collection,
    check_redis_production,
    check_regression_runs,
    check_report_views,
    check_rollback,
    check_run_mailbox,
    check_score,
    check_three_replies,
    check_triage,
    check_variant_wins,
    failing_report,
    logging_names,
    loop_standin,
    multiple_replies,
    plan_slice,
    practice_names,
    progressive,
    redis_client,
    redis_production,
    redis_run_mailbox,
    regression,
    report_names,
    submit_standins,
    two_reports,
)
from tests.spec.guide_checks import (
    PRODUCTION_WHY,
    check_builtins,
    check_call_limit,
    check_dataset_loaded,
    check_judge_evaluator,
    check_my_evaluator,
    check_one_reply,
    check_report_printed,
    check_session_evaluator,
    production_edits,
    qa_jsonl,
)

C = "guide-evaluation-chapter.md"

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
        "two stand-in reports and the reader's `RollbackError`; the check runs the block "
        "again with a degraded canary",
        setup=two_reports,
        check=check_rollback,
    ),
    Handling(
        f"{C}#35",
        "d1b72b8aab89",
        "with context",
        "`logging` import, a stand-in `report` and version",
        setup=logging_names,
        check=check_logged,
    ),
    Handling(
        f"{C}#36",
        "7b2a9056c947",
        "with context",
        "`uuid4`, `RedisMailbox` and a real `redis_client`",
        setup=redis_run_mailbox,
        check=check_run_mailbox,
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
