"""`wink eval report` on a stored run of 10,000 and 100,000 results (issue 17, point 7).

The runs are generated as `bench_query` generates them (realistic ~870-byte lines with a
transcript). Timed, best of `REPEATS`:

- `report_10k_s` / `report_100k_s`: `wink eval report RUN` in a fresh interpreter, as a
  user runs it (imports included), printing to a pipe;
- `load_render_10k_s` / `_100k_s`: the same work in this process (`EvalReport.load` and
  `render` to a string), without the imports;
- `read_10k_s` / `read_100k_s`: reading results.jsonl once (the baseline), and
  `report_vs_read_10k` / `_100k`, the ratio of the report to it.

`--quick` uses 1,000 and 5,000 results.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import quick
from bench.bench_query import generate_run

__all__ = ["TARGETS", "main"]

REPEATS = 3
TARGETS: dict[str, tuple[str, float]] = {
    "report_10k_s": ("<=", 1.0),
    "report_100k_s": ("<=", 5.0),
}


def _cli(run: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "from weakincentives.cli import main; main()", "eval",
         "report", str(run)],
        capture_output=True, text=True, check=False, env=_env(),
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"wink eval report failed:\n{proc.stderr[-2000:]}")
    return elapsed


def _env() -> dict[str, str]:
    import os

    env = {**os.environ, "COLUMNS": "120"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages run (see bench.cold)
    return env


def _in_process(run: Path) -> float:
    from rich.console import Console

    from weakincentives.evals import EvalReport

    start = time.perf_counter()
    EvalReport.load(run).render(Console(file=io.StringIO(), width=120))
    return time.perf_counter() - start


def _read(run: Path) -> float:
    start = time.perf_counter()
    (run / "results.jsonl").read_bytes()
    return time.perf_counter() - start


def main() -> dict[str, float]:
    sizes = {"10k": 1_000, "100k": 5_000} if quick() else {"10k": 10_000, "100k": 100_000}
    metrics: dict[str, float] = {}
    for label, n in sizes.items():
        with tempfile.TemporaryDirectory(prefix="wink-bench-report-") as tmp:
            run = generate_run(Path(tmp), n)
            _cli(run)  # writes bytecode caches; not timed
            cli = min(_cli(run) for _ in range(REPEATS))
            warm = min(_in_process(run) for _ in range(REPEATS))
            read = min(_read(run) for _ in range(REPEATS))
        metrics[f"report_{label}_s"] = cli
        metrics[f"load_render_{label}_s"] = warm
        metrics[f"read_{label}_s"] = read
        metrics[f"report_vs_read_{label}"] = cli / read
    for name, value in metrics.items():
        print(f"{name:<24}  {value:.4f}")
    return metrics


if __name__ == "__main__":
    main()
