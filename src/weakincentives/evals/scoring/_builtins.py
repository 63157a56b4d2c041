"""Built-in evaluators and combinators: `exact_match`, `contains`, `all_of`, `any_of` ...

Combinators accept any mix of plain and session-aware evaluators. The result is plain
when every child is plain, and session-aware (`(output, expected, session)`) as soon as
one child is; plain children are then called without the session, so `adapt()` is
optional (and still works). Every child runs, even after one fails or raises.

The output evaluators here never block, so they are marked `inline_evaluator`; a
combinator is inline when every child is (see `inline_evaluator`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast, overload

from weakincentives.errors import ConfigurationError
from weakincentives.runtime.session import SessionProtocol, SessionViewProtocol

from .._records import Metric, Score
from ._fields import is_structured, on_field, unreadable

# `adapt`, `is_session_aware`, `run_evaluator` and `classify_error` live in
# `_protocols`; they are re-exported here because the spec places them in this module.
from ._protocols import (
    Evaluator,
    SessionEvaluator,
    adapt,
    call_evaluator,
    classify_error,
    evaluator_name,
    inline_evaluator,
    is_inline_evaluator,
    is_session_aware,
    mark_plain,
    named,
    run_evaluator,
    show,
)

__all__ = [
    "COMBINED_ATTR",
    "adapt",
    "all_of",
    "any_of",
    "classify_error",
    "combined_parts",
    "contains",
    "contains_ci",
    "exact_match",
    "is_session_aware",
    "not_",
    "recombine",
    "run_evaluator",
    "threshold",
]

OutputT = TypeVar("OutputT")
ExpectedT = TypeVar("ExpectedT")

_AnySession = SessionProtocol | SessionViewProtocol


def _verdict(passed: bool, reason: str) -> Score:
    return Score(value=1.0 if passed else 0.0, passed=passed, reason=reason)


# -- output evaluators ----------------------------------------------------------------


_CONFIGURE: Any = object()
"""Default of an evaluator's `output`: called with only `field=`, it returns an evaluator."""


@overload
def exact_match(output: object, expected: object) -> Score: ...
@overload
def exact_match(*, field: str) -> Evaluator[object, object]: ...
@inline_evaluator
@mark_plain
def exact_match(
    output: object = _CONFIGURE, expected: object = _CONFIGURE, *, field: str | None = None
) -> Score | Evaluator[object, object]:
    """Pass when `output == expected`.

    `exact_match(field="answer")` is the evaluator comparing `output.answer` (see
    `on_field`).

    Examples:
        >>> exact_match("hello", "hello").passed
        True
        >>> exact_match("hello", "Hello").reason
        "expected 'Hello', got 'hello'"
        >>> exact_match(field="answer")({"answer": "4"}, "4").passed
        True
    """
    if output is _CONFIGURE:
        return on_field(exact_match, _need_field("exact_match", field))
    if output == expected:
        return _verdict(True, f"output equals expected {show(expected)}")
    if type(output) is not type(expected):
        hint = ""
        if is_structured(output) and not is_structured(expected):
            hint = f"; {unreadable('exact_match', output, 'a value like expected')}"
        return _verdict(
            False,
            f"expected {show(expected)} ({type(expected).__name__}), "
            f"got {show(output)} ({type(output).__name__}){hint}",
        )
    return _verdict(False, f"expected {show(expected)}, got {show(output)}")


def _need_field(kind: str, field: str | None) -> str:
    if not field:
        raise ConfigurationError(f"{kind}() needs output and expected, or field='NAME'")
    return field


@overload
def contains(output: object, expected: object, *, case_sensitive: bool = True) -> Score: ...
@overload
def contains(*, field: str, case_sensitive: bool = True) -> Evaluator[object, object]: ...
@inline_evaluator
@mark_plain
def contains(
    output: object = _CONFIGURE,
    expected: object = _CONFIGURE,
    *,
    case_sensitive: bool = True,
    field: str | None = None,
) -> Score | Evaluator[object, object]:
    """Pass when `expected` occurs in `output`.

    `contains(field="answer")` is the evaluator searching `output.answer` (see `on_field`);
    an output that is neither text nor a collection fails, its reason saying so.

    A string output is searched for `str(expected)` as a substring; a list, tuple, set,
    frozenset or dict output is tested for membership (`expected in output`). Use
    `contains_ci`, or `functools.partial(contains, case_sensitive=False)`, to ignore case.

    Examples:
        >>> contains("The answer is 42.", "42").passed
        True
        >>> contains("The answer is 42.", "43").reason
        "'43' not found in output 'The answer is 42.'"

    """
    if output is _CONFIGURE:
        part = functools.partial(contains, case_sensitive=case_sensitive)
        return on_field(mark_plain(part), _need_field("contains", field))
    if isinstance(output, str):
        needle = expected if isinstance(expected, str) else str(expected)
        haystack = output
        if not case_sensitive:
            needle, haystack = needle.casefold(), haystack.casefold()
        found = needle in haystack
    elif isinstance(output, list | tuple | set | frozenset | dict):
        items: Iterable[object] = output
        if case_sensitive or not isinstance(expected, str):
            found = expected in items
        else:
            folded = expected.casefold()
            found = any(isinstance(i, str) and i.casefold() == folded for i in items)
    else:
        return _verdict(False, unreadable("contains", output, "text or a collection"))
    mode = "" if case_sensitive else " (case-insensitive)"
    where = "in output" if isinstance(output, str) else "among output items"
    if found:
        return _verdict(True, f"{show(expected)} found{mode} {where}")
    return _verdict(False, f"{show(expected)} not found{mode} {where} {show(output)}")


@inline_evaluator
@mark_plain
def contains_ci(output: object, expected: object) -> Score:
    """`contains`, ignoring case (Unicode case folding).

    Examples:
        >>> contains_ci("PARIS is the capital", "paris").passed
        True
    """
    return contains(output, expected, case_sensitive=False)


# -- combinators ----------------------------------------------------------------------


@overload
def all_of(  # type: ignore[overload-overlap]  # first match wins: all plain -> plain
    *evaluators: Evaluator[OutputT, ExpectedT],
) -> Evaluator[OutputT, ExpectedT]: ...
@overload
def all_of(
    *evaluators: Evaluator[Any, Any] | SessionEvaluator[Any, Any],
) -> SessionEvaluator[Any, Any]: ...
def all_of(*evaluators: Any) -> Any:
    """Combine evaluators; all must pass.

    Every child runs, even after one fails, so the reason lists each verdict. The value is
    the mean of the children's values; the reason joins theirs as `name: reason; ...`;
    the metrics hold each child's value under its name (weight 0, its verdict in the
    metadata as `passed`: per-check pass rates) and each child's own metrics as
    `name.metric` (weight 0). If children raise, the others still run and then
    the first exception is re-raised, with a note naming the child.

    Examples:
        >>> s = all_of(exact_match, contains)("4", "4")
        >>> s.passed, s.reason
        (True, "exact_match: output equals expected '4'; contains: '4' found in output")

    Raises:
        ConfigurationError: no evaluators, or one that is not callable.
    """
    return _combine("all_of", evaluators, decide=all, aggregate=_mean)


@overload
def any_of(  # type: ignore[overload-overlap]  # first match wins: all plain -> plain
    *evaluators: Evaluator[OutputT, ExpectedT],
) -> Evaluator[OutputT, ExpectedT]: ...
@overload
def any_of(
    *evaluators: Evaluator[Any, Any] | SessionEvaluator[Any, Any],
) -> SessionEvaluator[Any, Any]: ...
def any_of(*evaluators: Any) -> Any:
    """Combine evaluators; at least one must pass. The value is the children's maximum.

    Runs every child and reports like `all_of`.

    Examples:
        >>> any_of(exact_match, contains)("The answer is 4", "4").passed
        True
    """
    return _combine("any_of", evaluators, decide=any, aggregate=max)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _unique_names(names: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _check_children(kind: str, evaluators: Sequence[Any]) -> None:
    if not evaluators:
        raise ConfigurationError(f"{kind}() needs at least one evaluator")
    for ev in evaluators:
        if not callable(ev):
            raise ConfigurationError(
                f"{kind}() takes evaluators (functions), got {type(ev).__name__}: {show(ev)}; "
                "did you forget to call a factory such as tool_called('name')?",
            )


def _combine(
    kind: str,
    evaluators: Sequence[Callable[..., Any]],
    *,
    decide: Callable[[Iterable[bool]], bool],
    aggregate: Callable[[Sequence[float]], float],
) -> Callable[..., Score]:
    _check_children(kind, evaluators)
    children = tuple(evaluators)
    aware = tuple(is_session_aware(c) for c in children)
    inline = all(is_inline_evaluator(c) for c in children)
    labels = _unique_names([evaluator_name(c) for c in children])
    name = f"{kind}({', '.join(evaluator_name(c) for c in children)})"

    def run(output: Any, expected: Any, session: _AnySession | None) -> Score:
        scores: list[Score | None] = []
        errors: list[tuple[str, Exception]] = []
        for child, child_aware, label in zip(children, aware, labels, strict=True):
            try:
                scores.append(call_evaluator(child, child_aware, output, expected, session))
            except Exception as exc:  # run the others first; re-raised below
                errors.append((label, exc))
                scores.append(None)
        if errors:
            raise _first_error(name, labels, scores, errors)
        done = cast(list[Score], scores)
        return Score(
            value=aggregate([s.value for s in done]),
            passed=decide(s.passed for s in done),
            reason="; ".join(
                f"{label}: {_reason(s)}" for label, s in zip(labels, done, strict=True)
            ),
            metrics=tuple(
                m for label, s in zip(labels, done, strict=True) for m in _metrics(label, s)
            ),
        )

    if any(aware):

        def combined_aware(output: Any, expected: Any, session: _AnySession) -> Score:
            return run(output, expected, session)

        setattr(combined_aware, COMBINED_ATTR, (kind, children))
        return named(combined_aware, name, aware=True, inline=inline, parts=tuple(evaluators))

    # A plain combination still runs as (output, expected); the optional session lets it
    # stand where a session-aware evaluator is called (EVALS.md lists both uses).
    def combined(output: Any, expected: Any, session: _AnySession | None = None) -> Score:
        del session
        return run(output, expected, None)

    setattr(combined, COMBINED_ATTR, (kind, children))
    return named(combined, name, aware=False, inline=inline, parts=tuple(evaluators))


COMBINED_ATTR = "__wink_combined__"
"""Where `all_of` / `any_of` keep their kind and children (to rebuild them)."""


def combined_parts(evaluator: object) -> tuple[str, tuple[Callable[..., Any], ...]] | None:
    """`("all_of" | "any_of", children)` of a combined evaluator, or None for any other."""
    parts = getattr(evaluator, COMBINED_ATTR, None)
    return parts if isinstance(parts, tuple) else None


def recombine(kind: str, children: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    """`all_of(*children)` or `any_of(*children)` by name (see `combined_parts`).

    Raises:
        ConfigurationError: `kind` is neither.
    """
    if kind not in ("all_of", "any_of"):
        raise ConfigurationError(f"cannot rebuild a {kind!r} evaluator")
    builder = all_of if kind == "all_of" else any_of
    return cast("Callable[..., Any]", builder(*children))


def _reason(score: Score) -> str:
    return score.reason or ("passed" if score.passed else "failed")


def _metrics(label: str, score: Score) -> list[Metric]:
    """The child's value and verdict (`passed`), then its metrics as `label.metric`."""
    out = [Metric(label, score.value, 0.0, {"passed": score.passed})]
    out += [Metric(f"{label}.{m.name}", m.value, 0.0, m.metadata) for m in score.metrics]
    return out


def _first_error(
    name: str,
    labels: Sequence[str],
    scores: Sequence[Score | None],
    errors: Sequence[tuple[str, Exception]],
) -> Exception:
    raised = dict(errors)
    outcomes = []
    for label, score in zip(labels, scores, strict=True):
        if score is None:
            outcomes.append(f"{label} raised {type(raised[label]).__name__}")
        else:
            outcomes.append(f"{label} {'passed' if score.passed else 'failed'}")
    first_label, first = errors[0]
    first.add_note(
        f"raised by {first_label} inside {name}; all children ran: {', '.join(outcomes)}"
    )
    return first


# -- wrappers -------------------------------------------------------------------------


@overload
def not_(
    evaluator: Evaluator[OutputT, ExpectedT],
) -> Evaluator[OutputT, ExpectedT]: ...
@overload
def not_(
    evaluator: SessionEvaluator[OutputT, ExpectedT],
) -> SessionEvaluator[OutputT, ExpectedT]: ...
def not_(evaluator: Any) -> Any:
    """Invert an evaluator: pass when it fails. The value is `1 - value`.

    Examples:
        >>> s = not_(contains)("all good", "error")
        >>> s.passed, s.reason
        (True, "contains failed as required: 'error' not found in output 'all good'")
    """
    _check_children("not_", (evaluator,))
    child_name = evaluator_name(evaluator)

    def invert(score: Score) -> Score:
        if score.passed:
            reason = f"{child_name} passed but was required to fail: {_reason(score)}"
        else:
            reason = f"{child_name} failed as required: {_reason(score)}"
        return Score(
            value=1.0 - score.value,
            passed=not score.passed,
            reason=reason,
            metrics=tuple(_metrics(child_name, score)),
        )

    return _wrap(f"not_({child_name})", evaluator, invert)


@overload
def threshold(
    evaluator: Evaluator[OutputT, ExpectedT], min_value: float
) -> Evaluator[OutputT, ExpectedT]: ...
@overload
def threshold(
    evaluator: SessionEvaluator[OutputT, ExpectedT], min_value: float
) -> SessionEvaluator[OutputT, ExpectedT]: ...
def threshold(evaluator: Any, min_value: float) -> Any:
    """Pass when the evaluator's value is at least `min_value` (its own verdict is ignored).

    Useful with graded evaluators: `threshold(llm_judge(adapter, "helpful"), 0.5)` also
    passes "fair" answers.

    Examples:
        >>> half = lambda output, expected: Score(value=0.5, passed=False, reason="half right")
        >>> threshold(half, 0.5)("x", "y").reason
        'half right; value 0.5 >= 0.5 required'
    """
    _check_children("threshold", (evaluator,))
    if isinstance(min_value, bool) or not isinstance(min_value, int | float):
        raise ConfigurationError(f"threshold min_value must be a number, got {show(min_value)}")
    child_name = evaluator_name(evaluator)

    def apply(score: Score) -> Score:
        passed = score.value >= min_value
        op = ">=" if passed else "<"
        return Score(
            value=score.value,
            passed=passed,
            reason=f"{_reason(score)}; value {score.value:g} {op} {min_value:g} required",
            metrics=score.metrics,
        )

    return _wrap(f"threshold({child_name}, {min_value!r})", evaluator, apply)


def _wrap(
    name: str, evaluator: Callable[..., Any], transform: Callable[[Score], Score]
) -> Callable[..., Score]:
    inline = is_inline_evaluator(evaluator)
    if is_session_aware(evaluator):

        def wrapped_aware(output: Any, expected: Any, session: _AnySession) -> Score:
            return transform(call_evaluator(evaluator, True, output, expected, session))

        return named(wrapped_aware, name, aware=True, inline=inline, parts=(evaluator,))

    def wrapped(output: Any, expected: Any) -> Score:
        return transform(call_evaluator(evaluator, False, output, expected, None))

    return named(wrapped, name, aware=False, inline=inline, parts=(evaluator,))
