"""The tables `wink query` exposes for run directories: names, columns, indexes.

`RUN_TABLES` is what `wink query RUN --schema` documents; `_run_tables.RunTables` fills
the tables. Every table starts with the key columns of a result (`KEY`).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEY",
    "RUN_TABLES",
    "TableSpec",
    "create_run_schema",
    "indexes_built_after",
    "provenance_columns",
]


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table: its columns (name, type as shown, description) and indexes."""

    name: str
    """Table name."""
    description: str
    """What one row is."""
    columns: tuple[tuple[str, str, str], ...]
    """`(name, type, description)`; type `JSON` is stored as TEXT holding JSON."""
    indexes: tuple[tuple[str, ...], ...] = ()
    """Column lists to index."""

    def create_sql(self) -> list[str]:
        """CREATE TABLE and CREATE INDEX statements for this table."""
        cols = ", ".join(f"{n} {'TEXT' if t == 'JSON' else t}" for n, t, _ in self.columns)
        statements = [f"CREATE TABLE {self.name} ({cols})"]
        for i, index in enumerate(self.indexes):
            statements.append(f"CREATE INDEX {self.name}_{i} ON {self.name} ({', '.join(index)})")
        return statements


_KEY_COLUMNS = (
    ("run_id", "TEXT", "Run directory name (the id `RunStore` gave the run)."),
    ("sample_id", "TEXT", "Sample id."),
    ("experiment", "TEXT", "Experiment name."),
    ("epoch", "INTEGER", "Repetition index (pass@k), 0 for the first."),
)
KEY = ("run_id", "sample_id", "experiment", "epoch")
"""The columns that name one result of a run."""

_PROVENANCE_COLUMNS = (
    ("provenance", "JSON", "What produced the run (run.json's provenance), whole."),
    ("agent_provider", "TEXT", "Provider of the target's adapter: openai, function, ..."),
    ("agent_model", "TEXT", "Model of the target's adapter."),
    ("agent_base_url", "TEXT", "Server of the target's adapter (credentials stripped)."),
    ("agent_parameters", "JSON", "Sampling parameters: json_extract(.., '$.temperature')."),
    ("judge_model", "TEXT", "Model of the first LLM judge, if any."),
    ("package_version", "TEXT", "weakincentives version that created the run."),
    ("python_version", "TEXT", "Python version that created the run."),
    ("git_commit", "TEXT", "git HEAD of the working directory, if a checkout."),
    ("git_dirty", "INTEGER", "1 when tracked files had uncommitted changes."),
    ("host", "TEXT", "Host that created the run."),
    ("command", "TEXT", "Command line (secrets redacted)."),
    ("dataset_path", "TEXT", "Dataset file, when the run came from one."),
)


def provenance_columns(provenance: Mapping[str, Any]) -> tuple[Any, ...]:
    """The `runs` provenance columns' values, from a manifest's `provenance`."""
    agent = provenance.get("agent") or {}
    judges = provenance.get("judges") or ()
    dirty = provenance.get("git_dirty")
    command = provenance.get("command")
    return (
        json.dumps(dict(provenance), ensure_ascii=False) if provenance else None,
        agent.get("provider"),
        agent.get("model"),
        agent.get("base_url"),
        json.dumps(agent["parameters"], ensure_ascii=False) if "parameters" in agent else None,
        judges[0].get("model") if judges else None,
        provenance.get("package_version"),
        provenance.get("python_version"),
        provenance.get("git_commit"),
        None if dirty is None else int(dirty),
        provenance.get("host"),
        shlex.join(command) if command else None,
        (provenance.get("dataset") or {}).get("path"),
    )


RUN_TABLES: tuple[TableSpec, ...] = (
    TableSpec("runs", "one row per run", (
        _KEY_COLUMNS[0],
        ("path", "TEXT", "The run directory."),
        ("status", "TEXT", "running, complete or interrupted (a dead writer reads interrupted)."),
        ("created_at", "TEXT", "When the run was created (ISO 8601)."),
        ("updated_at", "TEXT", "When run.json was last written."),
        ("expected", "INTEGER", "Results planned (samples x experiments x epochs), if known."),
        ("results", "INTEGER", "Distinct (sample, experiment, epoch) results recorded."),
        ("passed", "INTEGER", "Results that passed."),
        ("failed", "INTEGER", "Results scored but not passed."),
        ("errors", "INTEGER", "Results that ended in an error (cancelled included)."),
        ("fingerprint", "JSON", "What must match to resume: dataset hash, experiments, ..."),
        ("config", "JSON", "Run settings: concurrency, timeouts, ..."),
        *_PROVENANCE_COLUMNS,
    )),
    TableSpec("results", "one row per sample x experiment x epoch (the last line wins)", (
        *_KEY_COLUMNS,
        ("request_id", "TEXT", "Id of the EvalRequest."),
        ("session_id", "TEXT", "Id of the sample's session (its bundle's ids.session_id)."),
        ("passed", "INTEGER", "1 when scored and passed; errors never pass."),
        ("score", "REAL", "Score value (0 for errors)."),
        ("reason", "TEXT", "Why the score: what was found and expected."),
        ("reward", "REAL", "Weighted mean of the metrics with weight > 0 (0 when none)."),
        ("latency_ms", "REAL", "Time to run the agent on the sample."),
        ("input_tokens", "INTEGER", "Prompt tokens."),
        ("output_tokens", "INTEGER", "Completion tokens."),
        ("cached_tokens", "INTEGER", "Prompt tokens served from the provider's cache."),
        ("total_tokens", "INTEGER", "input_tokens + output_tokens."),
        ("cost_usd", "REAL", "Dollars the agent's model calls cost (NULL: unpriced)."),
        ("judge_cost_usd", "REAL", "Dollars the judge's calls cost (NULL: no judge or unpriced)."),
        ("error_kind", "TEXT", "agent, timeout, evaluator, judge, ... (NULL when scored)."),
        ("error", "TEXT", "Error message (NULL when scored)."),
        ("metadata", "JSON", "The sample's metadata: json_extract(metadata, '$.topic')."),
        ("output", "JSON", "The agent's output (NULL when none)."),
        ("input", "JSON", "The sample's input as recorded (truncated past the run's limit)."),
        ("expected", "JSON", "The sample's expected value as recorded (truncated likewise)."),
        ("metrics", "JSON", "Metric name -> value: json_extract(metrics, '$.correct')."),
        ("bundle_path", "TEXT", "Debug bundle of the sample, if one was written."),
        ("delivery_count", "INTEGER", "Deliveries of the request before this result (1 = first)."),
        ("line", "INTEGER", "Line of results.jsonl this row comes from."),
    ), (KEY, ("experiment", "passed"), ("sample_id",))),
    TableSpec("metrics", "one row per metric of a result's score", (
        *_KEY_COLUMNS,
        ("name", "TEXT", "Metric name."),
        ("value", "REAL", "Measured value."),
        ("weight", "REAL", "Weight in the reward (0 = tracked only)."),
        ("metadata", "JSON", "The metric's metadata."),
    ), (KEY, ("name",))),
    TableSpec("tool_calls", "one row per tool call a result recorded", (
        *_KEY_COLUMNS,
        ("seq", "INTEGER", "Position of the call in the sample, from 0."),
        ("name", "TEXT", "Tool name."),
        ("params", "JSON", "Arguments as decoded."),
        ("message", "TEXT", "What the tool returned to the model."),
        ("success", "INTEGER", "1 when the call succeeded."),
        ("duration_ms", "REAL", "Time in the handler."),
        ("error", "TEXT", "Exception or validation error, if any."),
    ), (KEY, ("name",))),
    TableSpec("messages", "one row per transcript message a result recorded", (
        *_KEY_COLUMNS,
        ("seq", "INTEGER", "Position in the transcript, from 0."),
        ("role", "TEXT", "system, user, assistant or tool."),
        ("content", "TEXT", "Message text (NULL for a turn with only tool calls)."),
        ("tool_calls", "JSON", "Tool calls requested: [{id, name, arguments}]."),
        ("tool_call_id", "TEXT", "For a tool message: the call it answers."),
        ("name", "TEXT", "For a tool message: the tool's name."),
    ), (KEY,)),
    TableSpec("logs", "one row per log record in the debug bundles the results point to", (
        *_KEY_COLUMNS,
        ("bundle_path", "TEXT", "The bundle, as written in results.bundle_path."),
        ("seq", "INTEGER", "Position of the record in the bundle, from 0."),
        ("time", "TEXT", "When the record was emitted (ISO 8601)."),
        ("level", "TEXT", "DEBUG, INFO, WARNING, ERROR or CRITICAL."),
        ("logger", "TEXT", "Logger name."),
        ("message", "TEXT", "Formatted message."),
        ("thread", "TEXT", "Thread name."),
        ("exception", "TEXT", "Formatted traceback, if any."),
    ), (KEY, ("level",))),
)  # fmt: skip
"""Every table of a run target, in the order `--schema` shows them."""


@contextlib.contextmanager
def indexes_built_after(conn: sqlite3.Connection, tables: Iterable[str]) -> Iterator[None]:
    """Drop the indexes of `tables` while they are filled, build them once at the end.

    Cheaper than keeping them up to date row by row. Run it inside a transaction: if
    the filling fails, rolling back brings the indexes back.
    """
    specs = [spec for spec in RUN_TABLES if spec.name in set(tables)]
    for spec in specs:
        for i in range(len(spec.indexes)):
            conn.execute(f"DROP INDEX {spec.name}_{i}")
    yield
    for spec in specs:
        for statement in spec.create_sql()[1:]:
            conn.execute(statement)


def create_run_schema(conn: sqlite3.Connection) -> None:
    """Create every table of `RUN_TABLES` (empty) in `conn`'s main database."""
    for spec in RUN_TABLES:
        for statement in spec.create_sql():
            conn.execute(statement)
