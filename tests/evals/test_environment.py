"""Environments: the serialization contract, restore checks, and environments in runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import CalcParams, calculate, calculator_model
from weakincentives.adapters import FunctionAdapter
from weakincentives.errors import ConfigurationError, EnvironmentMismatchError
from weakincentives.evals import (
    Environment,
    RunStore,
    Sample,
    Score,
    Trajectory,
    check_environment,
    exact_match,
    restore_environment,
    run_eval,
    serialize_environment,
)
from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolContext
from weakincentives.runtime import AgentLoop, Session, ToolResult


class CalculatorEnvironment:
    """The spec's example: a calculator that remembers what it computed."""

    ENV_KIND = "calculator"
    VERSION = "1.2.0"

    def __init__(self, history: list[str] | None = None) -> None:
        self.history: list[str] = list(history or [])

    async def serialize(self) -> dict[str, Any]:
        return {"env_kind": self.ENV_KIND, "version": self.VERSION, "history": self.history}

    @staticmethod
    async def deserialize(data: dict[str, Any]) -> CalculatorEnvironment:
        return CalculatorEnvironment(data["history"])


def restore(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    return anyio.run(lambda: restore_environment(data, CalculatorEnvironment, *args, **kwargs))


STATE = {"env_kind": "calculator", "version": "1.2.0", "history": ["1+1=2"]}


# -- the contract -------------------------------------------------------------------------


def test_an_environment_is_recognized_structurally() -> None:
    assert isinstance(CalculatorEnvironment(), Environment)
    assert not isinstance(object(), Environment)


def test_round_trip_through_serialize_and_restore() -> None:
    env = CalculatorEnvironment(["2*3=6"])

    data = anyio.run(serialize_environment, env)
    restored = restore(data)

    assert data == {"env_kind": "calculator", "version": "1.2.0", "history": ["2*3=6"]}
    assert isinstance(restored, CalculatorEnvironment)
    assert restored.history == ["2*3=6"]


@pytest.mark.parametrize(
    ("data", "kind", "versions", "message"),
    [
        ({**STATE, "env_kind": "code_exec"}, "calculator", "*", "'code_exec' environment as"),
        ({**STATE, "version": "2.0.0"}, "calculator", "1.*", "compatible versions are '1.*'"),
        ({**STATE, "version": "1.2.1"}, "calculator", ["1.2.0", "1.3.*"], "'1.2.0', '1.3.*'"),
        ({"history": []}, "calculator", "*", "must include 'env_kind' and 'version'"),
        ({**STATE, "version": 1}, "calculator", "*", "version=1"),
    ],
)
def test_check_environment_refuses_the_wrong_kind_or_version(
    data: dict[str, Any], kind: str, versions: Any, message: str
) -> None:
    with pytest.raises(EnvironmentMismatchError, match=message):
        check_environment(data, kind, versions)


@pytest.mark.parametrize("version", ["1.0.0", "1.9.3"])
def test_restore_defaults_to_the_class_kind_and_major_version(version: str) -> None:
    assert restore({**STATE, "version": version}).history == ["1+1=2"]


def test_restore_refuses_another_major_version_or_kind() -> None:
    with pytest.raises(EnvironmentMismatchError, match=r"version '2\.0\.0'"):
        restore({**STATE, "version": "2.0.0"})
    with pytest.raises(EnvironmentMismatchError, match="as 'calculator'"):
        restore({**STATE, "env_kind": "sandbox"})
    assert restore({**STATE, "version": "2.0.0"}, "calculator", "2.*").history == ["1+1=2"]


def test_restore_checks_what_deserialize_returns() -> None:
    class Liar(CalculatorEnvironment):
        @staticmethod
        async def deserialize(data: dict[str, Any]) -> CalculatorEnvironment:
            return CalculatorEnvironment()

    with pytest.raises(EnvironmentMismatchError, match="not a Liar"):
        anyio.run(lambda: restore_environment(STATE, Liar))


def test_restore_needs_kind_and_version_from_somewhere() -> None:
    class Anonymous:
        async def serialize(self) -> dict[str, Any]:
            return {}

        @staticmethod
        async def deserialize(data: dict[str, Any]) -> Anonymous:
            return Anonymous()

    with pytest.raises(ConfigurationError, match="no ENV_KIND"):
        anyio.run(lambda: restore_environment(STATE, Anonymous))
    with pytest.raises(ConfigurationError, match="no VERSION"):
        anyio.run(lambda: restore_environment(STATE, Anonymous, "calculator"))


def test_serialize_environment_insists_on_kind_and_version() -> None:
    class Forgetful(CalculatorEnvironment):
        async def serialize(self) -> dict[str, Any]:
            return {"history": self.history}

    with pytest.raises(EnvironmentMismatchError, match=r"Forgetful.serialize\(\) must include"):
        anyio.run(serialize_environment, Forgetful())


# -- environments in runs ---------------------------------------------------------------


def add(question: str, env: CalculatorEnvironment) -> str:
    a, b = (int(x) for x in question.split("+"))
    env.history.append(f"{a}+{b}={a + b}")
    return str(a + b)


def samples(n: int) -> list[Sample[str, str]]:
    return [Sample(id=f"e{i}", input=f"{i}+{i}", expected=str(2 * i)) for i in range(n)]


def test_a_task_function_gets_one_environment_per_sample(tmp_path: Path) -> None:
    made: list[str] = []

    def factory(sample: Sample[Any, Any]) -> CalculatorEnvironment:
        made.append(sample.id)
        return CalculatorEnvironment()

    report = run_eval(samples(3), add, exact_match, environment_factory=factory, store=tmp_path)

    assert sorted(made) == ["e0", "e1", "e2"]
    by_id = {r.sample_id: r for r in report.results}
    assert by_id["e2"].environment == {**STATE, "history": ["2+2=4"]}
    stored = RunStore(tmp_path).open(report.run_id or "").latest_results()
    restored = [restore(dict(r.environment or {})) for r in stored]
    assert sorted(h for env in restored for h in env.history) == ["0+0=0", "1+1=2", "2+2=4"]


def test_async_targets_and_async_factories() -> None:
    async def factory(sample: Sample[Any, Any]) -> CalculatorEnvironment:
        await anyio.sleep(0)
        return CalculatorEnvironment([f"made for {sample.id}"])

    async def answer(question: str, env: CalculatorEnvironment, session: Session) -> str:
        assert session[CalculatorEnvironment].latest() is env
        return add(question, env)

    report = run_eval(samples(2), answer, exact_match, environment_factory=factory)

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["e1"].passed
    assert by_id["e1"].environment is not None
    assert by_id["e1"].environment["history"] == ["made for e1", "1+1=2"]


def _recording_calculate(params: CalcParams, context: ToolContext) -> ToolResult:
    env = context.session[CalculatorEnvironment].latest()
    result = calculate(params, context)
    assert env is not None
    env.history.append(f"{params.a:g}{params.op}{params.b:g}={result.message}")
    return result


TEMPLATE = PromptTemplate[str](
    ns="tests",
    key="env-calc",
    sections=(MarkdownSection("Question", "question", "$question", role="user"),),
    tools=(
        Tool(
            name="calculate",
            description="a op b",
            params_type=CalcParams,
            handler=_recording_calculate,
        ),
    ),
)


class EnvLoop(AgentLoop[str, str]):
    def create_prompt(self, request: str) -> Prompt[str]:
        return Prompt(TEMPLATE).bind(question=request)


def test_an_agent_loop_finds_the_environment_in_its_session() -> None:
    loop = EnvLoop(adapter=FunctionAdapter(calculator_model))

    def scorer(trajectory: Trajectory, sample: Sample[str, str]) -> Score:
        assert trajectory.session is not None
        env = trajectory.session[CalculatorEnvironment].latest()
        ok = env is not None and len(env.history) == 1 and trajectory.output == sample.expected
        return Score(value=float(ok), passed=ok)

    report = run_eval(
        samples(3), loop, scorer, environment_factory=lambda s: CalculatorEnvironment()
    )

    assert report.pass_rate == 1.0
    assert sorted(r.environment["history"][0] for r in report.results if r.environment) == [
        "0+0=0",
        "1+1=2",
        "2+2=4",
    ]


def test_a_failing_factory_or_serialize_is_an_environment_error() -> None:
    class Broken(CalculatorEnvironment):
        async def serialize(self) -> dict[str, Any]:
            raise OSError("disk full")

    def factory(sample: Sample[Any, Any]) -> CalculatorEnvironment:
        if sample.id == "e0":
            raise RuntimeError("no sandbox left")
        return Broken() if sample.id == "e1" else CalculatorEnvironment()

    report = run_eval(samples(3), add, exact_match, environment_factory=factory)

    by_id = {r.sample_id: r for r in report.results}
    assert by_id["e0"].error_kind == "environment"
    assert "no sandbox left" in (by_id["e0"].error or "")
    assert by_id["e1"].error_kind == "environment"
    assert "disk full" in (by_id["e1"].error or "")  # the message, as EVALS.md shows it
    assert by_id["e1"].environment is None
    assert by_id["e2"].passed and by_id["e2"].environment is not None


def test_a_factory_returning_a_non_environment_is_an_environment_error() -> None:
    def factory(sample: Sample[Any, Any]) -> Any:
        return {"a": 1}

    report = run_eval(samples(1), add, exact_match, environment_factory=factory)

    assert report.results[0].error_kind == "environment"
    assert "not an Environment" in (report.results[0].error or "")


def test_the_agents_own_error_wins_over_a_lost_environment() -> None:
    class Broken(CalculatorEnvironment):
        async def serialize(self) -> dict[str, Any]:
            raise OSError("disk full")

    def crash(question: str, env: CalculatorEnvironment) -> str:
        raise ValueError("agent crashed")

    report = run_eval(samples(1), crash, exact_match, environment_factory=lambda s: Broken())

    assert report.results[0].error_kind == "agent"
    assert report.results[0].environment is None
