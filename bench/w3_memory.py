"""W3 memory: the W1 task at N = 10,000 and 1,000,000, peak RSS (issue 20, point 3).

The target: peak RSS at 1,000,000 samples within 10% of the peak at 10,000, and growth
under 50 bytes per sample, for `evaluate()` (`run_eval` with a run store, the W1
`runner_function` driver) and for `wink eval run` (`cli`: the same task and a JSONL
dataset file, the CLI run in-process, report printed). Plain asyncio writing the same
lines (`baseline`) is measured beside them: its ratio is what flat looks like here.

Each measurement runs in a fresh interpreter
(`python -m bench.w3_memory --child DRIVER N`), which prints its peak resident set size
(`peak_rss_mib`: `VmHWM` on Linux, where `ru_maxrss` is inherited from the parent).
Imports count in every peak (about the same for all drivers: each child imports the whole
benchmark; `imports_peak_mib` is that share, measured before any driver runs). Reported
per driver: `<driver>_<N>_peak_mib`, `<driver>_peak_ratio` (large / small) and
`<driver>_growth_bytes_per_sample` (`(peak at N - peak at SMALL_N) / (N - SMALL_N)`).
numpy, rich and the viewer are not imported by a run (tests/test_lazy_imports.py); the
CLI imports rich to print its report.

`python -m bench.w3_memory --child DRIVER N --trace 15` also prints the 15 biggest
allocation sites (tracemalloc) of the largest heap seen during the run (sampled every
250 ms), to see where memory goes. Tracing slows the run down a lot: use N of a few
thousand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from bench import quick
from bench.w1_overhead import CONCURRENCY, DRIVERS, run_job

__all__ = ["TARGETS", "child", "main", "peak_rss_mib"]

TARGETS: dict[str, tuple[str, float]] = {
    "runner_function_peak_ratio": ("<=", 1.10),
    "runner_function_growth_bytes_per_sample": ("<=", 50.0),
    "cli_peak_ratio": ("<=", 1.10),
    "cli_growth_bytes_per_sample": ("<=", 50.0),
}

_ROOT = Path(__file__).resolve().parent.parent

DRIVERS_MEASURED = ("baseline", "runner_function", "cli")
"""Plain asyncio (the reference), `evaluate()` with a run store, and `wink eval run`."""

SMALL_N = 10_000
"""The size whose peak is the reference (and is subtracted to get the growth)."""
LARGE_N = 1_000_000
"""The size whose peak must stay within 10% of the reference."""


def label(n: int) -> str:
    """`10000` -> `10k`, `1000000` -> `1m`; other sizes stay as they are."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
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
    if driver == "cli":
        return {**run_cli(n), "imports_mib": imports}
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


def run_cli(n: int) -> dict[str, float]:
    """`wink eval run` of the W1 task over a JSONL file of `n` samples, in this process.

    The dataset file is written first (streamed); its writing is not timed. The CLI's
    output goes to a null device: what counts is its memory, not the terminal.
    """
    with tempfile.TemporaryDirectory(prefix="wink-bench-w3-cli-") as tmp:
        data = Path(tmp) / "dataset.jsonl"
        with data.open("w", encoding="utf-8") as out:
            for i in range(n):
                out.write(f'{{"id": "s{i}", "input": "q{i}", "expected": "a{i}"}}\n')
        argv = [
            "eval", "run", "bench.w1_overhead:answer", "--dataset", str(data),
            "--evaluator", "exact_match", "--runs-dir", str(Path(tmp) / "runs"),
            "--concurrency", str(CONCURRENCY), "--no-cache",
        ]  # fmt: skip
        from weakincentives.cli import app

        start = time.perf_counter()
        with Path(os.devnull).open("w") as sink, contextlib.redirect_stdout(sink):
            try:
                app(argv, standalone_mode=False)
            except SystemExit as exc:  # pragma: no cover - a failed run is reported below
                if exc.code:
                    raise RuntimeError(f"wink eval run exited with {exc.code}") from exc
        seconds = time.perf_counter() - start
        if not any((Path(tmp) / "runs").iterdir()):
            raise RuntimeError("wink eval run wrote no run directory")
    return {"peak_mib": peak_rss_mib(), "seconds": seconds}


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
    small, large = (500, 5_000) if quick() else (SMALL_N, LARGE_N)
    print(f"W3 memory: peak RSS in a fresh interpreter at N={small:,} and N={large:,}")
    metrics: dict[str, float] = {}
    for driver in DRIVERS_MEASURED:
        first = measure(driver, small)
        metrics.setdefault("imports_peak_mib", first["imports_mib"])
        second = measure(driver, large)
        base, peak = first["peak_mib"], second["peak_mib"]
        metrics[f"{driver}_{label(small)}_peak_mib"] = base
        metrics[f"{driver}_{label(large)}_peak_mib"] = peak
        metrics[f"{driver}_peak_ratio"] = peak / base
        metrics[f"{driver}_growth_bytes_per_sample"] = (peak - base) * 2**20 / (large - small)
        metrics[f"{driver}_{label(large)}_seconds"] = second["seconds"]
        print(f"   {driver}: {base:.1f} MiB -> {peak:.1f} MiB", flush=True)
    return metrics


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w3_memory", description=__doc__)
    parser.add_argument("--child", nargs=2, metavar=("DRIVER", "N"), required=True)
    parser.add_argument("--trace", type=int, default=0, metavar="TOP")
    args = parser.parse_args(argv)
    driver, n = args.child
    if driver not in DRIVERS and driver != "cli":
        parser.error(f"unknown driver {driver!r}; choose from cli, {', '.join(DRIVERS)}")
    print(json.dumps(child(driver, int(n), args.trace)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
