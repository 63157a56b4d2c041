"""Offline demo: run the example agent on a few questions and show what the session saw."""

from __future__ import annotations

from calc_agent import CalcAgent, Question, offline_adapter
from rich.console import Console
from rich.table import Table

from weakincentives import ToolInvoked
from weakincentives.runtime import PromptExecuted


def main() -> None:
    console = Console()
    agent = CalcAgent(adapter=offline_adapter())
    table = Table(title="calc_agent on FunctionAdapter (offline)")
    for col in ("question", "answer", "tool calls", "tokens in/out"):
        table.add_column(col)
    for text in ("What is 17 * 23 + 4?", "What is 12 km in mi?", "What is 100 c in f?"):
        response, session = agent.execute(Question(text))
        calls = session[ToolInvoked].all()
        usage = session[PromptExecuted].latest().usage  # type: ignore[union-attr]
        answer = response.output
        table.add_row(
            text,
            f"{answer.value:g} {answer.unit}".strip() if answer else "-",
            "\n".join(f"{c.name}({dict(c.params)}) -> {c.result.message}" for c in calls) or "-",
            f"{usage.input_tokens}/{usage.output_tokens}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
