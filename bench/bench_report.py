"""`wink eval report` on a stored run of 10,000 and 100,000 results (issue 17, point 7).

The runs are generated as `bench_query` generates them (realistic ~1 KB lines with a
transcript, 4 experiments). For each size:

- `report_<size>_s`: **cold**, `wink eval report RUN` in a fresh interpreter that runs
  it once, as a user runs it (imports included, printing to a pipe); best of `REPEATS`
  fresh processes, after one untimed process has written the bytecode caches (as an
  installed package has them). `report_<size>_cpu_s` is that process's CPU time (user +
  system; steadier than wall time on a shared machine) and `report_<size>_peak_mb` its
  peak RSS;
- `warm_<size>_s`: the same work in this process, after a first call: `EvalReport.load`
  (slim, as the command reads) and `render` to a string, without the imports (both pause
  the cyclic garbage collector, as the command does: without that, collections walking
  the 100,000 results made the warm figure larger than the cold one);
- `read_<size>_s`: the baseline, reading `results.jsonl` once (`read_bytes`), best of
  `REPEATS`; `report_vs_read_<size>` and `warm_vs_read_<size>` are the ratios to it;
- `report_bytes_per_result`: how the command's peak RSS grows per result from 10,000 to
  100,000 (the compact per-sample form a report keeps; the transcripts are not held).

Targets: under 1 s at 10,000 and under 5 s at 100,000, cold. `--quick` uses 1,000 and
5,000 results.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import quick
from bench.bench_query import generate_run

__all__ = ["REPEATS", "TARGETS", "cli_once", "main", "read_once"]

REPEATS = 3
TARGETS: dict[str, tuple[str, float]] = {
    "report_10k_s": ("<=", 1.0),
    "report_100k_s": ("<=", 5.0),
}


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "120"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages run (see bench.cold)
    return env


def cli_once(args: Sequence[str]) -> tuple[float, float, float]:
    """Run `wink ARGS` in a fresh interpreter: wall seconds, CPU seconds, peak RSS in MB.

    Its output goes to a file (as to a pipe: not a terminal); the process's own CPU time
    and peak RSS come from `wait4`.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", "from weakincentives.cli import main; main()", *args],
            stdout=out, stderr=err, env=_env(),
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"wink {' '.join(args)} failed:\n{err.read().decode()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KB on Linux


def read_once(paths: Sequence[Path]) -> float:
    """Seconds to read every file of `paths` once: the baseline."""
    start = time.perf_counter()
    for path in paths:
        path.read_bytes()
    return time.perf_counter() - start


def _warm(run: Path) -> float:
    from rich.console import Console

    from weakincentives.evals import EvalReport

    start = time.perf_counter()
    EvalReport.load(run, slim=True).render(Console(file=io.StringIO(), width=120))
    return time.perf_counter() - start


def _best(call: Callable[[], float]) -> float:
    return min(call() for _ in range(REPEATS))


def measure(run: Path, label: str) -> dict[str, float]:
    """Every figure of one run (see the module docstring), keyed with `label`."""
    args = ["eval", "report", str(run)]
    cli_once(args)  # writes the bytecode caches; not timed
    cold = [cli_once(args) for _ in range(REPEATS)]
    wall, cpu, peak = min(cold)  # the fastest process, with its CPU time and memory
    _warm(run)
    warm = _best(lambda: _warm(run))
    read = _best(lambda: read_once([run / "results.jsonl"]))
    return {
        f"report_{label}_s": wall,
        f"report_{label}_cpu_s": cpu,
        f"report_{label}_peak_mb": peak,
        f"warm_{label}_s": warm,
        f"read_{label}_s": read,
        f"report_vs_read_{label}": wall / read,
        f"warm_vs_read_{label}": warm / read,
    }


def main() -> dict[str, float]:
    sizes = {"10k": 1_000, "100k": 5_000} if quick() else {"10k": 10_000, "100k": 100_000}
    metrics: dict[str, float] = {"load_average_1m": os.getloadavg()[0]}
    for label, n in sizes.items():
        with tempfile.TemporaryDirectory(prefix="wink-bench-report-") as tmp:
            metrics.update(measure(generate_run(Path(tmp), n), label))
    small, large = sizes["10k"], sizes["100k"]
    grown = metrics["report_100k_peak_mb"] - metrics["report_10k_peak_mb"]
    metrics["report_bytes_per_result"] = grown * 1024 * 1024 / (large - small)
    for name, value in metrics.items():
        print(f"{name:<26}  {value:.4f}")
    return metrics


if __name__ == "__main__":
    main()
