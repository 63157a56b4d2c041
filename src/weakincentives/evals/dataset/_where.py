"""`--where`: a small expression language that picks samples. No `eval`.

An expression compares a sample's fields with values::

    metadata.topic == "algebra"
    metadata.difficulty >= 3 and not metadata.flagged
    id in ["q1", "q7"] or metadata.source != "web"
    "geometry" in metadata.tags

- Paths start at `id`, `input`, `expected` or `metadata` and go deeper with dots (into
  objects, and into dataclass fields of typed values). A missing key is `null`.
- Values: strings in double or single quotes (backslash escapes as in JSON), numbers,
  `true`, `false`, `null`, and lists `[...]` of values.
- Operators: `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in` (membership in a list,
  a substring of a string, or a key of an object); `and`, `or`, `not`, parentheses. A
  path alone is true when its value is truthy.
- Comparing values that do not order (a number with `null`) is false, not an error.

`parse_where(text)` returns a predicate over samples; a malformed expression raises
`ConfigurationError` naming the column.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from weakincentives.errors import ConfigurationError

from .._records import Sample

__all__ = ["ROOTS", "parse_where"]

ROOTS = ("id", "input", "expected", "metadata")
"""The names a `--where` path may start with."""

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    | (?P<bad>\S)
    )""",
    re.VERBOSE,
)

Predicate = Callable[[Sample[Any, Any]], bool]
_Value = Callable[[Sample[Any, Any]], Any]

_COMPARE: Mapping[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_MISSING: Any = object()


def parse_where(text: str) -> Predicate:
    """Compile a `--where` expression (grammar in the module docstring) into a predicate.

    Examples:
        >>> keep = parse_where('metadata.topic == "algebra" and metadata.level >= 2')
        >>> keep(Sample(id="a", input="", expected="", metadata={"topic": "algebra", "level": 3}))
        True

    Raises:
        ConfigurationError: the expression is malformed; the message names the column.
    """
    parser = _Parser(text)
    value = parser.expression()
    parser.expect_end()
    return lambda sample: bool(value(sample))


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup or "bad"
            if kind == "bad":
                self.fail(f"unexpected {match.group(kind)!r}", match.start(kind))
            self.tokens.append((kind, match.group(kind), match.start(kind)))
        self.index = 0

    def fail(self, problem: str, column: int | None = None) -> NoReturn:
        at = len(self.text) if column is None else column
        raise ConfigurationError(
            f"--where {self.text!r}: {problem} at column {at + 1}; see `wink eval run "
            '--help` (e.g. metadata.topic == "algebra" and metadata.level >= 2)'
        )

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token[1] in words and token[0] in ("op", "name"):
            self.index += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            token = self.peek()
            self.fail(
                f"expected {word!r}" + (f", got {token[1]!r}" if token else " at the end"),
                token[2] if token else None,
            )

    def expect_end(self) -> None:
        token = self.peek()
        if token is not None:
            self.fail(f"unexpected {token[1]!r}", token[2])

    # expression := and ("or" and)*; and := not ("and" not)*; not := "not" not | comparison
    def expression(self) -> _Value:
        left = self.conjunction()
        while self.take("or"):
            right = self.conjunction()
            left = _or(left, right)
        return left

    def conjunction(self) -> _Value:
        left = self.negation()
        while self.take("and"):
            right = self.negation()
            left = _and(left, right)
        return left

    def negation(self) -> _Value:
        if self.take("not"):
            inner = self.negation()
            return lambda s: not inner(s)
        return self.comparison()

    def comparison(self) -> _Value:
        left = self.operand()
        token = self.peek()
        if token is None:
            return left
        if token[1] in _COMPARE and token[0] == "op":
            self.index += 1
            return _compare(_COMPARE[token[1]], left, self.operand())
        if self.take("in"):
            return _member(left, self.operand(), negate=False)
        if token[1] == "not" and self._next_is("in"):
            self.index += 2
            return _member(left, self.operand(), negate=True)
        return left

    def _next_is(self, word: str) -> bool:
        following = self.index + 1
        return following < len(self.tokens) and self.tokens[following][1] == word

    def operand(self) -> _Value:
        token = self.peek()
        if token is None:
            self.fail("expected a value")
        kind, text, column = token
        self.index += 1
        if kind == "string":
            return _constant(_unquote(text, column, self))
        if kind == "number":
            return _constant(float(text) if any(c in text for c in ".eE") else int(text))
        if text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if text == "[":
            return _constant(self._list())
        if kind != "name":
            self.fail(f"expected a value, got {text!r}", column)
        return self._name(text, column)

    def _list(self) -> list[Any]:
        items: list[Any] = []
        if self.take("]"):
            return items
        while True:
            items.append(self.operand()(_NO_SAMPLE))
            if self.take("]"):
                return items
            self.expect(",")

    def _name(self, text: str, column: int) -> _Value:
        constants = {"true": True, "false": False, "null": None}
        if text in constants:
            return _constant(constants[text])
        root, *parts = text.split(".")
        if root not in ROOTS:
            self.fail(f"unknown name {root!r}; a path starts with {', '.join(ROOTS)}", column)
        return lambda s: _resolve(getattr(s, root), parts)


def _unquote(text: str, column: int, parser: _Parser) -> str:
    body = text[1:-1]
    if text[0] == "'":
        body = body.replace('\\"', '"').replace('"', '\\"').replace("\\'", "'")
    try:
        value: str = json.loads(f'"{body}"')
    except json.JSONDecodeError:
        parser.fail("bad escape in a string", column)
    return value


def _constant(value: Any) -> _Value:
    return lambda s: value


_NO_SAMPLE: Any = None  # lists hold constants only: evaluated without a sample


def _resolve(value: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = getattr(value, part, _MISSING)
        else:
            value = _MISSING
        if value is _MISSING:
            return None
    return value


def _or(left: _Value, right: _Value) -> _Value:
    return lambda s: bool(left(s)) or bool(right(s))


def _and(left: _Value, right: _Value) -> _Value:
    return lambda s: bool(left(s)) and bool(right(s))


def _compare(op: Callable[[Any, Any], Any], left: _Value, right: _Value) -> _Value:
    def compare(sample: Sample[Any, Any]) -> bool:
        try:
            return bool(op(left(sample), right(sample)))
        except TypeError:  # values that do not order: not a match
            return False

    return compare


def _member(left: _Value, right: _Value, *, negate: bool) -> _Value:
    def member(sample: Sample[Any, Any]) -> bool:
        container = right(sample)
        try:
            found = left(sample) in container
        except TypeError:
            found = False
        return found != negate

    return member
