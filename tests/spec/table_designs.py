"""How each block of the design documents runs (`EVALS.md`, `EVALS-mainloop-draft.md`,
`evaluation-abstractions.md`).

The older draft and the second design mostly *define* things (their own `Sample`,
`Score`, `run_eval`, ...). Those blocks run as written (PEP 695 generics rewritten for
Python 3.11), and their check compares the spec's definition with this project's public
one: the same field names are readable, and the same inputs give the same results.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import anyio

import weakincentives.evals as ours
from tests.spec import standins as s
from tests.spec.blocks import Env, Handling
from weakincentives import MainLoop, Prompt, PromptTemplate
from weakincentives.adapters import FunctionAdapter, ProviderAdapter
from weakincentives.runtime import AgentLoop
from weakincentives.runtime.session import ChatMessage, Session, TokenUsage

D = "EVALS-mainloop-draft.md"
A = "evaluation-abstractions.md"
E = "EVALS.md"

PEP695 = "PEP 695 generics (`[T]` after the name) are Python 3.12; rewritten with TypeVars"

# -- the older draft ----------------------------------------------------------------------


def draft_names(env: Env) -> dict[str, Any]:
    """What the draft's blocks use without importing it (their file's imports)."""
    del env
    return {
        "dataclass": dataclass,
        "field": field,
        "Callable": Callable,
        "Path": Path,
        "Generic": Generic,
        "time": time,
        "PromptTemplate": PromptTemplate,
        "Prompt": Prompt,
        "ProviderAdapter": ProviderAdapter,
        "MainLoop": MainLoop,
        "STANDIN_JUDGE_TEMPLATE": ours.JUDGE_TEMPLATE,
        **{name: TypeVar(name) for name in ("InputT", "ExpectedT", "OutputT", "I", "O", "E", "T")},
    }


def readable_on(spec_cls: type, instance: object) -> None:
    """Every field, property and method the spec's class has is readable on `instance`."""
    names = [n for n in vars(spec_cls) if not n.startswith("_")]
    names += (
        [f.name for f in dataclasses.fields(spec_cls)] if dataclasses.is_dataclass(spec_cls) else []
    )
    missing = sorted({n for n in names if not hasattr(instance, n)})
    assert not missing, f"{type(instance).__name__} lacks the spec's {missing}"


def check_sample(env: Env, ns: dict[str, Any]) -> None:
    del env
    spec = ns["Sample"](id="1", input="2+2", expected="4")
    mine = ours.Sample(id="1", input="2+2", expected="4")
    readable_on(ns["Sample"], mine)
    assert (mine.id, mine.input, mine.expected) == (spec.id, spec.input, spec.expected)


def check_tuple_dataset(env: Env, ns: dict[str, Any]) -> None:
    """A plain tuple of samples is a dataset: the runner takes it as it is."""
    del env
    dataset = (ours.Sample(id="a", input="hi", expected="HI"),)
    assert ns["Dataset"].__origin__ is tuple
    assert ours.run_eval(dataset, str.upper, ours.exact_match).pass_rate == 1.0


def check_load_jsonl(env: Env, ns: dict[str, Any]) -> None:
    path = s.write_qa_jsonl(env.tmp / "qa.jsonl")
    spec_params = list(inspect.signature(ns["load_jsonl"]).parameters)
    assert list(inspect.signature(ours.load_jsonl).parameters) == spec_params
    loaded = ours.load_jsonl(path, str, str)
    assert [sample.expected for sample in loaded] == ["Paris", "15"]


def check_score(env: Env, ns: dict[str, Any]) -> None:
    del env
    spec, mine = ns["Score"](value=0.5, passed=False), ours.Score(value=0.5, passed=False)
    readable_on(ns["Score"], mine)
    assert (mine.value, mine.passed, mine.reason) == (spec.value, spec.passed, spec.reason)


def check_evaluator_alias(env: Env, ns: dict[str, Any]) -> None:
    del env
    assert ns["Evaluator"][str, str] is not None  # the draft writes `Evaluator[O, E]`
    assert ours.Evaluator[str, str] is not None  # so does ours
    assert list(inspect.signature(ours.exact_match).parameters) == ["output", "expected"]


PROBES = [("4", "4"), ("4", "5"), ("The answer is 42.", "42"), ("", ""), ("x", "X")]


def check_builtins(env: Env, ns: dict[str, Any]) -> None:
    """The draft's evaluators and ours agree on every probe (value and verdict)."""
    del env
    for name in ("exact_match", "contains"):
        for output, expected in PROBES:
            spec, mine = ns[name](output, expected), getattr(ours, name)(output, expected)
            assert (spec.value, spec.passed) == (mine.value, mine.passed), (name, output, expected)
    spec_all = ns["all_of"](ns["exact_match"], ns["contains"])
    mine_all = ours.all_of(ours.exact_match, ours.contains)
    for output, expected in PROBES:
        spec, mine = spec_all(output, expected), mine_all(output, expected)
        assert (spec.value, spec.passed) == (mine.value, mine.passed), (output, expected)


def check_judge_output(env: Env, ns: dict[str, Any]) -> None:
    """The draft's `JudgeOutput(score, passed, reason)` reads the same on ours."""
    del env
    mine = ours.JudgeOutput(justification="Close, one unit off.", rating="good")
    readable_on(ns["JudgeOutput"], mine)
    assert (mine.score, mine.passed, mine.reason) == (0.75, True, "Close, one unit off.")
    assert list(inspect.signature(ours.llm_judge).parameters)[:2] == ["adapter", "criterion"]


def result_pairs(ns: dict[str, Any]) -> list[tuple[Any, ours.EvalResult]]:
    rows = [
        ("a", 1.0, True, 12, 30, None),
        ("b", 0.0, False, 7, 0, "boom"),
        ("c", 0.5, False, 3, 9, None),
    ]
    pairs = []
    for sample_id, value, passed, latency, tokens, error in rows:
        spec = ns["EvalResult"](
            sample_id=sample_id, score=ns["Score"](value=value, passed=passed),
            latency_ms=latency, tokens=tokens, error=error,
        )  # fmt: skip
        mine = ours.EvalResult(
            sample_id=sample_id, experiment_name="baseline", latency_ms=latency, error=error,
            score=ours.Score(value=value, passed=passed), usage=TokenUsage(input_tokens=tokens),
        )  # fmt: skip
        pairs.append((spec, mine))
    return pairs


def check_result(env: Env, ns: dict[str, Any]) -> None:
    del env
    for spec, mine in result_pairs(ns):
        readable_on(ns["EvalResult"], mine)
        assert (mine.latency_ms, mine.tokens, mine.error) == (
            spec.latency_ms,
            spec.tokens,
            spec.error,
        )
        assert isinstance(mine.latency_ms, int)


def check_report(env: Env, ns: dict[str, Any]) -> None:
    """Same results, same numbers (no errors among them: errors count as failed here too)."""
    del env
    pairs = [(spec, mine) for spec, mine in result_pairs(ns) if spec.error is None]
    spec = ns["EvalReport"](results=tuple(p[0] for p in pairs))
    mine = ours.EvalReport(results=tuple(p[1] for p in pairs))
    readable_on(ns["EvalReport"], mine)
    assert (spec.pass_rate, spec.mean_score, spec.total_tokens) == (
        mine.pass_rate, mine.mean_score, mine.total_tokens,
    )  # fmt: skip


def check_run_eval(env: Env, ns: dict[str, Any]) -> None:
    """The draft's `run_eval` and ours score the same loop and dataset the same way."""
    del env
    dataset = tuple(s.qa_dataset())
    spec = ns["run_eval"](s.qa_loop(), dataset, ours.exact_match)
    mine = ours.run_eval(s.qa_loop(), dataset, ours.exact_match)
    assert spec.pass_rate == mine.pass_rate == 1.0, (spec.results, mine.results)
    assert spec.total_tokens == mine.total_tokens > 0, (spec.total_tokens, mine.total_tokens)
    by_id = {r.sample_id: r for r in mine.results}
    for r in spec.results:
        assert (r.score.passed, r.tokens) == (by_id[r.sample_id].passed, by_id[r.sample_id].tokens)


class InProcessEventBus:
    """The draft's event bus: accepted and unused (sessions record their own events)."""


def draft_usage(env: Env) -> dict[str, Any]:
    s.write_qa_jsonl(env.tmp / "tests" / "fixtures" / "qa.jsonl")
    return {
        "Session": Session,
        "InProcessEventBus": InProcessEventBus,
        "QA_TEMPLATE": s.QA_TEMPLATE,
    }


def check_draft_usage(env: Env, ns: dict[str, Any]) -> None:
    assert ns["report"].pass_rate == 1.0 and ns["report"].total == 2
    assert "Pass rate: 100.0%" in env.stdout()


DRAFT: tuple[Handling, ...] = (
    Handling(
        f"{D}#1",
        "9dfc4510f800",
        "adapted",
        PEP695,
        setup=draft_names,
        edits=(("class Sample[InputT, ExpectedT]:", "class Sample(Generic[InputT, ExpectedT]):"),),
        check=check_sample,
    ),
    Handling(
        f"{D}#2",
        "8180b1964679",
        "with context",
        "uses block 1's `Sample`",
        after=(1,),
        check=check_tuple_dataset,
    ),
    Handling(
        f"{D}#3",
        "31ba74b832fe",
        "adapted",
        PEP695 + "; the body is the spec's `...`",
        setup=draft_names,
        edits=(("def load_jsonl[I, E](", "def load_jsonl("),),
        check=check_load_jsonl,
    ),
    Handling(
        f"{D}#4",
        "008fd0b2a37b",
        "with context",
        "the draft's `dataclass` import",
        setup=draft_names,
        check=check_score,
    ),
    Handling(
        f"{D}#5",
        "36cd9290f1c3",
        "with context",
        "uses block 4's `Score` and the file's TypeVars",
        setup=draft_names,
        after=(4,),
        check=check_evaluator_alias,
    ),
    Handling(
        f"{D}#6",
        "230229865e75",
        "adapted",
        PEP695 + "; uses blocks 4 and 5",
        setup=draft_names,
        after=(4, 5),
        edits=(("def exact_match[T](output", "def exact_match(output"),),
        check=check_builtins,
    ),
    Handling(
        f"{D}#7",
        "2b7635845249",
        "adapted",
        "`PromptTemplate[JudgeOutput](...)` elides the template: this project's `JUDGE_TEMPLATE` "
        "stands in; the draft's `adapter.evaluate(prompt)` without a session is not called "
        "(DESIGN 4.1: `evaluate(prompt, *, session)`)",
        setup=draft_names,
        after=(4, 5),
        edits=(("PromptTemplate[JudgeOutput](...)", "STANDIN_JUDGE_TEMPLATE"),),
        check=check_judge_output,
    ),
    Handling(
        f"{D}#8",
        "3a817d1e69ca",
        "with context",
        "uses block 4's `Score`",
        setup=draft_names,
        after=(4,),
        check=check_result,
    ),
    Handling(
        f"{D}#9",
        "7fc8998064be",
        "with context",
        "uses block 8's `EvalResult`",
        setup=draft_names,
        after=(8,),
        check=check_report,
    ),
    Handling(
        f"{D}#10",
        "51eece8ff6b3",
        "adapted",
        PEP695 + "; uses blocks 4, 5, 8 and 9",
        setup=draft_names,
        after=(5, 9),
        edits=(("def run_eval[I, O, E](", "def run_eval("),),
        check=check_run_eval,
    ),
    Handling(
        f"{D}#11",
        "46d834648819",
        "adapted",
        "the draft's `MainLoop` kept its template and event bus in private attributes "
        "(`self._template`, `self._bus`): the stand-in template is named instead, and the "
        "session needs no bus; `Session` and `InProcessEventBus` are used without imports; "
        "`tests/fixtures/qa.jsonl` holds two questions",
        setup=draft_usage,
        edits=(
            ("Prompt(self._template)", "Prompt(QA_TEMPLATE)"),
            ("Session(bus=self._bus)", "Session()"),
        ),
        check=check_draft_usage,
    ),
)


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
        sample=sample,
    )  # fmt: skip
    assert result.sample is sample
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


# -- EVALS.md ---------------------------------------------------------------------------------


def check_jsonl_line(env: Env, ns: dict[str, Any]) -> None:
    """The JSONL format line loads as the table says: one sample, typed fields."""
    del ns
    from tests.spec.blocks import all_blocks

    [block] = [b for b in all_blocks() if b.key == f"{E}#1"]
    path = env.tmp / "format.jsonl"
    path.write_text(block.code, encoding="utf-8")
    [sample] = ours.Dataset.load(path, str, str)
    assert (sample.id, sample.input, sample.expected) == ("1", "What is 2+2?", "4")


EVALS: tuple[Handling, ...] = (
    Handling(
        f"{E}#1",
        "0238016bb98c",
        "not python",
        "the JSONL format; the check loads it",
        check=check_jsonl_line,
    ),
)
