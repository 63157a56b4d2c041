"""`wink query` at scale: an aggregate over a run of 100,000 results (5,000 with `--quick`).

The run directory is generated in a temporary directory (not timed): `run.json` from the
real `RunStore`, then `results.jsonl` written directly, one line per result in the
store's format (a `serde` dump of a realistic `EvalResult`, about 860 bytes, varied per
line). The query is the one of the brief, `SELECT experiment, avg(passed) FROM results
GROUP BY experiment`. Reported, best of `REPEATS`:

- `load_s`: open the run and build `results` from results.jsonl (no cache) as the
  query needs it, and `load_cpu_s` the CPU seconds it took (the machines are shared: CPU
  time is steadier). The `reward` and `metrics` columns are filled only for queries that
  read them, and this one does not;
- `query_s`: the aggregate itself, on the loaded table;
- `cold_total_s`: `load_s + query_s`, what a first `wink query` costs (imports aside);
- `full_load_s` (`_cpu_s`): `results` with every column (`SELECT * FROM results`);
- `lazy_columns_s`: filling `reward` and `metrics` afterwards (results.jsonl is read
  again), for the first query that reads them after `load_s`;
- `load_and_cache_s`: `load_s` plus writing `.query-cache.sqlite`, the default first run;
- `cached_load_s` / `cached_total_s`: the same with a valid cache (every later query);
- `details_load_s` (`_cpu_s`): loading `metrics`, `tool_calls` and `messages` as well;
- `python_load_s`: the baseline, the obvious loader: `json.loads` per line, the same
  columns computed in Python, `executemany` in batches of 10,000 (no dedupe, no indexes);
  `load_vs_python` is the ratio of CPU times of `full_load_s` (every column, as the
  baseline builds) to it: below 1, faster than parsing in Python;
- `cache_mb` / `results_mb`: size of the cache (results table only) and of results.jsonl.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import quick
from weakincentives import serde
from weakincentives.clock import FakeClock
from weakincentives.debug import QueryDatabase
from weakincentives.evals import (
    EvalResult,
    Fingerprint,
    Metric,
    RunStore,
    Score,
    ToolCallRecord,
)
from weakincentives.runtime.session import ChatMessage, TokenUsage

__all__ = ["QUERY", "REPEATS", "TARGETS", "generate_run", "main"]

QUERY = "SELECT experiment, avg(passed) FROM results GROUP BY experiment"
"""The aggregate timed."""
REPEATS = 3
TARGETS: dict[str, tuple[str, float]] = {
    "cold_total_s": ("<=", 1.0),
    "cached_total_s": ("<=", 0.5),
    "load_vs_python": ("<=", 1.0),
}
_EXPERIMENTS = ("baseline", "v2", "v3", "v4")
_TOPICS = ("algebra", "geometry", "calculus", "probability", "logic")
_CACHE = ".query-cache.sqlite"


def _template() -> dict[str, Any]:
    result = EvalResult(
        sample_id="sample-000000",
        experiment_name="baseline",
        score=Score.from_metrics(
            [Metric("correct", 1.0, weight=1.0), Metric("turns", 3.0)], reason="exact match"
        ),
        latency_ms=120,
        request_id="00000000-0000-0000-0000-000000000000",
        run_id="bench",
        usage=TokenUsage(input_tokens=900, output_tokens=120),
        metadata={"topic": "algebra", "difficulty": 2},
        output="The answer is 4.",
        messages=(
            ChatMessage(role="user", content="What is 2 + 2? Show your work."),
            ChatMessage(role="assistant", content="The answer is 4."),
        ),
        tool_calls=(ToolCallRecord("add", {"a": 2, "b": 2}, "4", True, 1.5),),
    )
    data: dict[str, Any] = serde.dump(result)
    return data


def generate_run(
    root: Path,
    n: int,
    *,
    experiments: Sequence[str] = _EXPERIMENTS,
    variant: int = 0,
    epochs: int = 1,
) -> Path:
    """Write a run of `n` results (n / len(experiments) / epochs samples each) under `root`.

    `variant` 0 passes 70% of the results; variant 1 passes 80%, and half of its pairs
    with variant 0 differ (as a changed agent's run differs from its baseline's). With
    `epochs` > 1, each sample of each experiment has that many results, epochs 0, 1, ...
    """
    store = RunStore(root, clock=FakeClock(), sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64, target="bench"), run_id="bench"):
        pass
    template = _template()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with (root / "bench" / "results.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            ok = (i * 7 + 3 * variant) % 10 < 7 + variant
            line = dict(template)
            attempt = i // len(experiments)
            line["sample_id"] = f"sample-{attempt // epochs:06d}"
            line["epoch"] = attempt % epochs
            line["experiment_name"] = experiments[i % len(experiments)]
            line["score"] = {**template["score"], "value": float(ok), "passed": ok}
            line["latency_ms"] = float(50 + (i * 37) % 1000)
            line["request_id"] = f"req-{i:08d}"
            line["metadata"] = {"topic": _TOPICS[i % len(_TOPICS)], "difficulty": i % 3}
            f.write(dumps(line) + "\n")
    return root / "bench"


class _Timer:
    """Wall-clock and CPU seconds since creation (CPU time shrugs off a busy machine)."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _best(fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """The best wall-clock and the best CPU time over `REPEATS` runs."""
    runs = [fn() for _ in range(REPEATS)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def _load(
    run: Path, *, cache: bool, sql: str = "SELECT 1 FROM results LIMIT 1"
) -> tuple[float, float]:
    timer = _Timer()
    with QueryDatabase.open(run, cache=cache) as db:
        db.execute(sql)
    return timer.stop()


def _query(run: Path) -> tuple[float, float]:
    with QueryDatabase.open(run, cache=False) as db:
        db.execute("SELECT 1 FROM results LIMIT 1")
        timer = _Timer()
        db.execute(QUERY)
        return timer.stop()


def _lazy_columns(run: Path) -> tuple[float, float]:
    with QueryDatabase.open(run, cache=False) as db:
        db.execute("SELECT 1 FROM results LIMIT 1")
        timer = _Timer()
        db.execute("SELECT avg(reward) FROM results")
        return timer.stop()


def _load_and_cache(run: Path) -> tuple[float, float]:
    (run / _CACHE).unlink(missing_ok=True)
    return _load(run, cache=True)


def _row(d: dict[str, Any], dumps: Callable[[Any], str]) -> tuple[Any, ...]:
    score, usage = d["score"], d["usage"]
    metrics = score["metrics"]
    weighted = [(m["value"], m["weight"]) for m in metrics if m["weight"] > 0]
    total = sum(w for _, w in weighted)
    reward = sum(v * w for v, w in weighted) / total if total else 0.0
    return (
        "bench", d["sample_id"], d["experiment_name"], d["epoch"], d["request_id"],
        d["error"] is None and score["passed"], score["value"], score["reason"], reward,
        d["latency_ms"], usage["input_tokens"], usage["output_tokens"],
        usage["cached_tokens"], usage["input_tokens"] + usage["output_tokens"],
        d.get("cost"), d.get("judge_cost"), d["error_kind"], d["error"], dumps(d["metadata"]),
        dumps(d["output"]),
        dumps({m["name"]: m["value"] for m in metrics}), d["bundle_path"],
        d["delivery_count"],
    )  # fmt: skip


def _python_load(run: Path) -> tuple[float, float]:
    """The baseline: json.loads per line, rows built in Python, executemany in batches."""
    timer = _Timer()
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE results ({', '.join(f'c{i}' for i in range(23))})")
    insert = f"INSERT INTO results VALUES ({', '.join('?' * 23)})"
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    batch: list[tuple[Any, ...]] = []
    with (run / "results.jsonl").open("rb") as f:
        for line in f:
            batch.append(_row(json.loads(line), dumps))
            if len(batch) == 10_000:
                conn.executemany(insert, batch)
                batch.clear()
    conn.executemany(insert, batch)
    conn.commit()
    conn.close()
    return timer.stop()


def main() -> dict[str, float]:
    """Generate the run, time loading and querying it, print and return the numbers."""
    n = 5_000 if quick() else 100_000
    with tempfile.TemporaryDirectory(prefix="wink-bench-query-") as tmp:
        run = generate_run(Path(tmp), n)
        load = _best(lambda: _load(run, cache=False))
        query = _best(lambda: _query(run))
        full = _best(lambda: _load(run, cache=False, sql="SELECT * FROM results LIMIT 1"))
        lazy = _best(lambda: _lazy_columns(run))
        details_sql = (
            "SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM tool_calls), "
            "(SELECT count(*) FROM messages)"
        )
        details = _best(lambda: _load(run, cache=False, sql=details_sql))
        with_cache = _best(lambda: _load_and_cache(run))
        cached = _best(lambda: _load(run, cache=True))
        baseline = _best(lambda: _python_load(run))
        metrics = {
            "results": float(n),
            "load_s": load[0],
            "load_cpu_s": load[1],
            "query_s": query[0],
            "cold_total_s": load[0] + query[0],
            "full_load_s": full[0],
            "full_load_cpu_s": full[1],
            "lazy_columns_s": lazy[0],
            "load_and_cache_s": with_cache[0],
            "cached_load_s": cached[0],
            "cached_total_s": cached[0] + query[0],
            "details_load_s": details[0],
            "details_load_cpu_s": details[1],
            "python_load_s": baseline[0],
            "python_load_cpu_s": baseline[1],
            "load_vs_python": full[1] / baseline[1],
            "cache_mb": (run / _CACHE).stat().st_size / 1e6,
            "results_mb": (run / "results.jsonl").stat().st_size / 1e6,
        }
    width = max(map(len, metrics))
    for name, value in metrics.items():
        print(f"{name:<{width}}  {value:.3f}")
    return metrics


if __name__ == "__main__":
    main()
