"""A task function for GSM8K-style word problems, calling an OpenAI-compatible model.

`wink eval run examples/solver.py:solve --dataset examples/gsm8k/test.jsonl \\
    --field input=question --field 'expected=answer|after:####' --evaluator exact_match`

A task function is the smallest target: the sample's input in, the output out. It calls
its model itself (here the `openai` SDK, configured by `OPENAI_BASE_URL`,
`OPENAI_API_KEY` and `OPENAI_MODEL`), so `--model` does not apply to it; an `AgentLoop`
target (`examples/my_agent.py`) also records its tool calls and tokens.
"""

from __future__ import annotations

import os

from openai import OpenAI

client = OpenAI()


def solve(question: str) -> str:
    """Ask the model to solve the problem and return the final number, as GSM8K writes it."""
    reply = client.chat.completions.create(
        model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        temperature=0,
        messages=[
            {
                "role": "system",
                "content": "Solve the problem step by step. End with a line `#### N`.",
            },
            {"role": "user", "content": question},
        ],
    )
    text = reply.choices[0].message.content or ""
    return text.rpartition("####")[2].strip().replace(",", "")
