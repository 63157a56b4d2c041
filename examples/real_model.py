"""The demo's evaluation against a real model on any OpenAI-compatible endpoint.

Same agent, same prompt override, same checks and experiments as `demo.py`; only the
adapters change: the agent and the judge run on `OpenAIAdapter`. Configure it with the
usual variables and run it:

    export OPENAI_BASE_URL=http://localhost:11434/v1   # Ollama, vLLM, LM Studio... or unset
    export OPENAI_API_KEY=...                          # any string for local servers
    export OPENAI_MODEL=gpt-4o-mini                    # the agent's model
    export WINK_JUDGE_MODEL=gpt-4o-mini                # optional, defaults to OPENAI_MODEL
    .venv/bin/python examples/real_model.py --n 40

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
from pathlib import Path

from calc_agent import Expected, Question, build_agent, careful_overrides, write_dataset
from calc_suite import EXPERIMENTS, make_evaluator, overrides_root
from rich.console import Console

from weakincentives.adapters.openai import OpenAIAdapter
from weakincentives.evals import Dataset, RunStore, run_eval


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="questions (each runs twice)")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--resume", help="continue an interrupted run")
    args = parser.parse_args(argv)

    model = os.environ.get("OPENAI_MODEL")
    if not model:
        print("set OPENAI_MODEL (and OPENAI_BASE_URL / OPENAI_API_KEY); see the docstring")
        return 2
    judge_name = os.environ.get("WINK_JUDGE_MODEL", model)
    path = write_dataset(args.runs_dir / f"calc-questions-{args.n}.jsonl", args.n)
    with (
        OpenAIAdapter(model, temperature=0.0) as agent_model,
        OpenAIAdapter(judge_name, temperature=0.0) as judge_model,
    ):
        report = run_eval(
            Dataset.load(path, Question, Expected),
            build_agent(agent_model, overrides=careful_overrides(overrides_root())),
            make_evaluator(judge_model),
            experiments=EXPERIMENTS, max_concurrent=args.concurrency,
            store=RunStore(args.runs_dir), resume=args.resume, dataset_path=path,
        )  # fmt: skip
    console = Console()
    report.render(console, baseline="baseline")
    console.print(f"Run directory: {args.runs_dir / (report.run_id or '')}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
