"""Session-awareness detection, `adapt`, `run_evaluator`, `classify_error`, names.

This module uses `from __future__ import annotations`, so every annotation below is a
string: detection must resolve them.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Annotated, Any, Optional

import pytest

from weakincentives.errors import (
    AdapterTimeoutError,
    BudgetExceededError,
    ConfigurationError,
    DeadlineExceededError,
    InvalidScoreError,
    JudgeError,
)
from weakincentives.evals._records import ErrorKind, Score
from weakincentives.evals.scoring._builtins import contains, exact_match
from weakincentives.evals.scoring._protocols import (
    SESSION_AWARE_ATTR,
    adapt,
    classify_error,
    evaluator_name,
    is_session_aware,
    run_evaluator,
    session_aware,
)
from weakincentives.evals.scoring._session_checks import tool_called
from weakincentives.runtime.session import (
    Session,
    SessionProtocol,
    SessionView,
    SessionViewProtocol,
    ToolInvoked,
    ToolResult,
)

OK = Score(value=1.0, passed=True, reason="ok")


# -- evaluators with every kind of signature (annotations are strings here) -----------


def plain(output: str, expected: str) -> Score:
    return OK


def untyped_three(output, expected, session):  # type: ignore[no-untyped-def]
    return OK


def typed_view(output: str, expected: str, session: SessionView) -> Score:
    return OK


def typed_session(output: str, expected: str, session: Session) -> Score:
    return OK


def typed_protocol(output: str, expected: str, session: SessionProtocol) -> Score:
    return OK


def typed_union(
    output: str, expected: str, session: SessionProtocol | SessionViewProtocol
) -> Score:
    return OK


def optional_view(output: str, expected: str, session: SessionView | None = None) -> Score:
    return OK


def optional_typing(output: str, expected: str, session: Optional[SessionView] = None) -> Score:  # noqa: UP045
    return OK


def annotated_view(
    output: str, expected: str, session: Annotated[SessionView | None, "meta"] = None
) -> Score:
    return OK


def defaulted_flag(output: str, expected: str, strict: bool = False) -> Score:
    return OK


def defaulted_untyped(output, expected, session=None):  # type: ignore[no-untyped-def]
    return OK


def keyword_session(output: str, expected: str, *, strict: bool = True) -> Score:
    return OK


def star_args(*args: Any) -> Score:
    return OK


def unresolvable_session(
    output: str,
    expected: str,
    session: SessionView | NotDefinedAnywhere = None,  # type: ignore[name-defined]  # noqa: F821
) -> Score:
    return OK


def unresolvable_other(
    output: str,
    expected: str,
    flag: NotDefinedAnywhere | None = None,  # type: ignore[name-defined]  # noqa: F821
) -> Score:
    return OK


def lookalike(output: str, expected: str, sessions: SessionLike | None = None) -> Score:
    return OK


class SessionLike:
    """Not a session: its name only starts like one."""


class CallableEvaluator:
    def __call__(self, output: str, expected: str, session: SessionView) -> Score:
        return OK


class Checks:
    def aware(self, output: str, expected: str, session: SessionViewProtocol) -> Score:
        return OK

    def flat(self, output: str, expected: str) -> Score:
        return OK


def with_threshold(
    output: str, expected: str, session: SessionView, *, min_calls: int = 1
) -> Score:
    return OK


@functools.wraps(typed_view)
def decorated(*args: Any, **kwargs: Any) -> Score:
    return typed_view(*args, **kwargs)


@pytest.mark.parametrize(
    ("fn", "aware"),
    [
        (plain, False),
        (untyped_three, True),
        (typed_view, True),
        (typed_session, True),
        (typed_protocol, True),
        (typed_union, True),
        (optional_view, True),
        (optional_typing, True),
        (annotated_view, True),
        (defaulted_flag, False),
        (defaulted_untyped, False),
        (keyword_session, False),
        (star_args, False),
        (unresolvable_session, True),
        (unresolvable_other, False),
        (lookalike, False),
        (CallableEvaluator(), True),
        (Checks().aware, True),
        (Checks().flat, False),
        (decorated, True),
        (functools.partial(with_threshold, min_calls=2), True),
        (functools.partial(defaulted_flag, strict=True), False),
        (lambda output, expected: OK, False),
        (lambda output, expected, session: OK, True),
        (lambda *args: OK, False),
        (max, False),  # no readable signature
    ],
    ids=lambda v: evaluator_name(v) if callable(v) else str(v),
)
def test_is_session_aware_reads_the_third_parameter(fn: Callable[..., Any], aware: bool) -> None:
    assert is_session_aware(fn) is aware


def test_string_annotations_really_are_strings_in_this_module() -> None:
    assert typed_view.__annotations__["session"] == "SessionView"
    assert optional_view.__annotations__["session"] == "SessionView | None"


def test_a_name_the_module_binds_to_another_class_is_not_our_session() -> None:
    class DbSession:
        pass

    namespace: dict[str, Any] = {"Session": DbSession}
    exec(
        "from __future__ import annotations\n"
        "def check(output, expected, db: Session | None = None):\n"
        "    return None\n",
        namespace,
    )
    assert is_session_aware(namespace["check"]) is False


def test_session_names_resolve_when_imported_only_for_type_checking() -> None:
    namespace: dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "def check(output, expected, session: SessionViewProtocol | None = None):\n"
        "    return None\n",
        namespace,
    )
    assert is_session_aware(namespace["check"]) is True


def test_evaluated_annotations_work_too() -> None:
    """Modules without `from __future__ import annotations` hold real objects."""

    class MyView(SessionViewProtocol, typing.Protocol):
        pass

    def check(output: str, expected: str, session: Any = None) -> Score:
        return OK

    cases: list[tuple[object, bool]] = [
        (SessionView | None, True),
        (Optional["SessionView"], True),  # a ForwardRef inside a union
        (MyView | None, True),
        (dict[str, Any] | None, False),
        (int, False),
    ]
    for annotation, aware in cases:
        check.__annotations__["session"] = annotation
        assert is_session_aware(check) is aware, annotation


@pytest.mark.parametrize(
    "fn",
    [
        lambda *args: Score(value=1.0, passed=isinstance(args[2], SessionView)),
        functools.partial(star_args),
        functools.partial(defaulted_untyped),
    ],
    ids=["lambda-star-args", "partial-star-args", "partial-defaulted"],
)
def test_the_marker_makes_lambdas_and_partials_session_aware(fn: Callable[..., Any]) -> None:
    assert is_session_aware(fn) is False
    marked = session_aware(fn)
    assert marked is fn
    assert is_session_aware(marked) is True
    view = Session().view()
    assert run_evaluator(marked, "out", "exp", view).passed


def test_the_marker_can_also_declare_a_plain_evaluator() -> None:
    def odd(output: str, expected: str, session: SessionView) -> Score:
        return OK

    setattr(odd, SESSION_AWARE_ATTR, False)
    assert is_session_aware(odd) is False


def test_session_aware_wraps_callables_that_refuse_attributes() -> None:
    seen: list[tuple[Any, ...]] = []

    class Holder:
        def check(self, *args: Any) -> Score:
            seen.append(args)
            return OK

    marked = session_aware(Holder().check)
    assert is_session_aware(marked) is True
    session = Session()
    assert run_evaluator(marked, "o", "e", session) == OK
    assert seen == [("o", "e", session)]


# -- adapt ------------------------------------------------------------------------------


def test_adapt_ignores_the_session_and_keeps_the_name() -> None:
    calls: list[tuple[str, str]] = []

    def check(output: str, expected: str) -> Score:
        calls.append((output, expected))
        return OK

    adapted = adapt(check)
    assert is_session_aware(adapted) is True
    assert evaluator_name(adapted) == "check"
    assert adapted("o", "e", Session().view()) == OK
    assert calls == [("o", "e")]


def test_adapt_returns_session_aware_evaluators_unchanged() -> None:
    aware = tool_called("search")
    assert adapt(aware) is aware  # type: ignore[arg-type]  # adapt takes plain ones


# -- run_evaluator ----------------------------------------------------------------------


def test_run_evaluator_passes_the_session_only_to_session_aware_evaluators() -> None:
    session = Session()
    session.dispatch(
        ToolInvoked(
            name="search",
            params={},
            result=ToolResult("hit"),
            success=True,
            call_id="1",
            duration_ms=1.0,
        )
    )
    assert run_evaluator(exact_match, "4", "4", session.view()).passed
    assert run_evaluator(tool_called("search"), "4", "4", session.view()).passed
    assert not run_evaluator(tool_called("fetch"), "4", "4", session.view()).passed


def test_run_evaluator_needs_a_session_for_session_aware_evaluators() -> None:
    with pytest.raises(ConfigurationError, match=r"tool_called\('search'\) is session-aware"):
        run_evaluator(tool_called("search"), "4", "4")


@pytest.mark.parametrize("returned", [True, 1.0, None, "passed", {"value": 1.0}])
def test_run_evaluator_rejects_anything_but_a_score(returned: object) -> None:
    def sloppy(output: str, expected: str) -> Any:
        return returned

    with pytest.raises(InvalidScoreError, match=r"evaluator sloppy returned \w+, not a Score"):
        run_evaluator(sloppy, "o", "e")


def test_run_evaluator_rejects_async_evaluators_without_leaking_a_coroutine() -> None:
    async def later(output: str, expected: str) -> Score:
        return OK

    with pytest.raises(InvalidScoreError, match="is async"):
        run_evaluator(later, "o", "e")  # type: ignore[arg-type]  # async is the mistake


def test_run_evaluator_lets_evaluator_exceptions_through() -> None:
    def broken(output: str, expected: str) -> Score:
        raise KeyError("missing field")

    with pytest.raises(KeyError, match="missing field"):
        run_evaluator(broken, "o", "e")


# -- classify_error ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "default", "kind"),
    [
        (JudgeError("garbage"), "evaluator", "judge"),
        (DeadlineExceededError("late"), "agent", "timeout"),
        (TimeoutError("late"), "evaluator", "timeout"),
        (AdapterTimeoutError("slow provider"), "agent", "timeout"),
        (BudgetExceededError("too many tokens"), "agent", "budget"),
        (KeyError("x"), "evaluator", "evaluator"),
        (RuntimeError("boom"), "agent", "agent"),
    ],
)
def test_classify_error(exc: BaseException, default: ErrorKind, kind: ErrorKind) -> None:
    assert classify_error(exc, default) == kind


def test_classify_error_defaults_to_the_evaluator_stage() -> None:
    assert classify_error(ValueError("bad")) == "evaluator"


# -- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "name"),
    [
        (exact_match, "exact_match"),
        (contains, "contains"),
        (tool_called("search"), "tool_called('search')"),
        (functools.partial(contains, case_sensitive=False), "contains(case_sensitive=False)"),
        (functools.partial(with_threshold, min_calls=2), "with_threshold(min_calls=2)"),
        (CallableEvaluator(), "CallableEvaluator"),
        (Checks().flat, "flat"),
        (lambda o, e: OK, "<lambda>"),
    ],
)
def test_evaluator_name(fn: Callable[..., Any], name: str) -> None:
    assert evaluator_name(fn) == name
