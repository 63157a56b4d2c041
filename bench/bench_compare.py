"""`wink eval compare RUN_A RUN_B`: two single-experiment runs of 100,000 results each.

The A/B question at scale: run A (70% pass) and run B (80% pass) of the same 100,000
samples, half of the pairs discordant (50,000 discordant pairs: McNemar's power and the
paired bootstrap at their largest). Lines as `bench_query` writes them (~1 KB, with a
transcript). Figures, as `bench_report` measures them:

- `compare_s`: cold, the command in a fresh interpreter run once (best of `REPEATS`
  processes, after one that wrote the bytecode caches), with `compare_cpu_s` and
  `compare_peak_mb` of that process;
- `read_s`: the baseline, reading both results files once; `compare_vs_read` the ratio.

Target: under 5 s, as `wink eval report` at 100,000 results. `--quick` uses 5,000.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench import quick
from bench.bench_query import generate_run
from bench.bench_report import REPEATS, cli_once, read_once

__all__ = ["TARGETS", "main"]

TARGETS: dict[str, tuple[str, float]] = {"compare_s": ("<=", 5.0)}


def main() -> dict[str, float]:
    n = 5_000 if quick() else 100_000
    metrics: dict[str, float] = {"load_average_1m": os.getloadavg()[0], "results": float(n)}
    with tempfile.TemporaryDirectory(prefix="wink-bench-compare-") as tmp:
        root = Path(tmp)
        run_a = generate_run(root / "a", n, experiments=("agent",))
        run_b = generate_run(root / "b", n, experiments=("agent",), variant=1)
        args = ["eval", "compare", str(run_a), str(run_b)]
        cli_once(args)  # writes the bytecode caches; not timed
        wall, cpu, peak = min(cli_once(args) for _ in range(REPEATS))
        files = [run_a / "results.jsonl", run_b / "results.jsonl"]
        read = min(read_once(files) for _ in range(REPEATS))
    metrics.update(
        compare_s=wall, compare_cpu_s=cpu, compare_peak_mb=peak, read_s=read,
        compare_vs_read=wall / read,
    )  # fmt: skip
    for name, value in metrics.items():
        print(f"{name:<18}  {value:.4f}")
    return metrics


if __name__ == "__main__":
    main()
