"""The SQL tables a `wink query` on a bundle exposes, as rows of plain values.

Every table exists for every bundle (empty when the bundle lacks the file), every row
has every column of its table, and every value is a SQLite-ready scalar (str, int,
float, bool or None); nested JSON is stored as JSON text, so `json_extract` reaches
into it:

| table | one row per | columns |
| --- | --- | --- |
| `manifest` | bundle | ids, status, error, timings, log counts |
| `files` | file in the manifest | `name`, `size`, `sha256` |
| `logs` | log record | `seq`, `time`, `level`, `logger`, `message`, `thread`, `exception` |
| `eval` | bundle (evals only) | `sample_id`, `experiment`, `score`, `passed`, `reason`, ... |
| `metrics` | metric, flattened to dotted names | `name`, `value` |
| `request`, `response` | bundle | `json` |
| `session_before`, `session_after` | slice value | `slice_type`, `slice_name`, `seq`, `json` |
| `tool_calls` | `ToolInvoked` in the after-snapshot | `seq`, `name`, `success`, ... |

Examples:
    `SELECT level, message FROM logs WHERE level = 'ERROR'`, or
    `SELECT json_extract(json, '$.sample.id') FROM request`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.runtime.session import SessionSnapshot, ToolInvoked

__all__ = ["BUNDLE_TABLE_COLUMNS", "bundle_tables"]

BUNDLE_TABLE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "manifest": (
        "bundle_id", "format_version", "kind", "created_at", "request_id", "sample_id",
        "experiment", "session_id", "run_id", "status", "error_kind", "error_type",
        "error_message", "started_at", "finished_at", "duration_ms", "log_records",
        "logs_dropped", "capture_errors",
    ),
    "files": ("name", "size", "sha256"),
    "logs": ("seq", "time", "level", "logger", "message", "thread", "exception"),
    "eval": (
        "sample_id", "experiment", "score", "passed", "reason", "latency_ms", "error",
        "error_kind", "json",
    ),
    "metrics": ("name", "value"),
    "request": ("json",),
    "response": ("json",),
    "session_before": ("slice_type", "slice_name", "seq", "json"),
    "session_after": ("slice_type", "slice_name", "seq", "json"),
    "tool_calls": (
        "seq", "name", "call_id", "success", "duration_ms", "error", "params", "message",
    ),
}  # fmt: skip
"""Table name -> column names, in order (create the tables from this even when empty)."""

_TOOL_INVOKED = f"{ToolInvoked.__module__}:{ToolInvoked.__qualname__}"


def bundle_tables(bundle: DebugBundle) -> dict[str, list[dict[str, Any]]]:
    """Return the rows of every table in `BUNDLE_TABLE_COLUMNS` for `bundle`.

    Raises:
        BundleError: when a file of the bundle cannot be parsed.
    """
    after = bundle.session_after
    tables = {
        "manifest": [_manifest_row(bundle)],
        "files": [serde.dump(f) for f in bundle.manifest.files],
        "logs": [_log_row(i, r) for i, r in enumerate(bundle.logs)],
        "eval": _eval_rows(bundle.eval),
        "metrics": [{"name": k, "value": v} for k, v in _flatten(bundle.metrics or {})],
        "request": _json_rows(bundle.request),
        "response": _json_rows(bundle.response),
        "session_before": _slice_rows(bundle.session_before),
        "session_after": _slice_rows(after),
        "tool_calls": _tool_rows(after),
    }
    return {
        name: [{c: _scalar(row.get(c)) for c in BUNDLE_TABLE_COLUMNS[name]} for row in rows]
        for name, rows in tables.items()
    }


def _manifest_row(bundle: DebugBundle) -> dict[str, Any]:
    m = bundle.manifest
    return {
        "bundle_id": m.bundle_id,
        "format_version": m.format_version,
        "kind": m.kind,
        "created_at": m.created_at.isoformat(),
        **serde.dump(m.ids),
        "status": m.status,
        "error_kind": m.error.kind if m.error else None,
        "error_type": m.error.type if m.error else None,
        "error_message": m.error.message if m.error else None,
        "started_at": m.timings.started_at.isoformat(),
        "finished_at": m.timings.finished_at.isoformat(),
        "duration_ms": m.timings.duration_ms,
        "log_records": m.log_records,
        "logs_dropped": m.logs_dropped,
        "capture_errors": list(m.capture_errors),
    }


def _log_row(seq: int, record: Mapping[str, Any]) -> dict[str, Any]:
    return {"seq": seq, **record}


def _eval_rows(data: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if data is None:
        return []
    score = data.get("score")
    score = score if isinstance(score, Mapping) else {}
    return [
        {
            **data,
            "experiment": data.get("experiment_name", data.get("experiment")),
            "score": score.get("value"),
            "passed": score.get("passed"),
            "reason": score.get("reason"),
            "json": data,
        },
    ]


def _json_rows(value: Any) -> list[dict[str, Any]]:
    return [] if value is None else [{"json": value}]


def _slice_rows(snapshot: SessionSnapshot | None) -> list[dict[str, Any]]:
    if snapshot is None:
        return []
    return [
        {"slice_type": key, "slice_name": key.rpartition(":")[2], "seq": i, "json": value}
        for key, values in snapshot.slices.items()
        for i, value in enumerate(values)
    ]


def _tool_rows(snapshot: SessionSnapshot | None) -> list[dict[str, Any]]:
    if snapshot is None:
        return []
    rows = []
    for i, call in enumerate(snapshot.slices.get(_TOOL_INVOKED, [])):
        if not isinstance(call, Mapping):
            continue
        result = call.get("result")
        message = result.get("message") if isinstance(result, Mapping) else None
        rows.append({**call, "seq": i, "message": message})
    return rows


def _flatten(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            items.extend(_flatten(value, f"{name}."))
        else:
            items.append((name, value))
    return items


def _scalar(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False)
