"""A template for your own agent: question answering on an OpenAI-compatible model.

Copy it and change the prompt. The model comes from the usual variables
(`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`; see docs/providers.md), and
`wink eval run --model NAME` replaces it without editing the file.

- `build`: the target of `wink eval run examples/my_agent.py:build` (an `AgentLoop`).
- `judge`: an LLM judge to pass with `--evaluator examples/my_agent.py:judge`.
- `spec`: the worker factory of `wink worker examples/my_agent.py:spec --redis URL`.

Its dataset is `examples/qa.jsonl`: one JSON object per line with `id`, `input` (the
question) and `expected` (the answer).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from weakincentives import AgentLoop, MarkdownSection, Prompt, PromptTemplate
from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.contrib.cache import RedisResponseCache
from weakincentives.contrib.distributed import WorkerContext, WorkerSpec
from weakincentives.evals import exact_match, llm_judge

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")


@dataclass(frozen=True)
class Question:
    text: str


PROMPT = PromptTemplate[str](
    ns="examples",
    key="qa",
    sections=(
        MarkdownSection(
            "Instructions",
            "instructions",
            "Answer the question with the answer alone: no sentence, no punctuation.",
        ),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
)


class QAAgent(AgentLoop[str, str]):
    """The production agent: the question in, the model's answer out."""

    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(PROMPT).bind(Question(request))


def build() -> QAAgent:
    """The agent on the configured model, at temperature 0."""
    return QAAgent(adapter=OpenAIAdapter(MODEL, temperature=0.0))


judge = llm_judge(
    OpenAIAdapter(os.environ.get("WINK_JUDGE_MODEL", MODEL), temperature=0.0),
    "The response gives the same answer as the reference answer",
)


# --8<-- [start:spec]
def spec(context: WorkerContext) -> WorkerSpec:
    """What `wink worker` serves: the agent, its evaluator, the sample types."""
    adapter = OpenAIAdapter(MODEL, temperature=0.0, cache=RedisResponseCache(context.client))
    return WorkerSpec(
        loop=QAAgent(adapter=adapter), evaluator=exact_match, input_type=str, expected_type=str
    )


# --8<-- [end:spec]
