"""The SQL of the viewer's index: its schema, and the statements that fill it.

`ResultIndex` (`_viewer_index.py`) runs these. Lines msgspec reads (`_viewer_lines.py`)
become rows directly; the others are staged and judged by `FILL` / `SKIPPED`, whose
checks (`_CHECKS`) define what a result line is. Both paths end in the same tables, and
metadata becomes `meta` rows by the same `SPREAD` statement either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._run_loader import COMPLETE, STAGE, fields_select
from ._viewer_types import ResultRow

__all__ = [
    "ATTEMPTS_SQL",
    "DISTRIBUTE",
    "EPOCHS_SQL",
    "FAILED_SQL",
    "FILL",
    "INDEXES",
    "JSON_SCHEMA",
    "LATER_INDEXES",
    "META_FACETS",
    "META_VALUE",
    "METRIC_ROWS_SQL",
    "METRIC_SQL",
    "RESULT_COLUMNS",
    "ROWS_SCHEMA",
    "ROW_COLUMNS",
    "SCHEMA",
    "SKIPPED",
    "SLICE_ROWS_SQL",
    "SLICE_SQL",
    "SPREAD",
    "TALLY",
    "json_text",
    "result_row",
]

SCHEMA = """
CREATE TABLE results (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, sample_id TEXT NOT NULL,
    experiment TEXT NOT NULL, epoch INTEGER NOT NULL, status TEXT NOT NULL,
    error_kind TEXT, score REAL NOT NULL, passed INTEGER NOT NULL, latency_ms REAL NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, tokens INTEGER NOT NULL,
    reason TEXT NOT NULL, error TEXT, tool_calls INTEGER NOT NULL, messages INTEGER NOT NULL,
    has_bundle INTEGER NOT NULL, line INTEGER NOT NULL, offset INTEGER NOT NULL,
    cost REAL, judge_cost REAL
);
CREATE TABLE meta (result_id INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE INDEX meta_result ON meta (result_id);
CREATE TABLE metrics (result_id INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL);
CREATE VIRTUAL TABLE search USING fts5(body, content='', tokenize='unicode61');
CREATE TABLE runs (run_id TEXT PRIMARY KEY, first_id INTEGER NOT NULL, last_line INTEGER NOT NULL,
    info TEXT NOT NULL);
"""

INDEXES = """
CREATE INDEX results_run ON results (run_id, experiment, id);
CREATE INDEX meta_key ON meta (key, value, result_id);
CREATE INDEX metrics_result ON metrics (result_id);
PRAGMA analysis_limit = 1000;
ANALYZE;
"""
"""What the first page's queries use: built by `finish()`. A limited `ANALYZE` (sampled
rows) gives the planner its statistics in milliseconds."""
LATER_INDEXES = (
    "CREATE INDEX results_sample ON results (run_id, sample_id)",
    "CREATE INDEX results_score ON results (run_id, score)",
    "CREATE INDEX results_latency ON results (run_id, latency_ms)",
    "CREATE INDEX results_tokens ON results (run_id, tokens)",
    # Whole statistics this time: with sampled ones, every index on `run_id` looks alike
    # and the planner may walk one (then sort) where a scan in id order is right.
    "PRAGMA analysis_limit = 0",
    "ANALYZE",
)
"""For a sample's siblings and the grid's sorts: built in the background with the text."""

ROW_COLUMNS = (
    "id", "run_id", "sample_id", "experiment", "epoch", "status", "error_kind", "score",
    "passed", "latency_ms", "input_tokens", "output_tokens", "tokens", "reason", "error",
    "tool_calls", "messages", "has_bundle",
)  # fmt: skip


_FIELDS = (
    "sample_id", "experiment", "epoch", "passed", "score", "reason", "latency_ms",
    "input_tokens", "output_tokens", "error_kind", "error", "metadata", "bundle_path",
    "tool_calls", "messages", "score_metrics", "cost_usd", "judge_cost_usd",
)  # fmt: skip
_CHECKS = (
    ("typeof(sample_id) = 'text'", "sample_id is missing or not a string"),
    ("typeof(experiment) = 'text'", "experiment_name is missing or not a string"),
    ("typeof(epoch) = 'integer'", "epoch is not an integer"),
    ("typeof(score) IN ('integer', 'real')", "score.value is missing or not a number"),
    ("passed IN (0, 1)", "score.passed is not a boolean"),
    ("typeof(latency_ms) IN ('integer', 'real')", "latency_ms is missing or not a number"),
    ("typeof(input_tokens) = 'integer' AND typeof(output_tokens) = 'integer'",
     "usage.input_tokens or usage.output_tokens is not an integer"),
    ("typeof(reason) IN ('null', 'text')", "score.reason is not a string"),
    ("typeof(error) IN ('null', 'text')", "error is not a string"),
    ("typeof(error_kind) IN ('null', 'text')", "error_kind is not a string"),
    ("ifnull(metadata_type = 'object', 1)", "metadata is not an object"),
)  # fmt: skip
"""What makes a JSON line a result the index can hold: `(SQL condition, problem)`."""
_ALL_CHECKS = " AND ".join(f"({check})" for check, _ in _CHECKS)
_PROBLEM = " ".join(f"WHEN NOT ({check}) THEN '{problem}'" for check, problem in _CHECKS)
_METADATA_TYPE = "json_type(j, '$.metadata') AS metadata_type"
FILL = f"""
INSERT INTO temp.wink_rows
SELECT :id_base + line, :run_id, sample_id, experiment, epoch,
    CASE WHEN error IS NOT NULL THEN 'error'
         WHEN passed THEN 'passed' ELSE 'failed' END,
    error_kind, score, passed, latency_ms, input_tokens,
    output_tokens, input_tokens + output_tokens, coalesce(reason, ''), error, tool_calls,
    messages, bundle_path IS NOT NULL, line, offset, cost_usd, judge_cost_usd, metadata,
    score_metrics
FROM ({fields_select(_FIELDS, extra=_METADATA_TYPE)})
WHERE {_ALL_CHECKS}
"""
SKIPPED = f"""
SELECT line, {COMPLETE}, 'not valid JSON' FROM {STAGE} WHERE NOT json_valid(j)
UNION ALL
SELECT line, complete, CASE {_PROBLEM} END
FROM ({fields_select(_FIELDS, extra=f"{_METADATA_TYPE}, {COMPLETE} AS complete")})
WHERE NOT ({_ALL_CHECKS})
ORDER BY line
"""
"""The staged lines `FILL` skipped: `(line, complete, problem)`."""
RESULT_COLUMNS = (*ROW_COLUMNS, "line", "offset", "cost", "judge_cost")
ROWS_SCHEMA = (
    f"CREATE TEMP TABLE IF NOT EXISTS wink_rows ({', '.join(RESULT_COLUMNS)}, metadata, "
    "score_metrics)"
)
JSON_SCHEMA = "CREATE TEMP TABLE IF NOT EXISTS wink_json (id, metadata, score_metrics)"
META_VALUE = """CASE e.type WHEN 'text' THEN e.value
    WHEN 'integer' THEN CAST(e.value AS TEXT)
    WHEN 'real' THEN coalesce(r.metadata -> e.fullkey, CAST(e.value AS TEXT))
    WHEN 'object' THEN wink_json_text(e.value) WHEN 'array' THEN wink_json_text(e.value)
    ELSE e.type END"""
"""A metadata value as the filters compare it (`e` an entry of `json_each(r.metadata)`):
the text `json.dumps` gives: strings as they are, objects and arrays with sorted keys
(`json_text`), numbers as written (`->` keeps a number's text; a key it cannot address
falls back to SQLite's)."""
SPREAD = (
    # Metadata values as the filters compare them (`META_VALUE`).
    f"""INSERT INTO meta SELECT r.id, e.key, {META_VALUE}
    FROM temp.wink_json AS r, json_each(r.metadata) AS e""",
    # The score's named metrics (what the checks chart and the failure groups read).
    """INSERT INTO metrics SELECT r.id, e.value ->> '$.name', e.value ->> '$.value'
    FROM temp.wink_json AS r, json_each(r.score_metrics) AS e
    WHERE json_type(r.score_metrics) = 'array' AND typeof(e.value ->> '$.name') = 'text'
        AND typeof(e.value ->> '$.value') IN ('integer', 'real')""",
    "DELETE FROM temp.wink_json",
)
"""Per batch: the metadata and metrics of `wink_json` become rows of `meta` and `metrics`."""
DISTRIBUTE = (
    f"INSERT INTO results SELECT {', '.join(RESULT_COLUMNS)} FROM temp.wink_rows",
    "INSERT INTO temp.wink_json SELECT id, metadata, score_metrics FROM temp.wink_rows",
    "DELETE FROM temp.wink_rows",
)
"""Per batch: the rows `FILL` made of staged lines go to `results` and `wink_json`."""


TALLY = """
SELECT experiment, status, error_kind, count(*), min(id) FROM results WHERE run_id = ?
GROUP BY experiment, status, error_kind
"""
META_FACETS = """
SELECT key, value, count(*) AS n FROM meta WHERE result_id BETWEEN ? AND ?
GROUP BY key, value ORDER BY key, n DESC, value
"""


# -- the run page's charts (`_viewer_charts.py`) ----------------------------------------------

SLICE_SQL = """
SELECT m.value, r.experiment, count(*), sum(r.status = 'passed'), count(DISTINCT r.sample_id)
FROM results r JOIN meta m ON m.result_id = r.id
WHERE r.run_id = ? AND m.key = ? GROUP BY m.value, r.experiment ORDER BY m.value, min(r.id)
"""
SLICE_ROWS_SQL = """
SELECT r.status = 'passed', r.sample_id FROM results r JOIN meta m ON m.result_id = r.id
WHERE r.run_id = ? AND m.key = ? AND m.value = ? AND r.experiment = ? ORDER BY r.id
"""
METRIC_SQL = """
SELECT x.name, r.experiment, count(*), sum(x.value), count(DISTINCT r.sample_id),
    sum(x.value IN (0, 1)), min(x.value) >= 0 AND max(x.value) <= 1
FROM results r JOIN metrics x ON x.result_id = r.id
WHERE r.run_id = ? GROUP BY x.name, r.experiment ORDER BY min(r.id)
"""
METRIC_ROWS_SQL = """
SELECT x.value, r.sample_id FROM results r JOIN metrics x ON x.result_id = r.id
WHERE r.run_id = ? AND x.name = ? AND r.experiment = ? ORDER BY r.id
"""
EPOCHS_SQL = "SELECT count(DISTINCT epoch) FROM results WHERE run_id = ?"
ATTEMPTS_SQL = """
SELECT experiment, sample_id, count(*), sum(status = 'passed') FROM results
WHERE run_id = ? GROUP BY experiment, sample_id ORDER BY min(id)
"""
# The checks a failed result failed: top-level metrics in [0, 0.5) (`failure_key`'s rule).
FAILED_SQL = """
SELECT r.id, r.experiment, r.sample_id, r.epoch, r.error, r.error_kind, r.reason,
    (SELECT group_concat(name, ', ') FROM (SELECT x.name FROM metrics x
     WHERE x.result_id = r.id AND instr(x.name, '.') = 0 AND x.value >= 0 AND x.value < 0.5
     ORDER BY x.name))
FROM results r WHERE r.run_id = ? AND r.status != 'passed' ORDER BY r.id
"""
"""The results that did not pass, with the checks each failed."""


def json_text(text: str) -> str:
    """JSON text with sorted keys and `json.dumps`' spacing (how metadata was shown)."""
    return json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)


def result_row(values: Sequence[Any]) -> ResultRow:
    """The `ResultRow` of the `ROW_COLUMNS` values of a `results` row."""
    data = dict(zip(ROW_COLUMNS, values, strict=True))
    data["passed"] = bool(data["passed"])
    data["has_bundle"] = bool(data["has_bundle"])
    return ResultRow(**data)
