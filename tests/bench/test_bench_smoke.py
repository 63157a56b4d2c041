"""The benchmarks run: every workload at `--quick` size, and the runner's bookkeeping.

No timing assertions: these prove the benchmarks work, not how fast anything is.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import bench
from bench import __main__ as runner
from bench.w1_overhead import Job, baseline_driver, evalloop_function_driver

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", runner.discover())
def test_workload_runs_in_quick_mode(name: str, tmp_path: Path) -> None:
    output = tmp_path / "latest.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", name, "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(output.read_text())
    assert document["quick"] is True
    record = document["workloads"][name]
    assert record["error"] is None
    assert record["metrics"], f"{name} reported no metrics"
    assert all(math.isfinite(value) for value in record["metrics"].values()), record["metrics"]
    assert name in proc.stdout  # the table


def test_discover_finds_the_workloads_but_not_private_modules() -> None:
    names = runner.discover()
    assert {"w1_overhead", "w2_latency", "w3_memory"} <= set(names)
    assert not [name for name in names if name.startswith("_")]
    assert names.index("w1_overhead") < names.index("w2_latency") < names.index("w3_memory")


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        ([], ["w1_a", "w2_b", "x_c"]),
        (["w2_b"], ["w2_b"]),
        (["w"], ["w1_a", "w2_b"]),
        (["x_c", "w1"], ["w1_a", "x_c"]),  # run order, not argument order
    ],
)
def test_select_by_name_or_prefix(wanted: list[str], expected: list[str]) -> None:
    assert runner.select(["w1_a", "w2_b", "x_c"], wanted) == expected


def test_select_rejects_an_unknown_name_and_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no workload matches 'w9'; workloads: w1_a, w2_b"):
        runner.select(["w1_a", "w2_b"], ["w9"])


@pytest.mark.parametrize(
    ("value", "target", "met"),
    [
        (0.04, ("<=", 0.05), True),
        (0.05, ("<=", 0.05), True),
        (0.06, ("<=", 0.05), False),
        (0.96, (">=", 0.95), True),
        (0.94, (">=", 0.95), False),
    ],
)
def test_check_target(value: float, target: tuple[str, float], met: bool) -> None:
    assert runner.check_target(value, target) is met


def _fake_workload(monkeypatch: pytest.MonkeyPatch, name: str, module: Any) -> None:
    monkeypatch.setitem(sys.modules, f"bench.{name}", module)


def test_run_workload_checks_the_module_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    fake: Any = types.ModuleType("bench.fake_targets")
    fake.main = lambda: {"fast_ms": 0.01, "slow_ms": 2.0, "untargeted": 1.0}
    fake.TARGETS = {"fast_ms": ("<=", 0.05), "slow_ms": ("<=", 0.5), "absent": (">=", 1.0)}
    _fake_workload(monkeypatch, "fake_targets", fake)
    record = runner.run_workload("fake_targets", check_targets=True)
    assert record["error"] is None
    assert record["metrics"] == {"fast_ms": 0.01, "slow_ms": 2.0, "untargeted": 1.0}
    assert {k: t["met"] for k, t in record["targets"].items()} == {
        "fast_ms": True,
        "slow_ms": False,
    }
    assert runner.run_workload("fake_targets", check_targets=False)["targets"] == {}


def test_a_failing_workload_is_recorded_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken: Any = types.ModuleType("bench.fake_broken")

    def explode() -> dict[str, float]:
        raise RuntimeError("the workload broke")

    broken.main = explode
    fine: Any = types.ModuleType("bench.fake_fine")
    fine.main = lambda: {"value": 1.5}
    _fake_workload(monkeypatch, "fake_broken", broken)
    _fake_workload(monkeypatch, "fake_fine", fine)
    monkeypatch.setattr(runner, "discover", lambda: ["fake_broken", "fake_fine"])
    monkeypatch.delenv(bench.QUICK_ENV, raising=False)
    output = tmp_path / "out" / "latest.json"

    assert runner.main(["--output", str(output)]) == 1

    workloads = json.loads(output.read_text())["workloads"]
    assert "RuntimeError: the workload broke" in workloads["fake_broken"]["error"]
    assert workloads["fake_fine"] == {
        "metrics": {"value": 1.5},
        "targets": {},
        "error": None,
        "seconds": workloads["fake_fine"]["seconds"],
    }
    out = capsys.readouterr()
    assert "workloads failed: fake_broken" in out.err
    assert re.search(r"^fake_fine +value +1\.5 *$", out.out, re.MULTILINE), out.out


def test_baseline_writes_the_lines_a_run_store_writes(tmp_path: Path) -> None:
    baseline_dir, store_dir = tmp_path / "baseline", tmp_path / "store"
    baseline_dir.mkdir()
    assert baseline_driver(Job(n=3, concurrency=2, root=baseline_dir)) == 3
    assert evalloop_function_driver(Job(n=3, concurrency=2, root=store_dir)) == 3
    ours = _lines(baseline_dir / "results.jsonl")
    (stored_file,) = store_dir.glob("*/results.jsonl")
    theirs = _lines(stored_file)

    def shape(line: dict[str, Any]) -> tuple[list[str], list[str]]:
        return list(line), list(line["score"])

    assert [shape(line) for line in ours] == [shape(line) for line in theirs]
    for field in ("sample_id", "output", "score", "usage", "metadata", "error"):
        assert sorted(str(line[field]) for line in ours) == sorted(
            str(line[field]) for line in theirs
        ), field


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
