"""The baselines: the same logical work as the framework, and nothing else.

For each sample a baseline calls the same agent function, computes exact match, and
appends the same JSONL line a run store writes for an `EvalResult` (same keys, same
values, serialized with the standard library) to a results file.

- `run_baseline` is plain asyncio, the reference every ratio is taken against: the agent
  is awaited when it is a coroutine function, and `concurrency` worker tasks pull samples
  from one shared iterator (the same concurrency as `asyncio.Semaphore(concurrency)`
  around one task per sample, without holding a task per sample, so its memory is
  O(concurrency) like the runner's).
- `run_thread_baseline` is a plain `ThreadPoolExecutor` of `concurrency` threads running a
  synchronous agent: what a thread-per-slot design such as `EvalLoop` can reach on this
  machine at best, which tells the cost of threads apart from the cost of the framework.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from weakincentives.evals import Sample

__all__ = ["result_line", "run_baseline", "run_thread_baseline"]


def result_line(sample: Sample[Any, Any], output: Any, latency_ms: float, run_id: str) -> bytes:
    """The JSONL line of one scored sample, shaped like a serialized `EvalResult`."""
    sample_id, expected = sample.id, sample.expected
    passed = output == expected
    reason = f"output equals expected {expected!r}" if passed else f"expected {expected!r}"
    line = {
        "sample_id": sample_id,
        "experiment_name": "baseline",
        "score": {"value": 1.0 if passed else 0.0, "passed": passed, "reason": reason,
                  "metrics": []},
        "latency_ms": round(latency_ms),
        "error": None,
        "bundle_path": None,
        "error_kind": None,
        "epoch": 0,
        "request_id": str(uuid.uuid4()),
        "run_id": run_id,
        "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0,
                  "cache_write_tokens": 0, "reasoning_tokens": 0},
        "metadata": {},
        "output": output,
        "messages": [{"role": "assistant", "content": output, "tool_calls": [],
                      "tool_call_id": None, "name": None, "thinking": [], "is_error": False}],
        "tool_calls": [],
        "delivery_count": 1,
        "environment": None,
        "input": sample.input,
        "expected": expected,
        "cost": None,
        "judge_cost": None,
        "session_id": None,
        "turns": [],
    }  # fmt: skip
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def run_baseline(
    samples: Iterable[Sample[Any, Any]],
    agent: Callable[[Any], Any],
    results_path: Path,
    *,
    concurrency: int,
    run_id: str = "baseline",
) -> int:
    """Evaluate `samples` with plain asyncio; return the number of lines written."""
    return asyncio.run(_run(iter(samples), agent, results_path, concurrency, run_id))


async def _run(
    samples: Iterator[Sample[Any, Any]],
    agent: Callable[[Any], Any],
    results_path: Path,
    concurrency: int,
    run_id: str,
) -> int:
    is_async = inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(
        getattr(agent, "__call__", None)  # noqa: B004 - async callable objects count too
    )
    with results_path.open("ab") as out:
        counts = await asyncio.gather(
            *(_worker(samples, agent, is_async, out, run_id) for _ in range(concurrency))
        )
    return sum(counts)


async def _worker(
    samples: Iterator[Sample[Any, Any]],
    agent: Callable[[Any], Any],
    is_async: bool,
    out: IO[bytes],
    run_id: str,
) -> int:
    written = 0
    # One shared iterator: `next` never yields to the event loop, so each sample is
    # taken by exactly one worker.
    for sample in samples:
        start = time.perf_counter()
        output = await agent(sample.input) if is_async else agent(sample.input)
        latency_ms = (time.perf_counter() - start) * 1000.0
        out.write(result_line(sample, output, latency_ms, run_id))
        written += 1
    return written


def run_thread_baseline(
    samples: Iterable[Sample[Any, Any]],
    agent: Callable[[Any], Any],
    results_path: Path,
    *,
    concurrency: int,
    run_id: str = "baseline",
) -> int:
    """Evaluate `samples` on `concurrency` plain threads; return the number of lines written."""
    slots = threading.BoundedSemaphore(concurrency)
    lock = threading.Lock()
    written = 0

    def one(sample: Sample[Any, Any], out: IO[bytes]) -> None:
        nonlocal written
        try:
            start = time.perf_counter()
            output = agent(sample.input)
            latency_ms = (time.perf_counter() - start) * 1000.0
            line = result_line(sample, output, latency_ms, run_id)
            with lock:
                out.write(line)
                written += 1
        finally:
            slots.release()

    with results_path.open("ab") as out, ThreadPoolExecutor(concurrency) as pool:
        for sample in samples:
            slots.acquire()  # bounded: never more than `concurrency` samples queued
            pool.submit(one, sample, out)
    return written
