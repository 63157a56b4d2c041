"""More output evaluators: regular expressions, JSON structures and numbers.

Each is pure computation on the output, so each is marked `inline_evaluator`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from weakincentives import serde
from weakincentives.errors import ConfigurationError, InvalidDatasetError

from .._records import Score
from ._fields import is_structured, on_field, unreadable
from ._protocols import Evaluator, inline_evaluator, mark_plain, named, show

__all__ = ["json_equal", "numeric_close", "regex_match", "regex_search"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_NUMBER = re.compile(
    r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
)


def _verdict(passed: bool, reason: str) -> Score:
    return Score(value=1.0 if passed else 0.0, passed=passed, reason=reason)


def _text(kind: str, output: object) -> str:
    if isinstance(output, str):
        return output
    raise ConfigurationError(
        f"{kind} needs a str output, got {type(output).__name__}; "
        "turn the output into text first (for example with a custom evaluator)",
    )


# -- regular expressions --------------------------------------------------------------


def regex_match(
    pattern: str | re.Pattern[str] | None = None, flags: int = 0
) -> Evaluator[object, object]:
    """Evaluator that passes when the *whole* output matches `pattern` (`re.fullmatch`).

    With `pattern=None` each sample's `expected` is the pattern.

    Examples:
        >>> regex_match("[0-9]+")("42", None).passed
        True
        >>> regex_match("[0-9]+")("42 apples", None).reason
        "output '42 apples' does not fully match /[0-9]+/"

    Raises:
        ConfigurationError: `pattern` does not compile.
    """
    return _regex("regex_match", pattern, flags, full=True)


def regex_search(
    pattern: str | re.Pattern[str] | None = None, flags: int = 0
) -> Evaluator[object, object]:
    """Evaluator that passes when `pattern` occurs anywhere in the output (`re.search`).

    With `pattern=None` each sample's `expected` is the pattern.

    Examples:
        >>> regex_search("answer is ([0-9]+)")("The answer is 42.", None).reason
        "found 'answer is 42' at 4 for /answer is ([0-9]+)/"
    """
    return _regex("regex_search", pattern, flags, full=False)


def _compile(kind: str, pattern: str | re.Pattern[str], flags: int) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern if not flags else re.compile(pattern.pattern, pattern.flags | flags)
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ConfigurationError(f"{kind}: pattern {pattern!r} does not compile: {exc}") from exc


def _regex(
    kind: str, pattern: str | re.Pattern[str] | None, flags: int, *, full: bool
) -> Evaluator[object, object]:
    fixed = None if pattern is None else _compile(kind, pattern, flags)

    def evaluate(output: object, expected: object) -> Score:
        if fixed is not None:
            regex = fixed
        elif isinstance(expected, str | re.Pattern):
            try:
                regex = _compile(kind, expected, flags)
            except ConfigurationError as exc:
                raise InvalidDatasetError(f"{exc} (the pattern is the sample's expected)") from exc
        else:
            raise InvalidDatasetError(
                f"{kind}() without a pattern uses the sample's expected as the pattern, "
                f"but expected is {type(expected).__name__}: {show(expected)}",
            )
        text = _text(kind, output)
        shown = f"/{regex.pattern}/"
        if full:
            if regex.fullmatch(text):
                return _verdict(True, f"output matches {shown}")
            return _verdict(False, f"output {show(text)} does not fully match {shown}")
        found = regex.search(text)
        if found:
            return _verdict(True, f"found {show(found.group(0))} at {found.start()} for {shown}")
        return _verdict(False, f"no match for {shown} in output {show(text)}")

    label = "expected" if fixed is None else f"/{fixed.pattern}/"
    return named(evaluate, f"{kind}({label})", aware=False, inline=True)


# -- JSON -----------------------------------------------------------------------------


class _NotJson(Exception):
    pass


def _as_json(value: object) -> Any:
    if isinstance(value, bytes | bytearray):
        value = value.decode()
    if isinstance(value, str):
        fenced = _FENCE.match(value)
        try:
            return json.loads(fenced.group(1) if fenced else value)
        except json.JSONDecodeError as exc:
            raise _NotJson(str(exc)) from exc
    return serde.dump(value)


@inline_evaluator
@mark_plain
def json_equal(output: object, expected: object, *, ignore_extra_keys: bool = False) -> Score:
    """Pass when `output` and `expected` hold the same JSON structure.

    Strings are parsed as JSON (a ```json fence around the text is allowed); other values
    (dicts, lists, dataclasses) are converted to JSON data first. Objects compare without
    regard to key order, arrays in order, and `true` never equals `1`. With
    `ignore_extra_keys=True` (use `functools.partial`), keys present in the output but
    absent from expected are allowed at any depth.

    Examples:
        >>> json_equal('{"b": 2, "a": 1}', {"a": 1, "b": 2}).passed
        True
        >>> json_equal('{"a": {"b": 3}}', '{"a": {"b": 2}}').reason
        'at $.a.b: expected 2, got 3'

    Raises:
        InvalidDatasetError: `expected` is a string that is not valid JSON.
    """
    try:
        want = _as_json(expected)
    except _NotJson as exc:
        raise InvalidDatasetError(
            f"json_equal: expected is not valid JSON ({exc}): {show(expected)}"
        ) from exc
    try:
        got = _as_json(output)
    except _NotJson as exc:
        return _verdict(False, f"output is not valid JSON ({exc}): {show(output)}")
    diff = _json_diff(got, want, "$", ignore_extra_keys=ignore_extra_keys)
    if diff is None:
        extra = " (extra keys ignored)" if ignore_extra_keys else ""
        return _verdict(True, f"output JSON equals expected{extra}")
    return _verdict(False, diff)


def _json_diff(got: Any, want: Any, path: str, *, ignore_extra_keys: bool) -> str | None:
    """Describe the first difference between two JSON values, or None when equal."""
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        for key in want:
            if key not in got:
                return f"at {path}: missing key {key!r} (expected {show(want[key])})"
            diff = _json_diff(
                got[key], want[key], f"{path}.{key}", ignore_extra_keys=ignore_extra_keys
            )
            if diff is not None:
                return diff
        extra = [k for k in got if k not in want]
        if extra and not ignore_extra_keys:
            return f"at {path}: unexpected keys {extra}; expected only {list(want)}"
        return None
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return f"at {path}: expected {len(want)} items, got {len(got)}: {show(got)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            diff = _json_diff(g, w, f"{path}[{i}]", ignore_extra_keys=ignore_extra_keys)
            if diff is not None:
                return diff
        return None
    if isinstance(got, bool) != isinstance(want, bool) or got != want:
        return f"at {path}: expected {show(want)}, got {show(got)}"
    return None


# -- numbers --------------------------------------------------------------------------


def _parse_number(value: object) -> float | None:
    """Read a number: ints and floats as is; in text, the whole text or its *last* number.

    Thousands separators (`1,234.5`) are understood; booleans are not numbers.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        return float(value.strip())
    except ValueError:
        pass
    found = _NUMBER.findall(value)
    return float(found[-1].replace(",", "")) if found else None


def numeric_close(
    *, rel_tol: float = 1e-9, abs_tol: float = 0.0, field: str | None = None
) -> Evaluator[object, object]:
    """Evaluator that passes when the output's number is close to the expected number.

    With `field="answer"` it reads `output.answer` (see `on_field`); an output it cannot
    read a number from (a structured object) fails, its reason saying so.

    Closeness is `math.isclose(output, expected, rel_tol=rel_tol, abs_tol=abs_tol)`.
    A text is read as a number whole, or else its *last* number is used (thousands
    separators allowed): "The answer is 1,234." reads as 1234.

    Examples:
        >>> close = numeric_close(abs_tol=0.01)
        >>> close("The total is 3.141", 3.14).passed
        True
        >>> close("about 3.2", "3.14").reason
        'output 3.2 differs from expected 3.14 by 0.06 (rel_tol=1e-09, abs_tol=0.01)'

    Raises:
        ConfigurationError: a negative tolerance.
    """
    for label, tol in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        if not (isinstance(tol, int | float) and tol >= 0 and math.isfinite(tol)):
            raise ConfigurationError(
                f"numeric_close {label} must be a finite number >= 0, got {tol!r}"
            )
    tolerance = f"rel_tol={rel_tol:g}, abs_tol={abs_tol:g}"

    def evaluate(output: object, expected: object) -> Score:
        want = _parse_number(expected)
        if want is None:
            raise InvalidDatasetError(f"numeric_close: expected {show(expected)} is not a number")
        got = _parse_number(output)
        if got is None and is_structured(output):
            return _verdict(False, unreadable("numeric_close", output, "a number or text"))
        if got is None:
            return _verdict(False, f"no number found in output {show(output)}; expected {want:g}")
        if math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol):
            return _verdict(
                True, f"output {got:g} is within tolerance of expected {want:g} ({tolerance})"
            )
        return _verdict(
            False,
            f"output {got:g} differs from expected {want:g} by {abs(got - want):g} ({tolerance})",
        )

    options = [f"rel_tol={rel_tol!r}"] if rel_tol != 1e-9 else []
    options += [f"abs_tol={abs_tol!r}"] if abs_tol != 0.0 else []
    evaluator = named(evaluate, f"numeric_close({', '.join(options)})", aware=False, inline=True)
    return evaluator if field is None else on_field(evaluator, field)
