"""How each block of `evaluation-abstractions.md` (the second design) runs.

Its package `evals` is this project's `weakincentives.evals`; what it imports from outside
the project (`configs`, `rollouts`) is a stand-in module registered while the block runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

import weakincentives.evals as ours
from tests.spec import standins as s
from tests.spec.blocks import Env, Handling
from tests.spec.table_draft import readable_on
from weakincentives import Prompt
from weakincentives.adapters import FunctionAdapter
from weakincentives.runtime import AgentLoop
from weakincentives.runtime.session import ChatMessage

A = "evaluation-abstractions.md"

# -- the second design ------------------------------------------------------------------

MATH_ROWS = [
    {"problem": "2 + 3", "answer": "5", "level": 1},
    {"problem": "4 * 5", "answer": "20", "level": 2},
    {"problem": "9 - 4", "answer": "5", "level": 1},
    {"problem": "7 + 8", "answer": "16", "level": 2},  # the dataset's answer is wrong: 15
]


class MathLoop(AgentLoop[dict[str, Any], str]):
    """The stand-in math agent: one prompt per row; the model answers in `\\boxed{}`."""

    def create_prompt(self, request: dict[str, Any]) -> Prompt[str]:
        return Prompt(s.QA_TEMPLATE).bind(question=f"Problem: {request['problem']}")


def extract_boxed_answer(text: str) -> str:
    start = text.rindex("\\boxed{") + len("\\boxed{")
    return text[start : text.index("}", start)]


def normalized_equal(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def math_config() -> ours.EvalConfig:
    return ours.EvalConfig(target=MathLoop(adapter=FunctionAdapter(s.spec_model)), max_concurrent=2)


def second_design_modules(env: Env) -> None:
    """`evals` is this project's `weakincentives.evals`; outside modules are stand-ins."""
    s.alias_modules(
        env, {"evals": "weakincentives.evals", "evals.analysis": "weakincentives.evals.analysis"}
    )
    s.install_modules(
        env,
        {
            "evals.loaders": {"load_jsonl": s.read_rows},
            "configs": {},
            "configs.evals": {},
            "configs.evals.math_base": {"config": math_config()},
            "rollouts": {},
            "rollouts.training": {},
            "rollouts.training.datasets": {"DataBuffer": DataBuffer},
            "rollouts.training.backends": {"PyTorchTrainingBackend": TrainingBackend},
        },
    )


def math_script(env: Env) -> dict[str, Any]:
    second_design_modules(env)
    data = env.tmp / "data" / "math_500.jsonl"
    data.parent.mkdir()
    data.write_text("".join(json.dumps(r) + "\n" for r in MATH_ROWS), encoding="utf-8")
    argv = sys.argv
    sys.argv = ["baseline_01_01.py"]
    env.closers.append(lambda: setattr(sys, "argv", argv))
    return {
        "__name__": "__main__",
        "Trajectory": ours.Trajectory,
        "extract_boxed_answer": extract_boxed_answer,
        "normalized_equal": normalized_equal,
        "run_remote": None,
    }


def check_math_script(env: Env, ns: dict[str, Any]) -> None:
    report = ns["report"]
    assert report.total == 4 and report.summary["mean"] == 0.75
    assert report.config["experiment_name"] == "math_500_baseline"
    assert (env.tmp / "outputs" / "evals" / "math_500_baseline").is_file()  # a JSONL report
    assert "Score: 75.00%" in env.stdout()
    smaller = dataclasses.replace(ns["config"], max_samples=2)
    assert anyio.run(ours.evaluate, ns["load_dataset"](), smaller, ns["score_fn"]).total == 2


def check_analysis(env: Env, ns: dict[str, Any]) -> None:
    del ns
    printed = env.stdout()
    assert "=== math_500_baseline ===" in printed
    assert "Level 1: 100.00% (n=2)" in printed and "Level 2: 50.00% (n=2)" in printed
    assert "=== Failed Samples (1) ===" in printed and "correct: 0.0 (w=1.0)" in printed


class DataBuffer:
    """The RL loop's prompt buffer (a stand-in)."""

    def __init__(self, prompts: list[str]) -> None:
        self.prompts = prompts

    def get_prompts(self, n: int) -> list[str]:
        batch, self.prompts = self.prompts[:n], self.prompts[n:]
        return batch


class TrainingBackend:
    """The RL loop's trainer (a stand-in): records what it was asked to train on."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, list[float]]] = []

    def train_step(self, trajectories: list[Any], advantages: list[float]) -> float:
        self.steps.append((len(trajectories), advantages))
        return 0.1 * len(self.steps)


@dataclass(frozen=True)
class RLTrainingConfig:
    num_steps: int = 2
    batch_size: int = 2
    endpoint: str = "http://127.0.0.1:9/v1"
    environment_factory: Any = None


def rl_loop(env: Env) -> dict[str, Any]:
    second_design_modules(env)
    logged: list[tuple[str, float, int]] = []

    async def generate_rollouts(
        samples: list[Any], endpoint: str, environment_factory: Any
    ) -> list[Any]:
        del endpoint, environment_factory
        return [ours.Trajectory(output=sample.input["prompt"].upper()) for sample in samples]

    def compute_grpo_advantages(rewards: list[float]) -> list[float]:
        mean = sum(rewards) / len(rewards)
        return [r - mean for r in rewards]

    return {
        "Callable": Callable,
        "RLTrainingConfig": RLTrainingConfig,
        "generate_rollouts": generate_rollouts,
        "compute_grpo_advantages": compute_grpo_advantages,
        "log_metric": lambda name, value, step: logged.append((name, value, step)),
        "logged": logged,
    }


def check_rl_loop(env: Env, ns: dict[str, Any]) -> None:
    del env

    def score_fn(trajectory: ours.Trajectory, sample: ours.Sample[Any, Any]) -> ours.Score:
        upper = (
            trajectory.output == str(sample.input["prompt"]).upper() and sample.ground_truth is None
        )
        return ours.Score(
            metrics=(ours.Metric("upper", float(upper), weight=1.0), ours.Metric("len", 1.0))
        )

    backend = TrainingBackend()
    history = anyio.run(
        ns["run_rl_training"],
        backend,
        DataBuffer(["a", "b", "c", "d"]),
        score_fn,
        RLTrainingConfig(),
    )
    assert [h["mean_reward"] for h in history] == [1.0, 1.0]
    assert backend.steps == [(2, [0.0, 0.0]), (2, [0.0, 0.0])]
    assert [name for name, _, _ in ns["logged"]] == ["score/upper", "score/len"] * 4


def core_names(env: Env) -> dict[str, Any]:
    del env
    return {
        "dataclass": dataclass,
        "field": field,
        "Any": Any,
        "Path": Path,
        "Trajectory": ours.Trajectory,
    }


def check_core_types(env: Env, ns: dict[str, Any]) -> None:
    """The second design's core types, field by field, on ours (the same reward too)."""
    del env
    metrics = (ns["Metric"]("correct", 1.0, weight=2.0), ns["Metric"]("style", 0.25, weight=1.0))
    mine_metrics = tuple(ours.Metric(m.name, m.value, weight=m.weight) for m in metrics)
    assert ns["Score"](metrics=metrics).reward == ours.Score(metrics=mine_metrics).reward == 0.75
    readable_on(ns["Metric"], mine_metrics[0])
    readable_on(ns["Score"], ours.Score(metrics=mine_metrics))
    sample = ours.Sample(id="1", input={"q": "2+2"}, ground_truth="4", metadata={"level": 1})
    readable_on(ns["Sample"], sample)
    assert (sample.ground_truth, sample.expected) == ("4", "4")
    assert ours.Sample(id="2", input={}).ground_truth is None
    result = ours.EvalResult(
        sample_id="1", experiment_name="x", score=ours.Score(metrics=mine_metrics), latency_ms=3,
        input=sample.input, expected=sample.expected, metadata=sample.metadata,
    )  # fmt: skip
    assert result.sample == sample  # read back from what the result records
    spec_result_fields = {f.name for f in dataclasses.fields(ns["EvalResult"])}
    missing = sorted(n for n in spec_result_fields - {"trajectory"} if not hasattr(result, n))
    assert not missing, missing  # `trajectory`: see the contradictions
    readable_on(ns["EvalReport"], ours.EvalReport(results=(result,)))


def signature_names(env: Env) -> dict[str, Any]:
    del env
    return {
        "Callable": Callable, "Iterable": Iterable, "Sample": ours.Sample, "Message": ChatMessage,
        "Trajectory": ours.Trajectory, "Score": ours.Score, "EvalConfig": ours.EvalConfig,
        "Environment": ours.Environment, "EvalReport": ours.EvalReport,
    }  # fmt: skip


def check_signatures(env: Env, ns: dict[str, Any]) -> None:
    """Ours takes the spec's arguments in the spec's order, and calls `prepare_messages`."""
    del env
    spec = list(inspect.signature(ns["evaluate"]).parameters)
    mine = inspect.signature(ours.evaluate).parameters
    assert spec[3:] == ["prepare_messages", "environment_factory"]
    assert all(name in mine for name in spec[3:])
    seen: list[list[ChatMessage]] = []

    def prepare(sample: ours.Sample[Any, Any]) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=f"Say {sample.expected}")]

    def target(messages: list[ChatMessage]) -> str:
        seen.append(messages)
        return str(messages[-1].content).removeprefix("Say ")

    samples = [ours.Sample(id="a", input=None, expected="yes")]
    config = ours.EvalConfig(target=target)
    report = anyio.run(
        lambda: ours.evaluate(samples, config, ours.exact_match, prepare_messages=prepare)
    )
    assert report.pass_rate == 1.0 and seen == [[ChatMessage(role="user", content="Say yes")]]


def protocol_names(env: Env) -> dict[str, Any]:
    del env
    return {"runtime_checkable": runtime_checkable, "Protocol": Protocol}


def check_environment_protocol(env: Env, ns: dict[str, Any]) -> None:
    del env
    spec_methods = {n for n in vars(ns["Environment"]) if not n.startswith("_")}
    mine_methods = {n for n in vars(ours.Environment) if not n.startswith("_")}
    assert spec_methods == mine_methods == {"serialize", "deserialize"}


def check_calculator(env: Env, ns: dict[str, Any]) -> None:
    del env
    calculator = ns["CalculatorEnvironment"]()
    calculator._history = [("2+2", 4)]
    assert isinstance(calculator, ours.Environment)
    state = anyio.run(ours.serialize_environment, calculator)
    assert state["env_kind"] == "calculator" and state["version"] == "1.0.0"
    restored = anyio.run(ns["CalculatorEnvironment"].deserialize, state)
    assert restored._history == [("2+2", 4)]


ABSTRACTIONS: tuple[Handling, ...] = (
    Handling(
        f"{A}#1",
        "5aa7e08e13e5",
        "with context",
        "`evals` is `weakincentives.evals` (the second design's package name); `evals.loaders."
        "load_jsonl` reads raw rows; `configs.evals.math_base.config` is an `EvalConfig` whose "
        "target is a stand-in math agent; `data/math_500.jsonl` holds four rows (one with a "
        "wrong answer); `Trajectory`, `extract_boxed_answer`, `normalized_equal` are used "
        "without imports; the script runs as `__main__` without arguments",
        setup=math_script,
        check=check_math_script,
    ),
    Handling(
        f"{A}#2",
        "6756d292107f",
        "with context",
        "reads what block 1 saved under `outputs/evals/`; `evals.analysis` is "
        "`weakincentives.evals.analysis`",
        after=(1,),
        check=check_analysis,
    ),
    Handling(
        f"{A}#3",
        "01ea7edae1a5",
        "with context",
        "`rollouts.training` (DataBuffer, the trainer) and the rollout helpers are outside "
        "the project: stand-ins; `Callable` and `RLTrainingConfig` are used without imports; "
        "the check runs two training steps with a scorer written against our types",
        setup=rl_loop,
        check=check_rl_loop,
    ),
    Handling(
        f"{A}#4",
        "1bbdf112e666",
        "with context",
        "the file's imports (`dataclass`, `field`, `Any`, `Path`) and its `Trajectory`",
        setup=core_names,
        check=check_core_types,
    ),
    Handling(
        f"{A}#5",
        "df8e06e5d62c",
        "with context",
        "the types it names are this project's",
        setup=signature_names,
        check=check_signatures,
    ),
    Handling(
        f"{A}#6",
        "d0781bbdc4fd",
        "with context",
        "`runtime_checkable` and `Protocol` imports",
        setup=protocol_names,
        check=check_environment_protocol,
    ),
    Handling(f"{A}#7", "1a639521ec6f", "as written", check=check_calculator),
)
