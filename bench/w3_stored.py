"""W3 memory on a stored run: `wink query` and `wink eval report` at two sizes (issue 20).

Point 3 of issue 20 asks for flat memory end to end: after the runner and `wink eval
run` (`bench.w3_memory`), the commands that read a stored run back. Measured here, each
in a fresh interpreter (`python -m bench.w3_stored --child COMMAND RUN`, which runs the
CLI in-process with its output sent to a null device and prints its peak RSS, `VmHWM`,
as `bench.w3_memory` does), over runs generated as `bench.bench_query` generates them
(about 1 KB per result line, a transcript included):

- `query_json`, `query_csv`: `wink query RUN "SELECT * FROM results" -f json|csv` over a
  run of two experiments (every column of every row printed; the query cache is not
  used, so each measure builds the tables);
- `report_experiments`: `wink eval report RUN` over that run (two experiments: the
  report compares them, paired by sample);
- `report_epochs`: `wink eval report RUN` over a run of one experiment and three epochs
  (clustered intervals, pass@k);
- `report_sliced`: `wink eval report RUN --slice topic` over the two-experiment run.

At `SMALL_N` and `LARGE_N` results (a tenth of each with `--quick`), reported per command:
`<command>_<size>_peak_mib`, `<command>_peak_ratio` (large / small) and
`<command>_growth_bytes_per_result`. Targets: `wink query` streams every format, so its
peak at the large size is within 10% of the small one's. A report keeps "what the report
needs in a compact form" (issue 20, point 3): 27 bytes of columns per result (an
experiment's pass/fail and score per sample and epoch, and where the line starts, for
paired comparisons, clustered intervals and reading a flipped pair back), each distinct
sample id once, and, while the paired and clustered statistics run, a few numpy arrays
of the results' size. Its target is growth under 200 bytes per result: one tenth of what
a report holding the results themselves needs (about 1.9 KB per result here). The issue's
own bound of 50 bytes per sample is for `evaluate()` and `wink eval run`
(`bench.w3_memory`), which hold no result at all; an earlier version of this bench held
the report to it too, which its design cannot meet (the columns and the ids alone are
about 60 bytes per result).

Measured on this 2-core machine, 30,000 -> 300,000 results: `query_json` 54.2 -> 55.5
MiB, `query_csv` 53.8 -> 54.8 MiB (69 -> 279 MiB each before the tables moved to a
file); `report_experiments` 61.4 -> 93.8 MiB (126 bytes per result; 120 -> 607 MiB
before the compact columns, 174 bytes per result before the paired differences were
kept as `Floats` and the comparison dropped its row arrays early), `report_epochs` 59.1
-> 105.5 MiB (180; 105 -> 549), `report_sliced` 61.6 -> 93.9 MiB (125; 120 -> 607).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import quick
from bench.bench_query import generate_run
from bench.w3_memory import label, peak_rss_mib

__all__ = ["COMMANDS", "TARGETS", "main"]

COMMANDS: dict[str, tuple[str, list[str]]] = {
    "query_json": ("experiments", ["query", "{run}", "SELECT * FROM results", "-f", "json",
                                   "--no-cache"]),
    "query_csv": ("experiments", ["query", "{run}", "SELECT * FROM results", "-f", "csv",
                                  "--no-cache"]),
    "report_experiments": ("experiments", ["eval", "report", "{run}"]),
    "report_epochs": ("epochs", ["eval", "report", "{run}"]),
    "report_sliced": ("experiments", ["eval", "report", "{run}", "--slice", "topic"]),
}  # fmt: skip
"""Command name -> (the run it reads, `wink` arguments)."""

TARGETS: dict[str, tuple[str, float]] = {
    "query_json_peak_ratio": ("<=", 1.10),
    "query_csv_peak_ratio": ("<=", 1.10),
    "report_experiments_growth_bytes_per_result": ("<=", 200.0),
    "report_epochs_growth_bytes_per_result": ("<=", 200.0),
    "report_sliced_growth_bytes_per_result": ("<=", 200.0),
}

SMALL_N = 30_000
LARGE_N = 300_000
_ROOT = Path(__file__).resolve().parent.parent


def child(command: str, run: Path) -> dict[str, float]:
    """Run one command over `run` in this process; its peak RSS and wall seconds."""
    from weakincentives.cli import app

    argv = [arg.format(run=run) for arg in COMMANDS[command][1]]
    start = time.perf_counter()
    with (
        Path(os.devnull).open("w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        try:
            app(argv, standalone_mode=False)
        except SystemExit as exc:  # pragma: no cover - a failure is reported below
            if exc.code:
                raise RuntimeError(f"wink {' '.join(argv)} exited with {exc.code}") from exc
    return {"peak_mib": peak_rss_mib(), "seconds": time.perf_counter() - start}


def measure(command: str, run: Path) -> dict[str, float]:
    """`child(command, run)` in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.w3_stored", "--child", command, str(run)],
        cwd=_ROOT, capture_output=True, text=True, check=False,
        env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"W3 child {command} {run} failed:\n{proc.stderr[-2000:]}")
    report: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def _runs(root: Path, n: int) -> dict[str, Path]:
    return {
        "experiments": generate_run(root / "experiments", n, experiments=("baseline", "v2")),
        "epochs": generate_run(root / "epochs", n, experiments=("baseline",), epochs=3),
    }


def main() -> dict[str, float]:
    small, large = (SMALL_N // 10, LARGE_N // 10) if quick() else (SMALL_N, LARGE_N)
    print(f"W3 stored runs: peak RSS in a fresh interpreter at N={small:,} and N={large:,}")
    metrics: dict[str, float] = {"load_average_1m": os.getloadavg()[0]}
    peaks: dict[tuple[str, int], dict[str, float]] = {}
    for n in (small, large):
        with tempfile.TemporaryDirectory(prefix="wink-bench-w3-stored-") as tmp:
            runs = _runs(Path(tmp), n)
            for command, (run, _) in COMMANDS.items():
                peaks[command, n] = measure(command, runs[run])
    for command in COMMANDS:
        base, peak = peaks[command, small]["peak_mib"], peaks[command, large]["peak_mib"]
        metrics[f"{command}_{label(small)}_peak_mib"] = base
        metrics[f"{command}_{label(large)}_peak_mib"] = peak
        metrics[f"{command}_{label(large)}_seconds"] = peaks[command, large]["seconds"]
        metrics[f"{command}_peak_ratio"] = peak / base
        metrics[f"{command}_growth_bytes_per_result"] = (peak - base) * 2**20 / (large - small)
        print(f"   {command}: {base:.1f} MiB -> {peak:.1f} MiB", flush=True)
    return metrics


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w3_stored", description=__doc__)
    parser.add_argument("--child", nargs=2, metavar=("COMMAND", "RUN"), required=True)
    args = parser.parse_args(argv)
    command, run = args.child
    if command not in COMMANDS:
        parser.error(f"unknown command {command!r}; choose from {', '.join(COMMANDS)}")
    print(json.dumps(child(command, Path(run))))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
