"""The error tree: one root, and a docstring diagram that matches the classes."""

from __future__ import annotations

import inspect
import re

import pytest

from weakincentives import errors
from weakincentives.errors import WinkError

ERROR_CLASSES = sorted(
    (
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    ),
    key=lambda c: c.__name__,
)

_LINE = re.compile(
    r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)(?: \((?P<builtin>\w+)\))?"
)


def parse_tree(doc: str) -> dict[str, tuple[str, str | None]]:
    """Return `name -> (parent, builtin mixin or None)` from the docstring diagram."""
    tree: dict[str, tuple[str, str | None]] = {}
    stack = ["WinkError"]
    for line in doc.splitlines():
        match = _LINE.match(line.strip("\n").removeprefix("    "))
        if match is None:
            continue
        depth = len(match["indent"]) // 4
        del stack[depth + 1 :]
        tree[match["name"]] = (stack[depth], match["builtin"])
        stack.append(match["name"])
    return tree


TREE = parse_tree(errors.__doc__ or "")


def _wink_parent(cls: type[BaseException]) -> str:
    parents = [b.__name__ for b in cls.__bases__ if issubclass(b, WinkError)]
    assert len(parents) == 1, f"{cls.__name__} must have exactly one WinkError base"
    return parents[0]


def _builtin_mixin(cls: type[BaseException]) -> str | None:
    others = [b.__name__ for b in cls.__bases__ if not issubclass(b, WinkError)]
    assert len(others) <= 1, f"{cls.__name__} mixes in more than one builtin"
    return others[0] if others else None


def test_the_diagram_is_parsed() -> None:
    assert TREE["PromptRenderError"] == ("PromptError", "ValueError")
    assert TREE["NoReplyToError"] == ("MailboxResolutionError", None)
    assert TREE["ConfigurationError"] == ("WinkError", "ValueError")


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_derives_from_wink_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, WinkError)


@pytest.mark.parametrize(
    "cls", [c for c in ERROR_CLASSES if c is not WinkError], ids=lambda c: c.__name__
)
def test_the_docstring_diagram_matches_the_class(cls: type[BaseException]) -> None:
    assert cls.__name__ in TREE, f"{cls.__name__} is missing from the diagram in errors.py"
    assert TREE[cls.__name__] == (_wink_parent(cls), _builtin_mixin(cls))


def test_every_diagram_entry_is_a_class() -> None:
    names = {c.__name__ for c in ERROR_CLASSES}
    assert set(TREE) - names == set()


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_has_a_docstring(cls: type[BaseException]) -> None:
    assert cls.__doc__
    assert cls.__doc__.strip()


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.SerdeError, ValueError),
        (errors.PromptParamsError, TypeError),
        (errors.AdapterConnectionError, ConnectionError),
        (errors.DeadlineExceededError, TimeoutError),
        (errors.MailboxResolutionError, LookupError),
    ],
)
def test_builtin_handlers_still_catch_our_errors(
    cls: type[WinkError], builtin: type[Exception]
) -> None:
    with pytest.raises(builtin, match="what went wrong"):
        raise cls("what went wrong")
