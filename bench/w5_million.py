"""W5 at scale: N samples of a simulated 50 ms agent through one Redis and K worker processes.

`make bench` runs it at 20,000 samples; the full run is `python -m bench.w5_million`,
with `WINK_BENCH_W5_N` samples (default there: 1,000,000) and `WINK_BENCH_W5_WORKERS` worker
processes (default: one per CPU), each evaluating `WINK_BENCH_W5_CONCURRENCY` samples at
once (default 200) as tasks on its event loop (the agent is an `async def` that awaits
`asyncio.sleep(0.05)`). The client is `run_distributed` with a run store, as `wink eval
run --redis` uses it. Reported:

- `samples_per_s`, `samples_per_s_per_core` (the machine's cores are shared by every
  process: client, workers and redis-server) and `projected_16_workers_samples_per_s`
  (per-core rate x 16, the projection to 16 cores; an upper bound, as Redis is one core);
- `ideal_samples_per_s`: K x C / 50 ms, what waiting alone would allow;
- the report's exactness: `results` (must be N), `duplicates_in_store` (must be 0);
- `cpu_ms_per_sample`: CPU time spent per sample by every process of the run, the client
  (this process, from `run_distributed`'s start), the workers and redis-server, each also
  on its own (`client_cpu_ms_per_sample`, `workers_cpu_ms_per_sample`,
  `redis_cpu_ms_per_sample`); the target halves the 1.8 ms measured before the Redis fast
  path (`cpu_per_sample_vs_before` is the ratio to those 1.8 ms);
- `client_peak_mib`, `worker_peak_mib` (largest of the workers), and `redis_peak_mib`
  with `redis_bytes_per_queued_sample`: Redis memory at its peak over the samples queued
  at that time (each request waits in Redis until a worker takes it, so this is the
  memory a run needs per sample submitted and not yet answered).

`python -m bench.w5_million --quick` runs 2,000 samples with 2 workers (a smoke test).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from bench import quick
from bench.w4_distributed import _free_port, _wait, redis_url
from weakincentives.contrib.distributed import WorkerContext, WorkerSpec, run_distributed
from weakincentives.evals import RunStore, Sample, exact_match
from weakincentives.runtime import FunctionLoop

__all__ = ["TARGETS", "main", "worker_spec"]

CPU_MS_PER_SAMPLE_BEFORE = 1.8
"""CPU per distributed sample (client + workers + redis-server) before this bench's
targets were set: issue 20's measurement."""

TARGETS: dict[str, tuple[str, float]] = {
    "cpu_ms_per_sample": ("<=", CPU_MS_PER_SAMPLE_BEFORE / 2),
    "duplicates_in_store": ("<=", 0.0),
}

_ROOT = Path(__file__).resolve().parent.parent
_DELAY = 0.05


async def _sleepy_answer(question: str) -> str:
    await asyncio.sleep(_DELAY)
    return "a" + question[1:]


def worker_spec(context: WorkerContext) -> WorkerSpec:
    """The workers' factory: `q17` -> `a17` after awaiting 50 ms."""
    del context
    return WorkerSpec(
        loop=FunctionLoop(_sleepy_answer, name="sleepy"),
        evaluator=exact_match,
        input_type=str,
        expected_type=str,
    )


class _Samples:
    """N samples made afresh on each pass, as a dataset file read again would be: the
    client reads a re-iterable dataset again rather than holding it (a generator would
    be held whole)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Any:
        for i in range(self.n):
            yield Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}")


def _samples(n: int) -> Any:
    return _Samples(n)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _redis_cpu_seconds(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _peak_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


class _RedisWatch(threading.Thread):
    """Samples Redis memory and queue length every 0.5 s; keeps the peak."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url)
        self.stop = threading.Event()
        self.peak_bytes = 0
        self.queued_at_peak = 0
        self.baseline = int(self.client.info("memory")["used_memory"])

    def run(self) -> None:
        while not self.stop.wait(0.5):
            used = int(self.client.info("memory")["used_memory"])
            if used > self.peak_bytes:
                queued = sum(
                    int(self.client.zcard(key))
                    for pattern in ("*:ready", "*:inflight")
                    for key in self.client.scan_iter(pattern)
                )
                self.peak_bytes, self.queued_at_peak = used, queued


def main() -> dict[str, float]:
    n = 2000 if quick() else int(os.environ.get("WINK_BENCH_W5_N", "20000"))
    k = 2 if quick() else int(os.environ.get("WINK_BENCH_W5_WORKERS", str(os.cpu_count() or 1)))
    c = int(os.environ.get("WINK_BENCH_W5_CONCURRENCY", "200"))
    print(f"W5: {n} samples, {k} workers x {c} in flight, agent awaits {_DELAY * 1000:g} ms")
    with redis_url() as url, tempfile.TemporaryDirectory(prefix="wink-bench-w5-") as tmp:
        namespace = f"w5-{os.getpid()}"
        workers = _start_workers(url, namespace, k, c, Path(tmp))
        try:
            _wait(lambda: all(_ready(w) for w in workers), 120.0, f"{k} workers to be ready")
            watch = _RedisWatch(url)
            watch.start()
            store = RunStore(Path(tmp) / "runs")
            pids = [w[0].pid for w in workers]
            cpu_before = (
                _cpu_seconds(os.getpid()), sum(map(_cpu_seconds, pids)),
                _redis_cpu_seconds(watch.client),
            )  # fmt: skip
            start = time.perf_counter()
            report = run_distributed(
                _samples(n), redis_url=url, namespace=namespace, run_store=store, timeout=None
            )
            elapsed = time.perf_counter() - start
            # The client's peak before this bench reads the store back to check it.
            client_peak = _peak_mib(os.getpid())
            results, complete = len(report.results), report.complete  # reads them back
            cpu_after = (
                _cpu_seconds(os.getpid()), sum(map(_cpu_seconds, pids)),
                _redis_cpu_seconds(watch.client),
            )  # fmt: skip
            watch.stop.set()
            watch.join()
            worker_peak = max(_peak_mib(pid) for pid in pids)
        finally:
            for process, _ in workers:
                process.terminate()
            for process, _ in workers:
                process.wait(60)
        lines = 0
        keys: set[str] = set()
        for line in (Path(tmp) / "runs" / str(report.run_id) / "results.jsonl").open("rb"):
            lines += 1
            keys.add(json.loads(line)["request_id"])
    cores = os.cpu_count() or 1
    rate = n / elapsed
    client_cpu, workers_cpu, redis_cpu = (
        (after - before) * 1000 / n for before, after in zip(cpu_before, cpu_after, strict=True)
    )
    cpu = client_cpu + workers_cpu + redis_cpu
    return {
        "samples": float(n),
        "workers": float(k),
        "seconds": elapsed,
        "samples_per_s": rate,
        "ideal_samples_per_s": k * c / _DELAY,
        "samples_per_s_per_core": rate / cores,
        "projected_16_workers_samples_per_s": rate / cores * 16,
        "cpu_ms_per_sample": cpu,
        "cpu_per_sample_vs_before": cpu / CPU_MS_PER_SAMPLE_BEFORE,
        "client_cpu_ms_per_sample": client_cpu,
        "workers_cpu_ms_per_sample": workers_cpu,
        "redis_cpu_ms_per_sample": redis_cpu,
        "load_average_1min": os.getloadavg()[0],
        "results": float(results),
        "complete": float(complete),
        "duplicates_in_store": float(lines - len(keys)),
        "client_peak_mib": client_peak,
        "worker_peak_mib": worker_peak,
        "redis_peak_mib": watch.peak_bytes / 2**20,
        "redis_bytes_per_queued_sample": (
            (watch.peak_bytes - watch.baseline) / watch.queued_at_peak
            if watch.queued_at_peak
            else float("nan")
        ),
    }


def _start_workers(url: str, namespace: str, k: int, c: int, logs: Path) -> list[Any]:
    import subprocess

    workers = []
    for i in range(k):
        port = _free_port()
        # The bench package from here; an inherited PYTHONPATH first, so the bench can
        # measure another checkout's library (`PYTHONPATH=../other/src`).
        path = [p for p in (os.environ.get("PYTHONPATH"), str(_ROOT)) if p]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        out = (logs / f"worker-{i}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-c", "from weakincentives.cli import main; main()", "worker",
             "bench.w5_million:worker_spec", "--redis", url, "--namespace", namespace,
             "--concurrency", str(c), "--health-port", str(port), "--log-level", "WARNING"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=_ROOT,
        )  # fmt: skip
        workers.append((process, port))
    return workers


def _ready(worker: Any) -> bool:
    import urllib.request

    process, port = worker
    if process.poll() is not None:
        raise RuntimeError(f"a W5 worker exited with {process.returncode}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=1) as r:
            return bool(json.loads(r.read())["ready"])
    except OSError:
        return False


if __name__ == "__main__":
    if "--quick" in sys.argv:
        os.environ["WINK_BENCH_QUICK"] = "1"
    os.environ.setdefault("WINK_BENCH_W5_N", "1000000")
    for name, value in main().items():
        print(f"{name:40s} {value:14.3f}")
