"""Session-aware evaluators: assertions on how the agent worked, not only what it said.

Each factory returns a `SessionEvaluator` named after its call (`tool_called('search')`)
whose reason states what was found and what was expected. They read the events adapters
publish: `ToolInvoked` for tool calls and `PromptExecuted` for usage, model requests and
timing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from weakincentives.errors import ConfigurationError
from weakincentives.runtime.session import (
    PromptExecuted,
    SessionProtocol,
    SessionViewProtocol,
    ToolInvoked,
)

from .._records import Metric, Score
from ._protocols import SessionEvaluator, evaluator_name, named, show

__all__ = [
    "all_tools_succeeded",
    "latency_under",
    "max_model_requests",
    "slice_contains",
    "token_usage_under",
    "tool_args_match",
    "tool_call_count",
    "tool_called",
    "tool_not_called",
    "tool_sequence",
]

T = TypeVar("T")
AnySession = SessionProtocol | SessionViewProtocol
SequenceMode = Literal["exact", "in_order", "any_order"]
_Check = Callable[[AnySession], Score]


def _evaluator(name: str, check: _Check) -> SessionEvaluator[object, object]:
    def evaluate(output: object, expected: object, session: AnySession) -> Score:
        del output, expected
        return check(session)

    return named(evaluate, name, aware=True)


def _verdict(passed: bool, reason: str, *metrics: Metric) -> Score:
    return Score(value=1.0 if passed else 0.0, passed=passed, reason=reason, metrics=metrics)


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _runs(n: int) -> str:
    return "1 prompt run" if n == 1 else f"{n} prompt runs"


def _calls(session: AnySession) -> tuple[ToolInvoked, ...]:
    return session[ToolInvoked].all()


def _others(calls: Sequence[ToolInvoked]) -> str:
    if not calls:
        return "no tools were called"
    counts = Counter(c.name for c in calls)
    return "tools called: " + ", ".join(f"{n} x{k}" for n, k in counts.items())


def _check_name(factory: str, name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{factory} needs a tool name (a non-empty str), got {name!r}")


def _check_count(factory: str, label: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{factory} {label} must be an int >= 0, got {value!r}")


def _check_limit(factory: str, label: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigurationError(f"{factory} {label} must be a number >= 0, got {value!r}")


# -- tool calls -----------------------------------------------------------------------


def tool_called(name: str) -> SessionEvaluator[object, object]:
    """Pass when the tool `name` was called at least once.

    Reason: `search called 0 times; expected >= 1 (tools called: lookup x2)`.
    """
    _check_name("tool_called", name)
    return _count_evaluator(f"tool_called({name!r})", name, 1, None)


def tool_not_called(name: str) -> SessionEvaluator[object, object]:
    """Pass when the tool `name` was never called.

    Reason: `fallback called 2 times; expected 0`.
    """
    _check_name("tool_not_called", name)
    return _count_evaluator(f"tool_not_called({name!r})", name, 0, 0)


def _range_text(min_count: int, max_count: int | None) -> str:
    if max_count is None:
        return f">= {min_count}"
    if min_count == max_count:
        return f"{min_count}" if min_count == 0 else f"exactly {min_count}"
    if min_count == 0:
        return f"<= {max_count}"
    return f"between {min_count} and {max_count}"


def tool_call_count(
    name: str, min_count: int = 0, max_count: int | None = None
) -> SessionEvaluator[object, object]:
    """Pass when the tool `name` was called between `min_count` and `max_count` times.

    Both bounds are inclusive; `max_count=None` means no upper bound.
    Reason: `research called 4 times; expected between 1 and 3`.

    Raises:
        ConfigurationError: a negative bound, or `max_count < min_count`.
    """
    _check_name("tool_call_count", name)
    _check_count("tool_call_count", "min_count", min_count)
    if max_count is not None:
        _check_count("tool_call_count", "max_count", max_count)
        if max_count < min_count:
            raise ConfigurationError(
                f"tool_call_count max_count ({max_count}) is below min_count ({min_count})"
            )
    label = f"tool_call_count({name!r}, min_count={min_count}, max_count={max_count})"
    return _count_evaluator(label, name, min_count, max_count)


def _count_evaluator(
    label: str, name: str, min_count: int, max_count: int | None
) -> SessionEvaluator[object, object]:
    wanted = _range_text(min_count, max_count)

    def check(session: AnySession) -> Score:
        calls = _calls(session)
        n = sum(1 for c in calls if c.name == name)
        passed = n >= min_count and (max_count is None or n <= max_count)
        reason = f"{name} called {_times(n)}; expected {wanted}"
        if not passed and n == 0:
            reason += f" ({_others(calls)})"
        return _verdict(passed, reason, Metric("calls", float(n)))

    return _evaluator(label, check)


def all_tools_succeeded() -> SessionEvaluator[object, object]:
    """Pass when no tool call failed.

    A call failed when its `ToolInvoked.success` (or its `ToolResult.success`) is false:
    a handler returning a failed result, a handler that raised, arguments that did not
    validate, an unknown tool. A run without tool calls passes.
    Reason: `1 of 3 tool calls failed: search (RuntimeError: boom); expected no failures`.
    Each failure shows the call's error (or, without one, the message the model got).
    """

    def check(session: AnySession) -> Score:
        calls = _calls(session)
        failed = [c for c in calls if not (c.success and c.result.success)]
        metric = Metric("failed_calls", float(len(failed)))
        if not calls:
            return _verdict(True, "no tools were called; expected no failures", metric)
        if not failed:
            return _verdict(True, f"all {len(calls)} tool calls succeeded", metric)
        details = ", ".join(f"{c.name} ({_clip(c.error or c.result.message)})" for c in failed)
        return _verdict(
            False,
            f"{len(failed)} of {len(calls)} tool calls failed: {details}; expected no failures",
            metric,
        )

    return _evaluator("all_tools_succeeded()", check)


def tool_sequence(
    names: Sequence[str], mode: SequenceMode = "exact"
) -> SessionEvaluator[object, object]:
    """Pass when the tool calls follow `names`.

    Modes:
        `exact`: the calls are exactly `names`, in order, nothing else.
        `in_order`: `names` appear in this order; other calls may come between.
        `any_order`: each of `names` was called (as many times as listed), in any order.

    Reason: `tool calls were [search, answer]; expected [search, fetch, answer] in order
    (matched search, then no fetch after it)`.

    Raises:
        ConfigurationError: `names` is a bare string, or an unknown mode.
    """
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ConfigurationError(
            f"tool_sequence needs a list of tool names, got {names!r}; "
            "write tool_sequence(['search']) for a single tool",
        )
    if mode not in ("exact", "in_order", "any_order"):
        raise ConfigurationError(
            f"tool_sequence mode must be 'exact', 'in_order' or 'any_order', got {mode!r}"
        )
    expected = list(names)

    def check(session: AnySession) -> Score:
        actual = [c.name for c in _calls(session)]
        found = f"tool calls were [{', '.join(actual)}]"
        wanted = f"[{', '.join(expected)}]"
        if mode == "exact":
            ok = actual == expected
            return _verdict(ok, f"{found}; expected exactly {wanted}")
        if mode == "any_order":
            missing = Counter(expected) - Counter(actual)
            detail = "" if not missing else f" (missing: {', '.join(missing.elements())})"
            return _verdict(not missing, f"{found}; expected each of {wanted} in any order{detail}")
        matched = _matched_prefix(actual, expected)
        ok = matched == len(expected)
        if ok:
            detail = ""
        elif matched:
            done = ", ".join(expected[:matched])
            detail = f" (matched {done}, then no {expected[matched]} after it)"
        else:
            detail = f" (no {expected[0]} call)"
        return _verdict(ok, f"{found}; expected {wanted} in this order{detail}")

    return _evaluator(f"tool_sequence({expected!r}, mode={mode!r})", check)


def _matched_prefix(actual: Sequence[str], expected: Sequence[str]) -> int:
    """How many of `expected` appear, in order, as a subsequence of `actual`."""
    matched = 0
    for name in actual:
        if matched < len(expected) and name == expected[matched]:
            matched += 1
    return matched


def tool_args_match(name: str, subset: Mapping[str, Any]) -> SessionEvaluator[object, object]:
    """Pass when some call of the tool `name` had arguments containing `subset`.

    Nested dicts are compared recursively (extra keys allowed at every level); any other
    value, lists included, must be equal.
    Reason: `search called 1 time, with arguments {'query': 'london'}; expected a call
    with arguments matching {'query': 'paris'}`.
    """
    _check_name("tool_args_match", name)
    if not isinstance(subset, Mapping):
        raise ConfigurationError(f"tool_args_match subset must be a mapping, got {subset!r}")
    wanted = show(dict(subset))

    def check(session: AnySession) -> Score:
        calls = [c for c in _calls(session) if c.name == name]
        for i, call in enumerate(calls, start=1):
            if _contains_subset(call.params, subset):
                return _verdict(
                    True, f"{name} call {i} of {len(calls)} had arguments matching {wanted}"
                )
        if not calls:
            return _verdict(
                False, f"{name} called 0 times; expected a call with arguments matching {wanted}"
            )
        seen = ", ".join(show(dict(c.params), 100) for c in calls[:5])
        more = f" and {len(calls) - 5} more" if len(calls) > 5 else ""
        return _verdict(
            False,
            f"{name} called {_times(len(calls))}, with arguments {seen}{more}; "
            f"expected a call with arguments matching {wanted}",
        )

    return _evaluator(f"tool_args_match({name!r}, {wanted})", check)


def _contains_subset(actual: object, expected: object) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and _contains_subset(actual[key], value)
            for key, value in expected.items()
        )
    return actual == expected


# -- usage, requests, timing ----------------------------------------------------------


def token_usage_under(max_tokens: int) -> SessionEvaluator[object, object]:
    """Pass when input plus output tokens over every prompt run are at most `max_tokens`.

    Reason: `used 5200 tokens (4000 input + 1200 output) over 2 prompt runs; expected
    <= 5000`.
    """
    _check_count("token_usage_under", "max_tokens", max_tokens)

    def check(session: AnySession) -> Score:
        runs = session[PromptExecuted].all()
        used_in = sum(r.usage.input_tokens for r in runs)
        used_out = sum(r.usage.output_tokens for r in runs)
        total = used_in + used_out
        reason = (
            f"used {total} tokens ({used_in} input + {used_out} output) over "
            f"{_runs(len(runs))}; expected <= {max_tokens}"
        )
        return _verdict(total <= max_tokens, reason, Metric("tokens", float(total)))

    return _evaluator(f"token_usage_under({max_tokens})", check)


def max_model_requests(n: int) -> SessionEvaluator[object, object]:
    """Pass when the prompt runs made at most `n` model requests in total.

    Reason: `made 7 model requests over 2 prompt runs; expected <= 5`.
    """
    _check_count("max_model_requests", "n", n)

    def check(session: AnySession) -> Score:
        runs = session[PromptExecuted].all()
        made = sum(r.model_requests for r in runs)
        reason = f"made {made} model requests over {_runs(len(runs))}; expected <= {n}"
        return _verdict(made <= n, reason, Metric("model_requests", float(made)))

    return _evaluator(f"max_model_requests({n})", check)


def latency_under(ms: float) -> SessionEvaluator[object, object]:
    """Pass when the prompt runs took at most `ms` milliseconds in total.

    Time is the sum of `PromptExecuted.duration_ms`, the wall time each run recorded.
    Reason: `took 1532 ms over 1 prompt run; expected <= 1000 ms`.
    """
    _check_limit("latency_under", "ms", ms)

    def check(session: AnySession) -> Score:
        runs = session[PromptExecuted].all()
        took = sum(r.duration_ms for r in runs)
        reason = f"took {took:.0f} ms over {_runs(len(runs))}; expected <= {ms:g} ms"
        return _verdict(took <= ms, reason, Metric("latency_ms", took))

    return _evaluator(f"latency_under({ms!r})", check)


# -- custom slices --------------------------------------------------------------------


def slice_contains(
    slice_type: type[T],
    predicate: Callable[[T], bool] | None = None,
    min_count: int = 1,
) -> SessionEvaluator[object, object]:
    """Pass when at least `min_count` values of the slice `slice_type` match `predicate`.

    Without a predicate every value counts.
    Reason: `1 of 3 Plan values match has_steps; expected >= 2`.
    """
    if not isinstance(slice_type, type):
        raise ConfigurationError(f"slice_contains needs a type, got {slice_type!r}")
    _check_count("slice_contains", "min_count", min_count)
    kind = slice_type.__name__
    pred_name = None if predicate is None else evaluator_name(predicate)

    def check(session: AnySession) -> Score:
        values = session[slice_type].all()
        if predicate is None:
            n = len(values)
            reason = f"{n} {kind} values in the session; expected >= {min_count}"
        else:
            n = sum(1 for v in values if predicate(v))
            reason = (
                f"{n} of {len(values)} {kind} values match {pred_name}; expected >= {min_count}"
            )
        return _verdict(n >= min_count, reason, Metric("matches", float(n)))

    parts = [kind, *([pred_name] if pred_name else []), f"min_count={min_count}"]
    return _evaluator(f"slice_contains({', '.join(parts)})", check)
