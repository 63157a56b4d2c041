"""Values of the viewer's index: filters, rows, pages, facets; and the filter's SQL.

`where_clause` turns a `ResultFilter` into an SQL condition with `?` parameters: every
value the user typed is a parameter, and the only SQL text chosen from user input comes
from fixed whitelists (`STATUSES`, `SORT_KEYS`), so a filter cannot inject SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "MAX_FACET_VALUES",
    "SORT_KEYS",
    "STATUSES",
    "Facets",
    "IndexedRun",
    "ResultFilter",
    "ResultPage",
    "ResultRow",
    "Status",
    "facets_of",
    "fts_query",
    "where_clause",
]

Status = Literal["passed", "failed", "error", "not_passed"]
"""Result status filters: `failed` is scored and not passed; `not_passed` adds errors."""
STATUSES: tuple[Status, ...] = ("passed", "failed", "error", "not_passed")

SORT_KEYS: Mapping[str, str] = {
    "order": "id",
    "sample": "sample_id",
    "experiment": "experiment",
    "epoch": "epoch",
    "status": "status",
    "score": "score",
    "latency": "latency_ms",
    "tokens": "tokens",
}
"""Sort key accepted by `ResultIndex.page` -> the column it sorts on (a whitelist)."""

_WORD = re.compile(r"[^\W_]+")
MAX_FACET_VALUES = 50
"""Values of a metadata key a filter offers (the most common)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultFilter:
    """What the results grid shows; every field left at its default matches everything."""

    experiments: tuple[str, ...] = ()
    """Keep these experiments only."""
    status: Status | None = None
    """Keep results with this status."""
    error_kind: str | None = None
    """Keep errors of this kind."""
    metadata: tuple[tuple[str, str], ...] = ()
    """`(key, value)` pairs the sample's metadata must have (values compared as text)."""
    sample: str = ""
    """Keep sample ids that contain this text."""
    score_min: float | None = None
    """Lowest score kept."""
    score_max: float | None = None
    """Highest score kept."""
    latency_min: float | None = None
    """Lowest latency kept, in milliseconds."""
    latency_max: float | None = None
    """Highest latency kept, in milliseconds."""
    tokens_min: int | None = None
    """Fewest total tokens kept."""
    tokens_max: int | None = None
    """Most total tokens kept."""
    search: str = ""
    """Words that must all occur (as word prefixes) in the output, transcript, tool calls,
    reason or error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRow:
    """One line of the results grid."""

    id: int
    """Index id of the result (stable while the viewer runs)."""
    run_id: str
    """Run the result belongs to."""
    sample_id: str
    """Sample id."""
    experiment: str
    """Experiment name."""
    epoch: int
    """Epoch."""
    status: Literal["passed", "failed", "error"]
    """`passed`, `failed` (scored, not passed) or `error`."""
    error_kind: str | None
    """Error kind, for errors."""
    score: float
    """Score value (as recorded; the report counts errors as 0)."""
    passed: bool
    """Whether the score passed (before errors are taken into account)."""
    latency_ms: float
    """Latency."""
    input_tokens: int
    """Input tokens."""
    output_tokens: int
    """Output tokens."""
    tokens: int
    """Input plus output tokens."""
    reason: str
    """The score's reason."""
    error: str | None
    """The error message, for errors."""
    tool_calls: int
    """Number of tool calls recorded."""
    messages: int
    """Number of transcript messages recorded."""
    has_bundle: bool
    """Whether the result names a debug bundle."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultPage:
    """One page of results and the number of results matching the filter."""

    total: int
    """Results matching the filter (all pages)."""
    offset: int
    """Index of the first row in the filtered, sorted results."""
    limit: int
    """Page size asked for."""
    rows: tuple[ResultRow, ...]
    """The page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Facets:
    """Values the filters of one run can take, with counts."""

    experiments: Mapping[str, int]
    """Experiment -> results."""
    statuses: Mapping[str, int]
    """`passed` / `failed` / `error` -> results."""
    error_kinds: Mapping[str, int]
    """Error kind -> results."""
    metadata: Mapping[str, tuple[str, ...]]
    """Metadata key -> its most common values (at most 50, as text)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedRun:
    """A run as indexed: where it is, how many results, what could not be read."""

    run_id: str
    """Run id."""
    path: Path
    """Run directory."""
    results: int
    """Results indexed (one per key; the last line wins)."""
    lines: int
    """Lines read from `results.jsonl`."""
    skipped: tuple[str, ...] = field(default=())
    """`file:line: problem` for each line that could not be read (at most 20 kept)."""
    skipped_count: int = 0
    """Number of lines skipped."""


def facets_of(
    tally: Sequence[tuple[str, str, str | None, int, int]],
    metadata: Sequence[tuple[str, str, int]],
) -> Facets:
    """The `Facets` of a run's tally and its metadata values' counts.

    `tally` holds `(experiment, status, error kind, results, first id)` rows (in any
    order: each count comes in order of first appearance); `metadata` holds `(key,
    value, results)` rows by key, most results first.
    """
    experiments: dict[str, int] = {}
    statuses: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for experiment, status, kind, n, _ in sorted(tally, key=lambda row: row[4]):
        experiments[experiment] = experiments.get(experiment, 0) + n
        statuses[status] = statuses.get(status, 0) + n
        if kind is not None:
            kinds[kind] = kinds.get(kind, 0) + n
    values: dict[str, list[str]] = {}
    for key, value, _ in metadata:
        found = values.setdefault(key, [])
        if len(found) < MAX_FACET_VALUES:
            found.append(value)
    return Facets(
        experiments=experiments,
        statuses=statuses,
        error_kinds=kinds,
        metadata={k: tuple(v) for k, v in values.items()},
    )


def fts_query(text: str) -> str | None:
    """The FTS5 query for a search box: every word, as a quoted prefix, must occur.

    Returns None when `text` has no word at all (nothing can match).

    Examples:
        >>> fts_query('divide "by" zero*')
        '"divide"* "by"* "zero"*'
    """
    words = _WORD.findall(text)
    if not words:
        return None
    return " ".join(f'"{word}"*' for word in words)


_STATUS_SQL: Mapping[str, str] = {
    "passed": "status = 'passed'",
    "failed": "status = 'failed'",
    "error": "status = 'error'",
    "not_passed": "status != 'passed'",
}


def where_clause(run_id: str, flt: ResultFilter) -> tuple[str, list[Any]]:
    clauses = ["run_id = ?"]
    params: list[Any] = [run_id]
    if flt.experiments:
        clauses.append(f"experiment IN ({', '.join('?' * len(flt.experiments))})")
        params.extend(flt.experiments)
    if flt.status is not None:
        clauses.append(_STATUS_SQL[flt.status])
    if flt.error_kind is not None:
        clauses.append("error_kind = ?")
        params.append(flt.error_kind)
    for key, value in flt.metadata:
        clauses.append("id IN (SELECT result_id FROM meta WHERE key = ? AND value = ?)")
        params.extend((key, value))
    if flt.sample:
        clauses.append("instr(sample_id, ?) > 0")
        params.append(flt.sample)
    for column, low, high in (
        ("score", flt.score_min, flt.score_max),
        ("latency_ms", flt.latency_min, flt.latency_max),
        ("tokens", flt.tokens_min, flt.tokens_max),
    ):
        _range(clauses, params, column, low, high)
    if flt.search.strip():
        query = fts_query(flt.search)
        if query is None:
            clauses.append("0")
        else:
            clauses.append("id IN (SELECT rowid FROM search WHERE search MATCH ?)")
            params.append(query)
    return " AND ".join(clauses), params


def _range(
    clauses: list[str], params: list[Any], column: str, low: float | None, high: float | None
) -> None:
    if low is not None:
        clauses.append(f"{column} >= ?")
        params.append(low)
    if high is not None:
        clauses.append(f"{column} <= ?")
        params.append(high)
