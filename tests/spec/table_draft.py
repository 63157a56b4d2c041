"""How each block of `EVALS-mainloop-draft.md` and `EVALS.md` runs.

The older draft mostly *defines* things (its own `Sample`, `Score`, `run_eval`, ...).
Those blocks run as written (PEP 695 generics rewritten for Python 3.11), and their check
compares the spec's definition with this project's public one: the same field names are
readable, and the same inputs give the same results.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import weakincentives.evals as ours
from tests.spec import standins as s
from tests.spec.blocks import Env, Handling
from tests.spec.standins import positional
from weakincentives import MainLoop, Prompt, PromptTemplate
from weakincentives.adapters import ProviderAdapter
from weakincentives.runtime.session import Session, TokenUsage

D = "EVALS-mainloop-draft.md"
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
    assert positional(ours.exact_match) == ["output", "expected"]


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
