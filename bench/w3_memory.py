"""W3 memory: W1 at N = 10,000 (and 100,000 for the baseline and the runner), peak RSS.

Each measurement runs one W1 driver once in a fresh interpreter
(`python -m bench.w3_memory --child DRIVER N`), which prints its peak resident set size
(`peak_rss_mib`: `VmHWM` on Linux, where `ru_maxrss` is inherited from the parent).
Imports count in every peak (about the same for all drivers: each child imports the whole
benchmark; `imports_peak_mib` is that share, measured before any driver runs), so
`growth_bytes_per_sample` is the number to compare:
`(peak at N - peak at SMALL_N) / (N - SMALL_N)`. numpy, rich and the viewer are not
imported by a run (tests/test_lazy_imports.py), so they are not in these peaks.

`python -m bench.w3_memory --child DRIVER N --trace 15` also prints the 15 biggest
allocation sites (tracemalloc) of the largest heap seen during the run (sampled every
250 ms), to see where memory goes. Tracing slows the run down a lot: use N of a few
thousand.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

from bench import quick
from bench.w1_overhead import CONCURRENCY, DRIVERS, run_job

__all__ = ["TARGETS", "child", "main", "peak_rss_mib"]

TARGETS: dict[str, tuple[str, float]] = {
    "runner_function_10k_peak_mib": ("<=", 60.0),
    "runner_function_100k_peak_mib": ("<=", 100.0),
    "runner_agent_10k_peak_mib": ("<=", 60.0),
    "runner_agent_100k_peak_mib": ("<=", 100.0),
}

_ROOT = Path(__file__).resolve().parent.parent

# Sizes per driver. EvalLoop submits the whole dataset to its mailbox up front, so its
# memory grows with N by design; 10k shows the slope. The async runner shares the
# function runner's bookkeeping, so 10k is enough for it.
_SIZES = {
    "baseline": (10_000, 100_000),
    "evalloop_function": (10_000,),
    "evalloop_agent": (10_000,),
    "runner_function": (10_000, 100_000),
    "runner_async": (10_000,),
    "runner_agent": (10_000, 100_000),
}
SMALL_N = 1_000
"""The size whose peak is subtracted to get the growth per sample."""


def label(n: int) -> str:
    """`10000` -> `10k`; sizes that are not whole thousands stay as they are."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def peak_rss_mib() -> float:
    """Peak resident set size of this program so far, in MiB.

    On Linux this is `VmHWM` from `/proc/self/status`: `ru_maxrss` survives `fork` and
    `exec`, so a child started by a big parent would report at least the parent's size.
    Elsewhere it is `ru_maxrss` (KiB on Linux, bytes on macOS).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024.0


def child(driver: str, n: int, trace: int = 0) -> dict[str, float]:
    """Run one driver once in this process and report its peak RSS and wall time.

    `imports_mib` is the peak before the driver ran: what importing the benchmark (and
    so weakincentives) costs.
    """
    imports = peak_rss_mib()
    if not trace:
        seconds = run_job(driver, DRIVERS[driver], n=n, concurrency=CONCURRENCY)
        return {"peak_mib": peak_rss_mib(), "seconds": seconds, "imports_mib": imports}
    tracemalloc.start(25)
    sampler = _PeakSnapshots()
    sampler.start()
    try:
        seconds = run_job(driver, DRIVERS[driver], n=n, concurrency=CONCURRENCY)
    finally:
        sampler.stop.set()
        sampler.join()
    _print_top(sampler.snapshot, sampler.size, trace)
    traced = sampler.size / 2**20
    return {
        "peak_mib": peak_rss_mib(),
        "seconds": seconds,
        "imports_mib": imports,
        "traced_mib": traced,
    }


class _PeakSnapshots(threading.Thread):
    """Keeps the tracemalloc snapshot taken when the traced size was largest."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.size = 0
        self.snapshot: tracemalloc.Snapshot | None = None

    def run(self) -> None:
        while not self.stop.wait(0.25):
            current, _ = tracemalloc.get_traced_memory()
            if current > self.size * 1.05:
                self.size, self.snapshot = current, tracemalloc.take_snapshot()


def _print_top(snapshot: tracemalloc.Snapshot | None, size: int, top: int) -> None:
    if snapshot is None:
        print("no snapshot: the run ended within the first sampling interval", file=sys.stderr)
        return
    print(f"largest traced size: {size / 2**20:.2f} MiB; top sites:", file=sys.stderr)
    ours = snapshot.filter_traces([tracemalloc.Filter(False, "<frozen importlib._bootstrap*")])
    for stat in ours.statistics("traceback")[:top]:
        print(f"{stat.size / 2**20:8.2f} MiB {stat.count:8d} blocks", file=sys.stderr)
        for line in stat.traceback.format()[-40:]:
            print("    " + line, file=sys.stderr)


def measure(driver: str, n: int) -> dict[str, float]:
    """Run `child(driver, n)` in a fresh interpreter and return its report."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.w3_memory", "--child", driver, str(n)],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"W3 child {driver} N={n} failed:\n{proc.stderr[-2000:]}")
    report: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def main() -> dict[str, float]:
    small = 50 if quick() else SMALL_N
    print(f"W3 memory: peak RSS in a fresh interpreter; growth measured from N={small}")
    metrics: dict[str, float] = {}
    for driver, full_sizes in _SIZES.items():
        sizes = (500,) if quick() else full_sizes
        first = measure(driver, small)
        metrics.setdefault("imports_peak_mib", first["imports_mib"])
        base = first["peak_mib"]
        metrics[f"{driver}_{label(small)}_peak_mib"] = base
        for n in sizes:
            peak = measure(driver, n)["peak_mib"]
            metrics[f"{driver}_{label(n)}_peak_mib"] = peak
        metrics[f"{driver}_growth_bytes_per_sample"] = (peak - base) * 2**20 / (sizes[-1] - small)
    return metrics


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w3_memory", description=__doc__)
    parser.add_argument("--child", nargs=2, metavar=("DRIVER", "N"), required=True)
    parser.add_argument("--trace", type=int, default=0, metavar="TOP")
    args = parser.parse_args(argv)
    driver, n = args.child
    if driver not in DRIVERS:
        parser.error(f"unknown driver {driver!r}; choose from {', '.join(DRIVERS)}")
    print(json.dumps(child(driver, int(n), args.trace)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
