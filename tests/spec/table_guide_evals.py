"""How each block of `guide-evals.md` runs (see `tests/spec/blocks.py` for the kinds)."""

from __future__ import annotations

from tests.spec.blocks import Handling
from tests.spec.guide_checks import (
    PRODUCTION_WHY,
    agent_and_mailboxes,
    bundle_report,
    bundles,
    check_builtins,
    check_bundle_paths_printed,
    check_bundles,
    check_dataset_loaded,
    check_eval_loop,
    check_judge_evaluator,
    check_my_evaluator,
    check_one_reply,
    check_production,
    check_report_printed,
    check_session_evaluator,
    check_submitted,
    check_wink_commands,
    evaluator_helpers,
    production,
    production_edits,
    qa_jsonl,
    reply_to,
)

G = "guide-evals.md"

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
