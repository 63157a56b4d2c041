"""Reports are read and computed with the cyclic garbage collector paused (issue 17, point 7).

A program that renders a large report pays what `wink eval report` pays: without the
pause, collections of the oldest generation walk every result again and again (about a
second at 100,000 results). The collector is switched back on afterwards, and left off
when it was off.
"""

from __future__ import annotations

import gc
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rich.console import Console

from weakincentives.evals import EvalReport, EvalResult, Score, stats
from weakincentives.evals.report import _export, _render
from weakincentives.evals.report._collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    # As it was before the test, either way: a test that turns the collector off must
    # not leave it off for the rest of the session (other tests measure memory).
    if was:
        gc.enable()
    else:
        gc.disable()


def _report() -> EvalReport:
    results = [
        EvalResult(
            sample_id=f"s{i}",
            experiment_name=name,
            score=Score(float((i + k) % 3 != 0)),
            latency_ms=10 + i,
        )
        for k, name in enumerate(("baseline", "v2"))
        for i in range(20)
    ]
    return EvalReport(results=tuple(results))


def test_the_collector_is_paused_in_the_block_and_back_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause decides
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_error() -> None:
    with pytest.raises(ValueError, match="boom"), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_paused_collector_stays_paused() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def _recording(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[bool]:
    """Record `gc.isenabled()` each time `module.name` is called."""
    seen: list[bool] = []
    original: Callable[..., Any] = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


@pytest.mark.parametrize(
    ("module", "name", "call"),
    [
        pytest.param(
            _render,
            "experiment_table",
            lambda r: r.render(Console(file=io.StringIO(), width=100)),
            id="render",
        ),
        pytest.param(_export, "experiment_block", lambda r: r.to_dict(), id="to_dict"),
        pytest.param(stats, "holm", lambda r: r.compare_all("baseline"), id="compare_all"),
    ],
)
def test_reports_are_computed_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, call: Callable[[EvalReport], Any]
) -> None:
    seen = _recording(monkeypatch, module, name)
    call(_report())
    assert seen
    assert not any(seen)
    assert gc.isenabled()


def test_reading_a_report_pauses_the_collector(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from weakincentives.evals.store import _slim

    path = _report().save(tmp_path / "report.jsonl")
    seen = _recording(monkeypatch, _slim, "build_result")
    assert EvalReport.load(path, slim=True).total == 40
    assert seen
    assert not any(seen)
    assert gc.isenabled()
