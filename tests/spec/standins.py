"""Stand-ins for what the spec's blocks use but do not define: an agent, a judge model,
datasets, mailboxes, a Redis client, and the second design's outside modules.

Everything is real but small: agents are `AgentLoop`s over a `FunctionAdapter` whose
model is a Python function, mailboxes are real in-memory (or Redis) mailboxes, and the
Redis client talks to the test suite's throwaway redis-server.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.spec.blocks import Env
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest
from weakincentives.evals import (
    Dataset,
    EvalLoop,
    EvalLoopConfig,
    EvalRequest,
    EvalResult,
    Experiment,
    Sample,
    exact_match,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate
from weakincentives.runtime import AgentLoop, InMemoryMailbox

__all__ = [
    "ANSWERS",
    "QA_TEMPLATE",
    "AgentLoop",
    "AnalysisRequest",
    "EvalLoop",
    "EvalRequest",
    "FunctionAdapter",
    "QALoop",
    "alias_modules",
    "background_eval_worker",
    "bundle_eval_loop",
    "eval_results",
    "exact_match",
    "install_modules",
    "judge_reply",
    "mailbox",
    "off_by_one_model",
    "positional",
    "qa_dataset",
    "qa_loop",
    "read_rows",
    "spec_model",
    "write_qa_jsonl",
]

# -- models -------------------------------------------------------------------------------

ANSWERS = {
    "What is 2 + 2?": "4",
    "What is 2+2?": "4",
    "What is the capital of France?": "Paris",
    "What is 10 + 5?": "15",
    "Find all bugs": "no bugs",
}
"""Questions the stand-in agent answers, and its answers."""

_REFERENCE = re.compile(r"<reference>\n(.*?)\n</reference>", re.DOTALL)
_RESPONSE = re.compile(r"<response>\n(.*?)\n</response>", re.DOTALL)


def judge_reply(text: str) -> str | None:
    """The judge's JSON answer when `text` is a judge prompt (excellent iff it matches)."""
    reference, response = _REFERENCE.search(text), _RESPONSE.search(text)
    if reference is None or response is None:
        return None
    found = reference.group(1).strip().lower() in response.group(1).lower()
    return json.dumps(
        {
            "justification": f"The response {'gives' if found else 'lacks'} the reference.",
            "rating": "excellent" if found else "poor",
        }
    )


def spec_model(request: ModelRequest) -> FunctionReply | str:
    """The model behind every stand-in adapter: judges judge prompts, answers questions.

    `OpenAIAdapter(model=...)` in a block is replaced by a `FunctionAdapter` over this.
    """
    text = request.last_user_text()
    judged = judge_reply(text)
    if judged is not None:
        return judged
    for question, answer in ANSWERS.items():
        if question in text:
            return answer
    boxed = re.search(r"Problem: (.*)", text)
    if boxed is not None:  # the second design's math prompts: answer in \boxed{}
        return "The answer is \\boxed{" + _arithmetic(boxed.group(1)) + "}"
    return text


def off_by_one_model(request: ModelRequest) -> FunctionReply | str:
    """A broken release: numeric answers are one too high."""
    answer = spec_model(request)
    if isinstance(answer, str) and answer.isdigit():
        return str(int(answer) + 1)
    return answer


def _arithmetic(expression: str) -> str:
    a, op, b = re.findall(r"\d+|[-+*]", expression)[:3]
    x, y = int(a), int(b)
    return str(x + y if op == "+" else x - y if op == "-" else x * y)


# -- the agent under test --------------------------------------------------------------

QA_TEMPLATE = PromptTemplate[str](
    ns="spec",
    key="qa",
    sections=(
        MarkdownSection("Rules", "rules", "Answer the question in a few words."),
        MarkdownSection("Question", "question", "$question", role="user"),
    ),
)
"""The stand-in agent's prompt: a question in, a short answer out."""


class QALoop(AgentLoop[str, str]):
    """The stand-in agent: answers `ANSWERS`' questions through `spec_model`."""

    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(QA_TEMPLATE).bind(question=str(request))


def qa_loop(model: Callable[[ModelRequest], FunctionReply | str] = spec_model) -> QALoop:
    """A stand-in agent loop over `model`."""
    return QALoop(adapter=FunctionAdapter(model, model_name="spec-model"))


def qa_dataset(n: int = 3) -> Dataset[str, str]:
    """`n` (at most 3) questions the stand-in agent answers correctly."""
    questions = ["What is 2 + 2?", "What is the capital of France?", "What is 10 + 5?"][:n]
    return Dataset(
        samples=tuple(
            Sample(id=f"q{i + 1}", input=q, expected=ANSWERS[q]) for i, q in enumerate(questions)
        )
    )


def write_qa_jsonl(path: Path) -> Path:
    """The JSONL file `guide-evaluation-chapter.md` describes in its comment."""
    rows = [
        {"id": "q1", "input": "What is the capital of France?", "expected": "Paris"},
        {"id": "q2", "input": "What is 10 + 5?", "expected": "15"},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def mailbox(env: Env, name: str) -> InMemoryMailbox[Any, Any]:
    """An in-memory mailbox closed after the block."""
    box: InMemoryMailbox[Any, Any] = InMemoryMailbox(name=name)
    env.closers.append(box.close)
    return box


def background_eval_worker(
    env: Env,
    requests: Any,
    *,
    loop: AgentLoop[Any, Any] | None = None,
    evaluator: Callable[..., Any] = exact_match,
) -> EvalLoop:
    """An `EvalLoop` serving `requests` in a thread until the block ends.

    Blocks that submit and collect without running a worker (the canary, the progressive
    runs) leave the worker to "the eval worker" running elsewhere; this is it.
    """
    worker = EvalLoop(loop=loop or qa_loop(), evaluator=evaluator, requests=requests)
    thread = threading.Thread(
        target=lambda: worker.run(wait_time_seconds=0.05), name="spec-eval-worker", daemon=True
    )
    thread.start()

    def stop() -> None:
        worker.shutdown(timeout=10)
        thread.join(timeout=10)

    env.closers.append(stop)
    return worker


def eval_results(dataset: Dataset[str, str], *, fail: str | None = None) -> list[EvalResult]:
    """Results of running the stand-in agent on `dataset`; sample `fail` answered wrong."""
    loop = qa_loop()
    requests = InMemoryMailbox[Any, Any](name="spec-report-requests")
    replies = InMemoryMailbox[Any, Any](name="spec-report-replies")
    for sample in dataset:
        wrong = sample.id == fail
        body = Sample(
            id=sample.id, input=sample.input, expected="nope" if wrong else sample.expected
        )
        requests.send(
            EvalRequest(sample=body, experiment=Experiment(name="spec")), reply_to=replies
        )
    EvalLoop(loop=loop, evaluator=exact_match, requests=requests).run(
        until_drained=True, wait_time_seconds=0
    )
    results = [m.body for m in replies.receive(max_messages=10)]
    requests.close()
    replies.close()
    return results


def bundle_eval_loop(env: Env, agent_loop: AgentLoop[Any, Any], requests: Any) -> EvalLoop:
    """An `EvalLoop` that writes debug bundles under `./eval_bundles/`."""
    del env
    return EvalLoop(
        loop=agent_loop,
        evaluator=exact_match,
        requests=requests,
        config=EvalLoopConfig(debug_bundle_dir=Path("./eval_bundles/")),
    )


# -- outside modules the second design imports --------------------------------------------


def install_modules(env: Env, modules: dict[str, dict[str, Any]]) -> None:
    """Register stand-in modules (`configs.evals.math_base`) for the block's imports."""
    saved: dict[str, types.ModuleType | None] = {}
    for name, attrs in modules.items():
        saved[name] = sys.modules.get(name)
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module

    def restore() -> None:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous

    env.closers.append(restore)


def alias_modules(env: Env, aliases: dict[str, str]) -> None:
    """Make `import evals` mean `import weakincentives.evals` while the block runs."""
    import importlib

    saved = {name: sys.modules.get(name) for name in aliases}
    for name, target in aliases.items():
        sys.modules[name] = importlib.import_module(target)

    def restore() -> None:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous

    env.closers.append(restore)


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The second design's `evals.loaders.load_jsonl(path)`: raw rows of a JSONL file."""
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def positional(fn: Callable[..., Any]) -> list[str]:
    """Names of `fn`'s positional parameters (keyword-only options left out)."""
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds]


@dataclass(frozen=True)
class AnalysisRequest:
    """The reply-to examples' request body."""

    query: str
