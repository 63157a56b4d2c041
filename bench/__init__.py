"""Benchmarks of weakincentives: workloads W1-W4 of DESIGN section 5, and their runner.

Run them all with `make bench` (`python -m bench`); `python -m bench --only w1` runs one,
`--quick` shrinks every workload to a smoke-test size. Results are printed as a table and
written to `bench/results/latest.json`.

A workload is a module of this package (not private, not `__main__`) with
`def main() -> dict[str, float]`: metric name to value. It may also define
`TARGETS: dict[str, tuple[str, float]]`, metric name to `("<=" | ">=", bound)`, which the
runner checks and prints. Workloads read `quick()` to pick their sizes.

These machines are noisy: absolute times are not comparable across runs, so every timed
workload measures a plain-asyncio baseline (`bench._baseline`) in the same run, repeats,
keeps the best of the repeats, and reports ratios and differences against the baseline.
"""

from __future__ import annotations

import os

__all__ = ["QUICK_ENV", "quick"]

QUICK_ENV = "WINK_BENCH_QUICK"
"""Environment variable set to `1` by `--quick` (inherited by workload subprocesses)."""


def quick() -> bool:
    """True when the workloads should run at smoke-test size (`--quick`)."""
    return os.environ.get(QUICK_ENV) == "1"
