"""`python -m bench`: run every workload, print a table, write `bench/results/latest.json`.

Usage:
    python -m bench                  # every workload, full size
    python -m bench --only w1        # one workload (by name or prefix; repeatable)
    python -m bench --quick          # smoke-test sizes (used by tests/bench)
    python -m bench --list           # the workloads found

A failing workload is reported and the others still run; the exit status is 1 when any
failed. Missed targets are listed but do not fail the run: these are benchmarks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bench

__all__ = ["check_target", "discover", "main", "run_workload", "select"]

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "latest.json"


def discover() -> list[str]:
    """Names of the workload modules of `bench`, W workloads first, then by name."""
    names = [
        info.name
        for info in pkgutil.iter_modules(bench.__path__)
        if not info.name.startswith("_") and not info.ispkg
    ]
    return sorted(names, key=lambda name: (not name.startswith("w"), name))


def select(available: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The workloads named by `--only` (exact names or prefixes), in run order.

    Raises:
        ValueError: a name matches no workload.
    """
    if not wanted:
        return list(available)
    chosen: set[str] = set()
    for want in wanted:
        hits = [name for name in available if name == want or name.startswith(want)]
        if not hits:
            raise ValueError(f"no workload matches {want!r}; workloads: {', '.join(available)}")
        chosen.update(hits)
    return [name for name in available if name in chosen]


def check_target(value: float, target: tuple[str, float]) -> bool:
    """Whether `value` meets `target`, a `("<=" | ">=", bound)` pair."""
    op, bound = target
    if op == "<=":
        return value <= bound
    if op == ">=":
        return value >= bound
    raise ValueError(f"target operator must be '<=' or '>=', got {op!r}")


def run_workload(name: str, *, check_targets: bool) -> dict[str, Any]:
    """Import `bench.<name>`, call its `main()`, and return what `latest.json` records."""
    start = time.perf_counter()
    record: dict[str, Any] = {"metrics": {}, "targets": {}, "error": None}
    try:
        module = importlib.import_module(f"bench.{name}")
        workload: Callable[[], Mapping[str, float]] = module.main
        metrics = {key: float(value) for key, value in workload().items()}
    except Exception:
        record["error"] = traceback.format_exc()
    else:
        record["metrics"] = metrics
        targets: Mapping[str, tuple[str, float]] = getattr(module, "TARGETS", {})
        if check_targets:
            record["targets"] = {
                key: {"op": op, "bound": bound, "met": check_target(metrics[key], (op, bound))}
                for key, (op, bound) in targets.items()
                if key in metrics
            }
    record["seconds"] = time.perf_counter() - start
    return record


def _print_table(results: Mapping[str, Mapping[str, Any]]) -> None:
    rows: list[tuple[str, str, str, str]] = []
    for name, record in results.items():
        if record["error"] is not None:
            rows.append((name, "FAILED", "", "see the traceback above"))
            continue
        targets = record["targets"]
        for key, value in record["metrics"].items():
            target = targets.get(key)
            status = ""
            if target is not None:
                verdict = "ok" if target["met"] else "MISS"
                status = f"{verdict} (target {target['op']} {target['bound']:g})"
            rows.append((name, key, f"{value:.4g}", status))
    widths = [
        max(len(row[i]) for row in [("workload", "metric", "value", ""), *rows]) for i in (0, 1, 2)
    ]
    print()
    print(f"{'workload':<{widths[0]}}  {'metric':<{widths[1]}}  {'value':>{widths[2]}}  target")
    for workload, key, value, status in rows:
        print(f"{workload:<{widths[0]}}  {key:<{widths[1]}}  {value:>{widths[2]}}  {status}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this workload (name or prefix; repeatable)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes; no targets")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="results JSON path")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)
    available = discover()
    if args.list:
        print("\n".join(available))
        return 0
    try:
        chosen = select(available, args.only)
    except ValueError as exc:
        parser.error(str(exc))
    if args.quick:
        os.environ[bench.QUICK_ENV] = "1"  # read by the workloads and their subprocesses
    started = datetime.now(UTC)
    print(f"load average at start: {_load_average()} on {os.cpu_count()} CPUs")
    results: dict[str, dict[str, Any]] = {}
    for name in chosen:
        print(f"== {name}", flush=True)
        results[name] = record = run_workload(name, check_targets=not args.quick)
        if record["error"] is not None:
            print(record["error"], file=sys.stderr)
        print(f"   ({record['seconds']:.1f} s)", flush=True)
    _print_table(results)
    _write(args.output, started, args.quick, results)
    failed = [name for name, record in results.items() if record["error"] is not None]
    missed = [
        f"{name}.{key}"
        for name, record in results.items()
        for key, target in record["targets"].items()
        if not target["met"]
    ]
    if args.quick:
        print("\n--quick: smoke-test sizes, targets not checked")
    if missed:
        print(f"\ntargets missed: {', '.join(missed)}")
    print(f"results written to {args.output}")
    if failed:
        print(f"workloads failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: how busy the machine was (noise)."""
    try:
        return list(os.getloadavg())
    except OSError:  # not available on this platform
        return None


def _write(
    path: Path, started: datetime, quick: bool, results: Mapping[str, Mapping[str, Any]]
) -> None:
    document = {
        "started_at": started.isoformat(),
        "quick": quick,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_end": _load_average(),
        "workloads": results,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
