from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import weakincentives
import weakincentives.runtime
from tests.helpers import ScriptedModel, calculator_model, calculator_tool
from weakincentives.adapters import FunctionAdapter, FunctionReply, ModelRequest, PromptResponse
from weakincentives.clock import FakeClock
from weakincentives.errors import (
    BudgetExceededError,
    ConfigurationError,
    DeadlineExceededError,
    OverridesError,
)
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.prompt import (
    LocalPromptOverridesStore,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Tool,
    ToolContext,
    ToolResult,
)
from weakincentives.runtime import (
    AgentLoop,
    Budget,
    Deadline,
    FunctionLoop,
    MainLoop,
    PromptExecuted,
    PromptRendered,
    Session,
    TokenUsage,
    ToolInvoked,
)
from weakincentives.runtime.agent_loop import is_async_callable
from weakincentives.runtime.session import replace_latest

RULES = "Use the calculator for arithmetic."


@dataclass(frozen=True, slots=True)
class Answer:
    value: float


@dataclass(frozen=True, slots=True)
class Question:
    text: str


TEMPLATE = PromptTemplate[Answer](
    ns="tests",
    key="calc-loop",
    sections=(
        MarkdownSection("Rules", "rules", RULES),
        MarkdownSection("Question", "question", "$text", Question, role="user"),
    ),
    tools=(calculator_tool(),),
    output_type=Answer,
)


class CalcLoop(AgentLoop[str, Answer]):
    def create_prompt(self, request: str) -> Prompt[Answer]:
        return Prompt(TEMPLATE).bind(Question(request))


def test_execute_runs_the_prompt_and_returns_the_session() -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))
    response, session = loop.execute("What is 6 * 7?")

    assert response.output == Answer(42.0)
    assert session[Experiment].all() == (BASELINE,)
    assert len(session[ToolInvoked].all()) == 1
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert executed.output == Answer(42.0)
    assert loop.name == "CalcLoop"


def test_each_execute_gets_a_fresh_session() -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))
    _, first = loop.execute("1 + 1")
    _, second = loop.execute("2 + 2")
    assert first.session_id != second.session_id
    assert len(second[ToolInvoked].all()) == 1


def test_experiment_is_seeded_and_readable_by_tools() -> None:
    seen: list[Experiment | None] = []

    @dataclass(frozen=True)
    class NoParams:
        pass

    def style(params: NoParams, context: ToolContext) -> ToolResult:
        seen.append(context.experiment)
        exp = context.experiment
        return ToolResult(message=str(exp.get_flag("style", "plain") if exp else "none"))

    template = PromptTemplate[str](
        ns="tests",
        key="flags",
        sections=(MarkdownSection("", "s", "go", role="user"),),
        tools=(
            Tool(name="style", description="Read the style.", params_type=NoParams, handler=style),
        ),
    )

    class StyleLoop(AgentLoop[str, str]):
        def create_prompt(self, request: str) -> Prompt[str]:
            return Prompt(template)

    def model(request: ModelRequest) -> FunctionReply | str:
        answers = request.tool_messages()
        return answers[0].content or "" if answers else FunctionReply.call("style")

    loop = StyleLoop(adapter=FunctionAdapter(model))
    exp = Experiment(name="terse").with_flag("style", "terse")

    response, session = loop.execute("x", experiment=exp)

    assert response.text == "terse"
    assert seen == [exp]
    assert session[Experiment].latest() == exp
    assert loop.execute("x")[0].text == "plain"


def _store_override(store: LocalPromptOverridesStore, tag: str) -> None:
    store.store(
        "tests",
        "calc-loop",
        tag,
        section_key="rules",
        original=RULES,
        body="Think step by step, then use the calculator.",
    )


def test_execute_applies_the_experiments_overrides_tag(tmp_path: Path) -> None:
    store = LocalPromptOverridesStore(tmp_path)
    _store_override(store, "stepwise")
    model = ScriptedModel(calculator_model, calculator_model)
    loop = CalcLoop(adapter=FunctionAdapter(model), overrides_store=store)

    _, session = loop.execute(
        "6 * 7", experiment=Experiment(name="steps", overrides_tag="stepwise")
    )

    system = model.requests[0].messages[0].content or ""
    assert "Think step by step" in system
    assert RULES not in system
    rendered = session[PromptRendered].latest()
    assert rendered is not None
    assert rendered.overrides_tag == "stepwise"
    assert rendered.applied_overrides == ("rules",)


def test_baseline_ignores_other_tags_overrides(tmp_path: Path) -> None:
    store = LocalPromptOverridesStore(tmp_path)
    _store_override(store, "stepwise")
    model = ScriptedModel(calculator_model, calculator_model)
    loop = CalcLoop(adapter=FunctionAdapter(model), overrides_store=store)

    _, session = loop.execute("6 * 7")

    assert RULES in (model.requests[0].messages[0].content or "")
    rendered = session[PromptRendered].latest()
    assert rendered is not None
    assert (rendered.overrides_tag, rendered.applied_overrides) == ("latest", ())


@pytest.mark.parametrize("tag", ["../escape", "UPPER", "a/b"])
def test_invalid_experiment_tag_fails_fast(tmp_path: Path, tag: str) -> None:
    loop = CalcLoop(
        adapter=FunctionAdapter(calculator_model),
        overrides_store=LocalPromptOverridesStore(tmp_path),
    )
    with pytest.raises(OverridesError, match="invalid overrides tag"):
        loop.execute("1 + 1", experiment=Experiment(name="bad").with_tag(tag))


def _slow_model(clock: FakeClock) -> ScriptedModel:
    def step(request: ModelRequest) -> FunctionReply | str:
        clock.advance(30)
        return calculator_model(request)

    return ScriptedModel(step, step)


@pytest.mark.parametrize("as_seconds", [True, False], ids=["seconds", "Deadline"])
def test_deadline_overrun(as_seconds: bool) -> None:
    clock = FakeClock()
    loop = CalcLoop(adapter=FunctionAdapter(_slow_model(clock), clock=clock), clock=clock)
    deadline: float | Deadline = 20.0 if as_seconds else Deadline.after(20, clock=clock)
    with pytest.raises(DeadlineExceededError, match="passed its deadline"):
        loop.execute("6 * 7", deadline=deadline)


def test_deadline_with_time_to_spare() -> None:
    clock = FakeClock()
    loop = CalcLoop(adapter=FunctionAdapter(_slow_model(clock), clock=clock), clock=clock)
    response, _ = loop.execute("6 * 7", deadline=100)
    assert response.output == Answer(42.0)


def test_budget_overrun() -> None:
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))
    with pytest.raises(BudgetExceededError, match="limit 5"):
        loop.execute("6 * 7", budget=Budget(max_input_tokens=5))


def test_heartbeat_is_passed_to_the_adapter() -> None:
    beats: list[int] = []
    loop = CalcLoop(adapter=FunctionAdapter(calculator_model))
    loop.execute("6 * 7", heartbeat=lambda: beats.append(1))
    assert len(beats) == 2


def test_hooks_can_be_overridden() -> None:
    class Hooked(CalcLoop):
        def create_session(self) -> Session:
            session = super().create_session()
            session.register_reducer(Experiment, replace_latest)
            session.dispatch(Experiment(name="earlier"))
            return session

        def finalize(
            self, prompt: Prompt[Answer], session: Session, response: PromptResponse[Answer]
        ) -> PromptResponse[Answer]:
            assert response.output is not None
            return PromptResponse(
                prompt_name=prompt.name, text="final", output=Answer(response.output.value + 1)
            )

    response, session = Hooked(adapter=FunctionAdapter(calculator_model), name="hooked").execute(
        "6 * 7"
    )
    assert response.output == Answer(43.0)
    assert response.text == "final"
    assert session[Experiment].all() == (BASELINE,)


def test_missing_create_prompt_says_what_to_implement() -> None:
    class Empty(AgentLoop[str, str]):
        pass

    with pytest.raises(NotImplementedError, match="Empty must implement create_prompt"):
        Empty(adapter=FunctionAdapter(lambda req: "x")).execute("q")


# -- MainLoop (the older draft's name) ------------------------------------------------------


def test_main_loop_is_the_same_class_everywhere() -> None:
    assert MainLoop is AgentLoop
    assert weakincentives.MainLoop is AgentLoop
    assert weakincentives.runtime.MainLoop is AgentLoop


def test_main_loop_subclass_with_create_prompt() -> None:
    template = PromptTemplate[str](
        ns="tests", key="qa", sections=(MarkdownSection("Q", "q", "$question", role="user"),)
    )

    class QALoop(MainLoop[str, str]):
        def create_prompt(self, question: str) -> Prompt[str]:
            return Prompt(template).bind(question=question)

    loop = QALoop(adapter=FunctionAdapter(lambda req: req.last_user_text().upper()), bus=object())
    response, session = loop.execute("capital of france?")
    assert response.text == "## Q\n\nCAPITAL OF FRANCE?"
    assert isinstance(loop, AgentLoop)
    assert session[PromptExecuted].latest() is not None


# -- FunctionLoop ------------------------------------------------------------------------------


def test_function_loop_without_session() -> None:
    def shout(request: str) -> str:
        return request.upper()

    exp = Experiment(name="e")
    response, session = FunctionLoop[str, str](shout).execute("hi", experiment=exp)

    assert (response.output, response.text) == ("HI", "HI")
    assert response.prompt_name == f"{test_function_loop_without_session.__name__}.<locals>.shout"
    assert session[Experiment].all() == (exp,)
    executed = session[PromptExecuted].latest()
    assert executed is not None
    assert (executed.prompt_ns, executed.output) == ("function", "HI")


@dataclass(frozen=True, slots=True)
class Step:
    n: int


def test_function_loop_with_session_parameter() -> None:
    def count(request: int, session: Session) -> dict[str, int]:
        for i in range(request):
            session.dispatch(Step(i))
        return {"steps": request}

    response, session = FunctionLoop[int, dict[str, int]](count, name="counter").execute(3)

    assert response.output == {"steps": 3}
    assert response.text is None
    assert response.prompt_name == "counter"
    assert [s.n for s in session[Step].all()] == [0, 1, 2]
    assert session[Experiment].latest() == BASELINE


def test_function_loop_deadline_is_checked_after_the_call() -> None:
    clock = FakeClock()

    def slow(request: str) -> str:
        clock.advance(5)
        return request

    loop = FunctionLoop[str, str](slow, clock=clock)
    with pytest.raises(DeadlineExceededError, match=r"function .*slow passed its deadline"):
        loop.execute("x", deadline=1)
    assert loop.execute("x", deadline=10)[0].output == "x"
    executed = loop.execute("x")[1][PromptExecuted].latest()
    assert executed is not None
    assert executed.duration_ms == 5000.0


def test_function_loop_ignores_budget_and_usage() -> None:
    response, _ = FunctionLoop[str, str](lambda q: q).execute(
        "x", budget=Budget(max_total_tokens=0)
    )
    assert response.usage == TokenUsage()


def test_function_loop_exceptions_propagate() -> None:
    def broken(request: Any) -> Any:
        raise RuntimeError("agent failed")

    with pytest.raises(RuntimeError, match="agent failed"):
        FunctionLoop[Any, Any](broken).execute(None)


# -- FunctionLoop around an async def ------------------------------------------------------


async def ashout(request: str) -> str:
    await asyncio.sleep(0)
    return request.upper()


def shout(request: str) -> str:
    return request.upper()


class AsyncCallable:
    """An object with an `async def __call__` (and a session parameter)."""

    async def __call__(self, request: int, session: Session) -> int:
        await asyncio.sleep(0)
        session.dispatch(Step(request))
        return request * 2


def executed_of(session: Session) -> list[tuple[str, str, Any, str | None]]:
    return [(e.prompt_ns, e.prompt_name, e.output, e.text) for e in session[PromptExecuted].all()]


@pytest.mark.parametrize(
    ("fn", "is_async"),
    [(ashout, True), (shout, False), (AsyncCallable(), True), (lambda q: q, False)],
    ids=["async-def", "def", "async-call", "lambda"],
)
def test_function_loop_tells_async_functions_apart(fn: Any, is_async: bool) -> None:
    assert FunctionLoop[Any, Any](fn).is_async is is_async
    assert is_async_callable(fn) is is_async


def test_async_function_loop_execute_matches_its_sync_twin() -> None:
    exp = Experiment(name="e")
    async_response, async_session = FunctionLoop[str, str](ashout, name="f").execute(
        "hi", experiment=exp
    )
    sync_response, sync_session = FunctionLoop[str, str](shout, name="f").execute(
        "hi", experiment=exp
    )

    assert (
        async_response == sync_response == PromptResponse(prompt_name="f", text="HI", output="HI")
    )
    assert (
        executed_of(async_session) == executed_of(sync_session) == [("function", "f", "HI", "HI")]
    )
    assert async_session[Experiment].all() == sync_session[Experiment].all() == (exp,)


def test_aexecute_awaits_the_function_on_the_running_loop() -> None:
    prepared: list[Session] = []
    loop = FunctionLoop[str, str](ashout)

    response, session = asyncio.run(loop.aexecute("hi", on_prepared=prepared.append))

    assert response.output == "HI"
    assert prepared == [session]
    assert executed_of(session) == [("function", loop.name, "HI", "HI")]


def test_aexecute_calls_a_sync_function_too() -> None:
    response, _ = asyncio.run(FunctionLoop[str, str](shout).aexecute("hi"))
    assert response.output == "HI"


def test_async_function_with_a_session_parameter_gets_the_runs_session() -> None:
    async def count(request: int, session: Session) -> dict[str, int]:
        for i in range(request):
            await asyncio.sleep(0)
            session.dispatch(Step(i))
        return {"steps": request}

    loop = FunctionLoop[int, dict[str, int]](count, name="counter")
    assert loop.takes_session and loop.is_async

    for response, session in (loop.execute(3), asyncio.run(loop.aexecute(3))):
        assert response.output == {"steps": 3}
        assert [s.n for s in session[Step].all()] == [0, 1, 2]
        assert session[Experiment].latest() == BASELINE


def test_an_object_with_an_async_call_is_awaited() -> None:
    loop = FunctionLoop[int, int](AsyncCallable())

    response, session = loop.execute(21)

    assert loop.takes_session and loop.name == "AsyncCallable"
    assert response.output == 42
    assert [s.n for s in session[Step].all()] == [21]


def test_async_function_loop_deadline_and_exceptions_match_the_sync_path() -> None:
    clock = FakeClock()

    async def slow(request: str) -> str:
        clock.advance(5)
        return request

    async def broken(request: Any) -> Any:
        raise RuntimeError("agent failed")

    loop = FunctionLoop[str, str](slow, clock=clock)
    with pytest.raises(DeadlineExceededError, match=r"function .*slow passed its deadline"):
        loop.execute("x", deadline=1)
    with pytest.raises(DeadlineExceededError, match=r"function .*slow passed its deadline"):
        asyncio.run(loop.aexecute("x", deadline=1))
    assert loop.execute("x", deadline=10)[0].output == "x"
    with pytest.raises(RuntimeError, match="agent failed"):
        FunctionLoop[Any, Any](broken).execute(None)


def test_execute_refuses_an_async_function_inside_a_running_loop() -> None:
    loop = FunctionLoop[str, str](ashout, name="shouter")

    async def inside() -> None:
        with pytest.raises(ConfigurationError, match=r"shouter.*await loop\.aexecute"):
            loop.execute("hi")
        assert (await loop.aexecute("hi"))[0].output == "HI"

    asyncio.run(inside())


def test_function_loop_takes_a_builtin_without_a_signature() -> None:
    loop: FunctionLoop[int, str] = FunctionLoop(str)  # inspect.signature(str) raises ValueError
    response, _ = loop.execute(42)
    assert response.output == "42"


def test_building_an_agent_loop_prepares_the_types_its_prompts_noted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Their validators and schemas are built with the loop, not on its first sample.
    from weakincentives import serde

    prepared: list[object] = []
    monkeypatch.setattr(serde, "prepare", prepared.append)

    @dataclass(frozen=True)
    class Verdict:
        ok: bool

    PromptTemplate[Verdict](ns="tests", key="verdict", output_type=Verdict)
    FunctionLoop(lambda question: question)  # a function: no prompts, nothing prepared
    assert Verdict not in prepared
    AgentLoop(adapter=FunctionAdapter(lambda request: FunctionReply(output=Verdict(True))))
    assert Verdict in prepared
    prepared.clear()
    AgentLoop(adapter=FunctionAdapter(lambda request: "ok"))  # each type once
    assert prepared == []
