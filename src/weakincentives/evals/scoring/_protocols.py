"""Evaluator protocols: plain and session-aware evaluators, detection, dispatch, names.

An evaluator is a function `(output, expected) -> Score`. A session-aware evaluator also
takes the run's session: `(output, expected, session) -> Score`. `is_session_aware` tells
the two apart, `run_evaluator` calls either kind and checks that a `Score` came back, and
`classify_error` maps an exception raised while scoring to the `ErrorKind` a result
records. `inline_evaluator` marks an evaluator that never blocks, so the local runner may
score an `async def` target's output on the event loop instead of in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from weakincentives.errors import (
    BudgetExceededError,
    ConfigurationError,
    DeadlineExceededError,
    InvalidScoreError,
    JudgeError,
)
from weakincentives.runtime.session import (
    Session,
    SessionProtocol,
    SessionView,
    SessionViewProtocol,
)

from .._records import ADAPTERS_ATTR, ErrorKind, Score

__all__ = [
    "INLINE_ATTR",
    "SESSION_AWARE_ATTR",
    "Evaluator",
    "SessionEvaluator",
    "adapt",
    "call_evaluator",
    "classify_error",
    "evaluator_name",
    "inline_evaluator",
    "is_inline_evaluator",
    "is_session_aware",
    "mark_plain",
    "named",
    "remember_kind",
    "run_evaluator",
    "session_aware",
    "show",
]

OutputT = TypeVar("OutputT")
ExpectedT = TypeVar("ExpectedT")
OutputT_contra = TypeVar("OutputT_contra", contravariant=True)
ExpectedT_contra = TypeVar("ExpectedT_contra", contravariant=True)
CallableT = TypeVar("CallableT", bound=Callable[..., Any])

SESSION_AWARE_ATTR = "__wink_session_aware__"
"""Attribute that, when present on an evaluator, decides whether it is session-aware."""

INLINE_ATTR = "__wink_inline__"
"""Attribute that, when true on an evaluator, says it never blocks (see `inline_evaluator`)."""


class Evaluator(Protocol[OutputT_contra, ExpectedT_contra]):
    """A plain evaluator: `(output, expected) -> Score`, pure and side-effect free.

    Examples:
        >>> def starts_right(output: str, expected: str) -> Score:
        ...     ok = output.startswith(expected)
        ...     return Score(value=float(ok), passed=ok, reason=f"starts with {expected!r}: {ok}")
        >>> starts_right("Paris is the capital", "Paris").passed
        True
    """

    def __call__(self, output: OutputT_contra, expected: ExpectedT_contra, /) -> Score:
        """Score `output` against `expected`."""
        ...


class SessionEvaluator(Protocol[OutputT_contra, ExpectedT_contra]):
    """A session-aware evaluator: `(output, expected, session) -> Score`.

    `session` is read-only in spirit: query slices (`session[ToolInvoked].all()`), do not
    dispatch into it.
    """

    def __call__(
        self,
        output: OutputT_contra,
        expected: ExpectedT_contra,
        session: SessionProtocol | SessionViewProtocol,
        /,
    ) -> Score:
        """Score `output` against `expected`, looking at what happened in `session`."""
        ...


# -- naming ---------------------------------------------------------------------------


def evaluator_name(evaluator: Callable[..., Any]) -> str:
    """Return the name reports and combinator reasons use for `evaluator`.

    Built-ins carry names like `tool_called('search')`; functions use `__name__`;
    `functools.partial` objects read as `func(arg, key=value)`; other callables use their
    class name.
    """
    name = getattr(evaluator, "__name__", None)
    if isinstance(name, str):
        return name
    if isinstance(evaluator, functools.partial):
        bound = [repr(a) for a in evaluator.args]
        bound += [f"{k}={v!r}" for k, v in evaluator.keywords.items()]
        return f"{evaluator_name(evaluator.func)}({', '.join(bound)})"
    return type(evaluator).__name__


def named(
    fn: CallableT,
    name: str,
    *,
    aware: bool,
    inline: bool = False,
    adapters: tuple[object, ...] = (),
    parts: tuple[object, ...] = (),
) -> CallableT:
    """Give `fn` a readable name and record its kind (for built-ins).

    `aware`: it takes the session; `inline`: it never blocks (see `inline_evaluator`);
    `adapters`: the models it calls; `parts`: evaluators it combines (their adapters
    become its own).
    """
    fn.__name__ = name
    fn.__qualname__ = name
    setattr(fn, SESSION_AWARE_ATTR, aware)
    setattr(fn, INLINE_ATTR, inline)
    found = list(adapters)
    for part in parts:
        found.extend(getattr(part, ADAPTERS_ATTR, ()))
    if found:
        setattr(fn, ADAPTERS_ATTR, tuple(found))
    return fn


def mark_plain(fn: CallableT) -> CallableT:
    """Record that `fn` is a plain evaluator, so dispatch skips reading its signature."""
    setattr(fn, SESSION_AWARE_ATTR, False)
    return fn


def show(value: object, limit: int = 80) -> str:
    """`repr(value)`, shortened to about `limit` characters for reasons."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# -- inline (non-blocking) evaluators ------------------------------------------------


def inline_evaluator(fn: CallableT) -> CallableT:
    """Mark `fn` as an evaluator that never blocks: pure computation, done in microseconds.

    Only for evaluators that never block: no I/O, no model calls, no locks, no waiting.
    The local runner scores an `async def` target's output with such an evaluator
    directly on the event loop, instead of handing each sample to a worker thread (which
    costs more than a string comparison, and adds up at high concurrency). Results are
    the same either way. An evaluator that does block would stall every sample in flight
    while it runs: leave it unmarked, and it runs in a worker thread.

    The built-in output evaluators (`exact_match`, `contains`, `contains_ci`,
    `regex_match`, `regex_search`, `json_equal`, `numeric_close`) are inline; `all_of`,
    `any_of`, `not_` and `threshold` are inline when every evaluator they combine is;
    LLM judges never are. Session-aware evaluators and trajectory scorers are always
    scored in a worker thread, as is every evaluator under `judge_concurrency=`.
    Callables that do not take attributes (bound methods) are wrapped.

    Examples:
        >>> @inline_evaluator
        ... def shouted(output: str, expected: str) -> Score:
        ...     ok = output == expected.upper()
        ...     return Score(value=float(ok), passed=ok)
        >>> is_inline_evaluator(shouted)
        True
    """
    try:
        setattr(fn, INLINE_ATTR, True)
    except (AttributeError, TypeError):
        inner = fn

        @functools.wraps(inner)
        def wrapper(*args: Any) -> Any:
            return inner(*args)

        setattr(wrapper, INLINE_ATTR, True)
        return cast(CallableT, wrapper)
    return fn


def is_inline_evaluator(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is marked as never blocking (`inline_evaluator`, the built-ins).

    A `functools.partial` is inline when the function it binds is
    (`partial(contains, case_sensitive=False)`); anything unmarked is not.
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, INLINE_ATTR, False) is True


# -- session awareness ----------------------------------------------------------------

_SESSION_TYPES: tuple[type[Any], ...] = (Session, SessionView, SessionProtocol, SessionViewProtocol)
_SESSION_NAMES: dict[str, Any] = {t.__name__: t for t in _SESSION_TYPES}
_SESSION_WORD = re.compile(r"\b(?:Session|SessionView|SessionProtocol|SessionViewProtocol)\b")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def session_aware(fn: Callable[..., Score]) -> SessionEvaluator[Any, Any]:
    """Mark `fn` as a session-aware evaluator (decorator).

    Use it where the signature cannot tell: lambdas with `*args`, `functools.partial`
    objects over untyped functions, a third parameter with a default and no annotation.
    Callables that do not take attributes (bound methods) are wrapped.

    Examples:
        >>> from weakincentives.runtime import ToolInvoked
        >>> check = session_aware(lambda *a: Score(value=1.0, passed=len(a[2][ToolInvoked]) > 0))
        >>> is_session_aware(check)
        True
    """
    try:
        setattr(fn, SESSION_AWARE_ATTR, True)
    except (AttributeError, TypeError):
        inner = fn

        @functools.wraps(inner)
        def wrapper(output: Any, expected: Any, session: Any) -> Score:
            return inner(output, expected, session)

        setattr(wrapper, SESSION_AWARE_ATTR, True)
        fn = wrapper
    return cast(SessionEvaluator[Any, Any], fn)


def is_session_aware(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes the session as a third positional argument.

    Decided, in order, by:

    1. the `__wink_session_aware__` attribute, when present (set by `session_aware`,
       `adapt`, the combinators and every built-in evaluator);
    2. the annotation of the third positional parameter: a session type (`Session`,
       `SessionView`, `SessionProtocol`, `SessionViewProtocol`, a subclass, or a union or
       `Optional` holding one) makes `fn` session-aware even when the parameter has a
       default. String annotations (`from __future__ import annotations`) are resolved
       in `fn`'s module; session type names resolve even when the module imports them
       only under `TYPE_CHECKING`;
    3. otherwise, a third positional parameter *without a default* makes `fn`
       session-aware whatever its annotation (or lack of one), since it cannot be
       called with two arguments.

    Everything else is a plain evaluator: two positional parameters, a defaulted third
    parameter that is not annotated as a session, keyword-only extras, `*args`, and
    callables whose signature cannot be read.
    """
    marker = getattr(fn, SESSION_AWARE_ATTR, None)
    if isinstance(marker, bool):
        return marker
    return remember_kind(_SESSION_AWARE, fn, _takes_session)


_SESSION_AWARE: weakref.WeakKeyDictionary[Any, tuple[object, bool]] = weakref.WeakKeyDictionary()


def remember_kind(
    cache: weakref.WeakKeyDictionary[Any, tuple[object, bool]],
    fn: Callable[..., Any],
    decide: Callable[[Callable[..., Any]], bool],
) -> bool:
    """`decide(fn)`, kept per callable while it lives and while its annotations stay.

    The kind of an evaluator is asked per sample, and reading a signature costs more than
    the scoring it decides. A callable that cannot be weakly referenced or hashed is
    decided each time; one whose `__annotations__` changed is decided again.
    """
    annotations = getattr(fn, "__annotations__", None)
    seen = dict(annotations) if isinstance(annotations, dict) else None
    try:
        entry = cache.get(fn)
    except TypeError:  # unhashable, or not weak-referenceable
        return decide(fn)
    if entry is not None and entry[0] == seen:
        return entry[1]
    found = decide(fn)
    with contextlib.suppress(TypeError):
        cache[fn] = (seen, found)
    return found


def _takes_session(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = [p for p in signature.parameters.values() if p.kind in _POSITIONAL]
    if len(positional) < 3:
        return False
    third = positional[2]
    if _annotation_is_session(third.annotation, fn):
        return True
    return third.default is inspect.Parameter.empty


def _annotation_is_session(annotation: Any, fn: Callable[..., Any]) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):
        namespace = {**_SESSION_NAMES, **_globals_of(fn)}
        try:
            # Annotations are code written by the evaluator's author; evaluating them is
            # what typing.get_type_hints does too.
            annotation = eval(annotation, namespace)
        except Exception:  # an unresolvable name: fall back to reading the text
            return bool(_SESSION_WORD.search(annotation))
    return _is_session_type(annotation)


def _is_session_type(tp: Any) -> bool:
    if isinstance(tp, str):
        return bool(_SESSION_WORD.search(tp))
    if isinstance(tp, typing.ForwardRef):
        return bool(_SESSION_WORD.search(tp.__forward_arg__))
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _is_session_type(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(_is_session_type(arg) for arg in typing.get_args(tp))
    if not isinstance(tp, type):
        return False
    # Nominal checks only: SessionViewProtocol is structural (any __getitem__ matches it),
    # so `issubclass(dict, SessionViewProtocol)` would be true.
    return (
        tp in _SESSION_TYPES
        or issubclass(tp, (Session, SessionView))
        or (SessionViewProtocol in tp.__mro__)
    )


def _globals_of(fn: Callable[..., Any]) -> dict[str, Any]:
    target: Any = fn
    for _ in range(64):  # partial of a wrapper of a method ...; bounded against cycles
        if isinstance(target, functools.partial):
            target = target.func
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    call = next((vars(k)["__call__"] for k in type(target).__mro__ if "__call__" in vars(k)), None)
    for candidate in (target, call):
        found = getattr(candidate, "__globals__", None)
        if isinstance(found, dict):
            return found
    module = sys.modules.get(getattr(target, "__module__", None) or type(target).__module__)
    return dict(vars(module)) if module is not None else {}


# -- adapting and calling -------------------------------------------------------------


def adapt(evaluator: Evaluator[OutputT, ExpectedT]) -> SessionEvaluator[OutputT, ExpectedT]:
    """Turn a plain evaluator into a session-aware one that ignores the session.

    The result keeps the evaluator's name, so combinator reasons still read
    `exact_match: ...`. An evaluator that is already session-aware is returned as is.

    Examples:
        >>> from weakincentives.runtime.session import Session
        >>> def same(output: str, expected: str) -> Score:
        ...     return Score(value=float(output == expected), passed=output == expected)
        >>> adapt(same)("a", "a", Session()).passed
        True
    """
    if is_session_aware(evaluator):
        return cast(SessionEvaluator[OutputT, ExpectedT], evaluator)

    def adapted(
        output: OutputT, expected: ExpectedT, session: SessionProtocol | SessionViewProtocol
    ) -> Score:
        del session
        return evaluator(output, expected)

    return named(
        adapted, evaluator_name(evaluator), aware=True, inline=is_inline_evaluator(evaluator)
    )


def call_evaluator(
    evaluator: Callable[..., Any],
    aware: bool,
    output: Any,
    expected: Any,
    session: SessionProtocol | SessionViewProtocol | None,
) -> Score:
    """Call `evaluator` with or without the session and check that it returned a `Score`.

    Raises:
        ConfigurationError: `aware` is true but there is no session to give it.
        InvalidScoreError: the evaluator returned something other than a `Score`.
    """
    if aware:
        if session is None:
            name = evaluator_name(evaluator)
            raise ConfigurationError(
                f"evaluator {name} is session-aware but was called without a session; "
                "call it through run_evaluator(..., session) or wrap a plain one with adapt()",
            )
        result = evaluator(output, expected, session)
    else:
        result = evaluator(output, expected)
    if isinstance(result, Score):
        return result
    name = evaluator_name(evaluator)  # only for the messages: this runs per sample
    if inspect.iscoroutine(result):
        result.close()  # never awaited: close it so Python does not warn about it
        raise InvalidScoreError(
            f"evaluator {name} is async; evaluators are plain functions returning a Score "
            "(run async checks in the agent and record their outcome in the session)",
        )
    raise InvalidScoreError(
        f"evaluator {name} returned {type(result).__name__}, not a Score; "
        "return Score(value=..., passed=..., reason=...)",
    )


def run_evaluator(
    evaluator: Evaluator[OutputT, ExpectedT] | SessionEvaluator[OutputT, ExpectedT],
    output: OutputT,
    expected: ExpectedT,
    session: SessionProtocol | SessionViewProtocol | None = None,
) -> Score:
    """Score one output: pass the session when the evaluator is session-aware.

    Examples:
        >>> run_evaluator(lambda o, e: Score(value=1.0, passed=o == e), "4", "4").passed
        True

    Raises:
        ConfigurationError: a session-aware evaluator and no session.
        InvalidScoreError: the evaluator returned something other than a `Score`.
        Exception: whatever the evaluator raised (see `classify_error`).
    """
    fn = cast(Callable[..., Any], evaluator)
    return call_evaluator(fn, is_session_aware(fn), output, expected, session)


def classify_error(exc: BaseException, default: ErrorKind = "evaluator") -> ErrorKind:
    """Return the `ErrorKind` a result records for `exc`, raised while in stage `default`.

    `JudgeError` -> `"judge"`; `DeadlineExceededError` and other `TimeoutError`s ->
    `"timeout"`; `BudgetExceededError` -> `"budget"`; anything else -> `default`.

    Examples:
        >>> classify_error(JudgeError("garbage"))
        'judge'
        >>> classify_error(KeyError("x"), default="agent")
        'agent'
    """
    if isinstance(exc, JudgeError):
        return "judge"
    if isinstance(exc, DeadlineExceededError | TimeoutError):
        return "timeout"
    if isinstance(exc, BudgetExceededError):
        return "budget"
    return default
