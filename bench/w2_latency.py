"""W2 latency-bound: the agent waits 100 ms per sample, N = 1000, concurrency 50 and 200.

The wait is a real sleep inside the agent: that is the workload (a model call is mostly
waiting). `efficiency = ideal / actual`, where `ideal = N * delay / C` is the wall time of
perfect overlap, so 1.0 means the framework adds nothing to the waiting. The plain-asyncio
baseline (an `asyncio.sleep` agent under `C` worker tasks) shows what this machine can do.
Best of `REPEATS`, interleaved; `*_vs_baseline` is each efficiency over the baseline's.

Two kinds of agent wait here, and the targets at C = 200 are on the async one:

- an `async def` agent awaiting `asyncio.sleep`, like the baseline's: `runner_async`
  (the local runner awaits it on its event loop) and `evalloop_async` (`EvalLoop` runs a
  `FunctionLoop` around it as tasks on one event loop);
- the prompt-based agent on an async adapter (`FunctionAdapter` around an `async def`
  model that awaits `asyncio.sleep`): `runner_agent_async` and `evalloop_agent_async`,
  the async agent path (prompt render, model call, structured output, as tasks);
- a synchronous agent calling `time.sleep`, which needs a thread per sample in flight:
  `runner_function`, `evalloop_function`, and `baseline_threads`, a bare
  `ThreadPoolExecutor` with no framework at all. At C = 200 all three sit together near
  0.93 on a two-core machine: 200 threads waking up share one GIL, and the handovers cost
  more than the work. `baseline_threads` is the ceiling for threads, and the framework's
  sync paths are measured against it.
"""

from __future__ import annotations

from bench import quick
from bench.w1_overhead import DRIVERS, measure

__all__ = ["TARGETS", "main"]

TARGETS: dict[str, tuple[str, float]] = {
    "evalloop_async_c200_efficiency": (">=", 0.95),
    "runner_agent_async_c200_efficiency": (">=", 0.95),
    "evalloop_agent_async_c200_efficiency": (">=", 0.95),
    "runner_async_c200_efficiency": (">=", 0.95),
    "runner_function_c50_efficiency": (">=", 0.97),
}

# The sync prompt-based agent needs a thread per sample in flight, like `runner_function`;
# its async twin (`*_agent_async`, an async adapter) is the agent path measured here.
_SKIP = {"evalloop_agent", "runner_agent"}


def main() -> dict[str, float]:
    if quick():
        n, delay, levels, repeats = 100, 0.01, (10, 50), 1
    else:
        n, delay, levels, repeats = 1000, 0.1, (50, 200), 3
    chosen = {name: d for name, d in DRIVERS.items() if name not in _SKIP}
    print(f"W2 latency-bound: N={n}, agent waits {delay * 1000:g} ms, best of {repeats}")
    metrics: dict[str, float] = {}
    for c in levels:
        ideal = n * delay / c
        times = measure(chosen, n=n, repeats=repeats, concurrency=c, delay=delay)
        for name, runs in times.items():
            best = min(runs)
            metrics[f"{name}_c{c}_seconds"] = best
            metrics[f"{name}_c{c}_efficiency"] = ideal / best
        base = metrics[f"baseline_c{c}_efficiency"]
        for name in times:
            if name != "baseline":  # the ratio to plain asyncio measured in the same run
                metrics[f"{name}_c{c}_vs_baseline"] = metrics[f"{name}_c{c}_efficiency"] / base
    return metrics
