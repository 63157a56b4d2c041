"""The demo's evaluation against a real model: OpenAI-compatible, Anthropic or Gemini.

Same agent, same prompt override, same checks and experiments as `demo.py`; only the
adapters change: the agent and the judge run on `OpenAIAdapter` (`--provider openai`,
the default), `AnthropicAdapter` (`--provider anthropic`) or `GeminiAdapter`
(`--provider gemini`). Configure the provider with its usual variables and run it:

    export OPENAI_BASE_URL=http://localhost:11434/v1   # Ollama, vLLM, LM Studio... or unset
    export OPENAI_API_KEY=...                          # any string for local servers
    export OPENAI_MODEL=gpt-4o-mini                    # the agent's model
    export WINK_JUDGE_MODEL=gpt-4o-mini                # optional, defaults to the agent's
    .venv/bin/python examples/real_model.py --n 40

    export ANTHROPIC_API_KEY=... ANTHROPIC_MODEL=claude-haiku-4-5
    .venv/bin/python examples/real_model.py --provider anthropic --n 40

    export GEMINI_API_KEY=... GEMINI_MODEL=gemini-2.5-flash
    .venv/bin/python examples/real_model.py --provider gemini --n 40

At the end it prints what the run cost (agent and judge), from the package price table
(override a model with `--price MODEL=IN,OUT` in dollars per million tokens, or
`--prices FILE`); a model the table does not know is reported as unpriced.

The run is stored and resumable like any other: after Ctrl-C, run it again with
`--resume RUN_ID` and only the missing results are computed. The adapters describe
themselves: the run's manifest records the agent's and the judge's model, server and
temperature, and the same go into its fingerprint, so a run is never resumed against
another model (`wink eval report RUN` prints them in its header).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from calc_agent import Expected, Question, build_agent, careful_overrides, write_dataset
from calc_suite import EXPERIMENTS, make_evaluator, overrides_root
from rich.console import Console

from weakincentives.adapters.pricing import load_prices
from weakincentives.errors import ConfigurationError
from weakincentives.evals import Dataset, EvalReport, RunStore, cost_summary, run_eval
from weakincentives.runtime.session import TokenUsage

PROVIDERS = {"openai": "OPENAI", "anthropic": "ANTHROPIC", "gemini": "GEMINI"}
"""Provider -> the prefix of its environment variables (`<PREFIX>_MODEL`, ...)."""


def make_adapter(provider: str, model: str) -> Any:
    """The provider's adapter for `model`, at temperature 0 (other settings from the env)."""
    if provider == "anthropic":
        from weakincentives.adapters.anthropic import AnthropicAdapter

        return AnthropicAdapter(model, temperature=0.0)
    if provider == "gemini":
        from weakincentives.adapters.gemini import GeminiAdapter

        return GeminiAdapter(model, temperature=0.0)
    from weakincentives.adapters.openai import OpenAIAdapter

    return OpenAIAdapter(model, temperature=0.0)


def cost_line(report: EvalReport) -> str:
    """What the run cost (agent and judge), as every view of it shows it."""
    usage = sum((r.usage for r in report.results), TokenUsage())
    tokens = f"{usage.input_tokens} in ({usage.cached_tokens} cached), {usage.output_tokens} out"
    return f"Cost: {cost_summary(report.results).describe()}; agent tokens {tokens}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=sorted(PROVIDERS), default="openai")
    parser.add_argument("--n", type=int, default=40, help="questions (each runs twice)")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--resume", help="continue an interrupted run")
    parser.add_argument("--price", action="append", default=[], help="MODEL=IN,OUT per 1M")
    parser.add_argument("--prices", type=Path, help="a JSON or TOML price file")
    args = parser.parse_args(argv)

    prefix = PROVIDERS[args.provider]
    model = os.environ.get(f"{prefix}_MODEL")
    if not model:
        print(f"set {prefix}_MODEL (and {prefix}_API_KEY or {prefix}_BASE_URL); see the docstring")
        return 2
    try:
        prices = load_prices(args.prices, args.price)
    except ConfigurationError as exc:
        print(exc)
        return 2
    judge_name = os.environ.get("WINK_JUDGE_MODEL", model)
    path = write_dataset(args.runs_dir / f"calc-questions-{args.n}.jsonl", args.n)
    with ExitStack() as stack:
        agent_model = stack.enter_context(make_adapter(args.provider, model))
        judge_model = stack.enter_context(make_adapter(args.provider, judge_name))
        report = run_eval(
            Dataset.load(path, Question, Expected),
            build_agent(agent_model, overrides=careful_overrides(overrides_root())),
            make_evaluator(judge_model),
            experiments=EXPERIMENTS, max_concurrent=args.concurrency,
            store=RunStore(args.runs_dir), resume=args.resume, dataset_path=path, prices=prices,
        )  # fmt: skip
    console = Console()
    report.render(console, baseline="baseline")
    console.print(cost_line(report), highlight=False)
    console.print(f"Run directory: {args.runs_dir / (report.run_id or '')}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
