"""What the viewer's JSON API returns, built from results, bundles and comparisons.

Pure functions from library values to JSON-compatible data: no I/O, no web framework.
Non-finite floats (an unknown interval) become `null`, since JSON has no NaN.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.debug._tables import bundle_tables
from weakincentives.errors import BundleError, ViewerError
from weakincentives.evals import EvalResult, OutcomeComparison, stats, summarize_costs

from ._viewer_types import STATUSES, ResultFilter, ResultRow, Status

if TYPE_CHECKING:
    from ._viewer_stats import ExperimentColumns

__all__ = [
    "MAX_FLIPS",
    "MAX_PAGE_SIZE",
    "PageRequest",
    "bundle_view",
    "comparison_view",
    "experiment_view",
    "json_safe",
    "parse_results_query",
    "row_view",
    "sample_io",
]

MAX_PAGE_SIZE = 500
"""Most rows one page of the results grid may ask for."""
MAX_FLIPS = 1000
"""Flipped samples listed per direction by `comparison_view` (all are counted)."""
_MAX_LOGS = 5000
_MAX_PREVIEW = 64 * 1024

_FLOATS = ("score_min", "score_max", "latency_min", "latency_max")
_INTS = ("tokens_min", "tokens_max")
_TEXTS = ("error_kind", "sample", "q")
_PAGING = ("sort", "desc", "offset", "limit")


json_safe = serde.json_safe


def _safe(data: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): json_safe(v) for k, v in data.items()}


# -- query parameters ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRequest:
    """Sorting and paging of one results request."""

    sort: str = "order"
    """Sort key (see `SORT_KEYS`)."""
    descending: bool = False
    """Sort from the highest value down."""
    offset: int = 0
    """Rows to skip."""
    limit: int = 50
    """Rows to return."""


def parse_results_query(items: Iterable[tuple[str, str]]) -> tuple[ResultFilter, PageRequest]:
    """Read the results grid's query string: filters, then sort and page.

    Parameters: `experiment` (repeatable), `status` (`passed`, `failed`, `error`,
    `not_passed`), `error_kind`, `sample` (id contains), `q` (full-text search),
    `meta.<key>=<value>`, `score_min/max`, `latency_min/max`, `tokens_min/max`, `sort`
    (see `SORT_KEYS`), `desc` (`1`), `offset`, `limit` (at most `MAX_PAGE_SIZE`).

    Raises:
        ViewerError: an unknown parameter or a value of the wrong type.
    """
    experiments: list[str] = []
    metadata: list[tuple[str, str]] = []
    single: dict[str, str] = {}
    for name, value in items:
        if name == "experiment":
            experiments.append(value)
        elif name.startswith("meta.") and len(name) > len("meta."):
            metadata.append((name.removeprefix("meta."), value))
        elif name in (*_FLOATS, *_INTS, *_TEXTS, *_PAGING, "status"):
            single[name] = value
        else:
            raise ViewerError(f"unknown query parameter {name!r}")
    status = single.get("status") or None
    if status is not None and status not in STATUSES:
        raise ViewerError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    numbers: dict[str, Any] = {k: _number(k, single.get(k), float) for k in _FLOATS}
    numbers.update({k: _number(k, single.get(k), int) for k in _INTS})
    flt = ResultFilter(
        experiments=tuple(e for e in experiments if e),
        status=_status(status),
        error_kind=single.get("error_kind") or None,
        metadata=tuple(metadata),
        sample=single.get("sample", ""),
        search=single.get("q", ""),
        **numbers,
    )
    limit = _number("limit", single.get("limit"), int)
    limit = 50 if limit is None else limit
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ViewerError(f"limit must be between 1 and {MAX_PAGE_SIZE}, not {limit}")
    offset = _number("offset", single.get("offset"), int)
    offset = 0 if offset is None else offset
    if offset < 0:
        raise ViewerError(f"offset must be >= 0, not {offset}")
    page = PageRequest(
        sort=single.get("sort") or "order",
        descending=single.get("desc", "") in {"1", "true"},
        offset=offset,
        limit=limit,
    )
    return flt, page


def _status(value: str | None) -> Status | None:
    for status in STATUSES:
        if status == value:
            return status
    return None


def _number(name: str, raw: str | None, kind: type[float] | type[int]) -> Any:
    if raw is None or raw.strip() == "":
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise ViewerError(f"{name} must be a number, not {raw!r}") from None
    if not math.isfinite(value):
        raise ViewerError(f"{name} must be finite, not {raw!r}")
    return value


# -- results and samples ------------------------------------------------------------------


def row_view(row: ResultRow) -> dict[str, Any]:
    """One row of the results grid as JSON data."""
    return _safe(serde.dump(row))


def sample_io(bundle: DebugBundle | None, result: EvalResult | None = None) -> dict[str, Any]:
    """The sample's input and expected answer: the result's, else the bundle request's."""
    if result is not None and (result.input is not None or result.expected is not None):
        return {"recorded": True, "input": result.input, "expected": result.expected}
    request = bundle.request if bundle is not None else None
    sample = request.get("sample") if isinstance(request, Mapping) else None
    if not isinstance(sample, Mapping):
        return {"recorded": False, "input": None, "expected": None}
    return {"recorded": True, "input": sample.get("input"), "expected": sample.get("expected")}


def bundle_view(bundle: DebugBundle) -> dict[str, Any]:
    """Everything a bundle holds, as JSON data: manifest, checks, files, logs, sessions.

    Raises:
        BundleError: a file of the bundle cannot be parsed.
    """
    try:
        bundle.verify()
        problem = None
    except BundleError as exc:
        problem = str(exc)
    logs = bundle.logs
    before, after = bundle.session_before, bundle.session_after
    return _safe(
        {
            "path": str(bundle.path),
            "manifest": serde.dump(bundle.manifest),
            "verified": problem is None,
            "verify_error": problem,
            "request": bundle.request,
            "response": bundle.response,
            "eval": bundle.eval,
            "error": bundle.error,
            "metrics": bundle.metrics,
            "logs": logs[:_MAX_LOGS],
            "logs_omitted": max(0, len(logs) - _MAX_LOGS),
            "session_before": before.slices if before is not None else None,
            "session_after": after.slices if after is not None else None,
            "tool_calls": bundle_tables(bundle)["tool_calls"],
            "files": [serde.dump(f) for f in bundle.manifest.files],
            "extra_files": [_preview(n, d) for n, d in bundle.extra_files().items()],
        }
    )


def _preview(name: str, data: bytes) -> dict[str, Any]:
    try:
        text: str | None = data[:_MAX_PREVIEW].decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"name": name, "size": len(data), "preview": text}


# -- statistics ---------------------------------------------------------------------------


def experiment_view(columns: ExperimentColumns) -> dict[str, Any]:
    """Counts, pass rate and mean score with intervals, latency and tokens of one experiment.

    The numbers are those of `weakincentives.evals.summarize` (errors count as not passed
    and score 0; intervals are clustered by sample when a sample repeats, i.e. epochs),
    computed by the same functions from the index's columns (`ExperimentColumns`), so
    that 100,000 results take milliseconds.
    """
    c = columns
    n = c.n
    passed = sum(c.passed)
    kinds = dict(c.errors_by_kind)
    errors = sum(kinds.values())
    # A result with no cost at all only counts: `summarize_costs` adds nothing of it to
    # its sums (its judge cost as 0.0, which leaves a sum of at least 0.0 as it is).
    summary = summarize_costs(c.costs)
    cost = dataclasses.replace(
        summary, n=summary.n + c.uncosted, unpriced=summary.unpriced + c.uncosted
    )
    view: dict[str, Any] = {
        "name": c.name, "n": n, "passed": passed, "errors": errors,
        "failed": n - passed - errors, "pass_rate": passed / n if n else 0.0,
        "errors_by_kind": kinds, "latency_ms": _percentiles(c.latency_ms),
        "tokens": {"input": c.input_tokens, "output": c.output_tokens},
        "cost": cost.to_dict(),
        **_intervals(c.passed, c.scores, c.clusters),
    }  # fmt: skip
    return _safe(view)


def _intervals(
    passes: Sequence[int], scores: Sequence[float], clusters: Sequence[Hashable] | None
) -> dict[str, Any]:
    # The numbers of `summarize` and the terminal report: the same function, the same
    # clustering (by sample when a sample repeats, i.e. epochs: `repeated_samples`).
    out = stats.summarize_outcomes(passes, scores, clusters=clusters)
    return {
        "pass_rate_ci": [out.pass_rate_low, out.pass_rate_high],
        "pass_rate_method": out.pass_rate_method,
        "mean_score": out.mean,
        "mean_score_ci": [out.mean_low, out.mean_high],
        "n_clusters": out.n_clusters,
        "interval_note": out.reason or None,
    }


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p95": None}
    import numpy as np  # on first use: `wink debug` imports it while the run is indexed

    array = np.asarray(values, dtype=float)
    return {
        "mean": float(array.mean()),
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
    }


def comparison_view(
    comparison: OutcomeComparison,
    *,
    baseline: Mapping[str, Any],
    treatment: Mapping[str, Any],
    baseline_ids: Sequence[int],
    treatment_ids: Sequence[int],
    rows: Callable[[Sequence[int], Sequence[int]], tuple[Mapping[int, ResultRow], ...]],
) -> dict[str, Any]:
    """A paired comparison as JSON data, flipped samples linked to their result ids.

    `baseline` and `treatment` say where each side comes from (run and experiment);
    `baseline_ids[i]` is the result id of the baseline's row `i` (likewise the treatment);
    `rows(baseline_ids, treatment_ids)` gives the index rows of the listed flips.
    """
    c = comparison
    test = c.mcnemar
    scores = c.score_paired
    shown = [list(itertools.islice(f, MAX_FLIPS)) for f in (c.regressions, c.improvements)]
    base_rows, treat_rows = rows(
        [baseline_ids[i] for flips in shown for i, _ in flips],
        [treatment_ids[j] for flips in shown for _, j in flips],
    )

    def side(info: Mapping[str, Any], rate: stats.RateEstimate) -> dict[str, Any]:
        return {**info, "n": rate.n, "passed": rate.successes, "pass_rate": rate.rate,
                "pass_rate_ci": [rate.low, rate.high], "pass_rate_method": rate.method,
                "n_clusters": rate.n_clusters}  # fmt: skip

    def flips(items: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
        listed = []
        for i, j in items:
            base = base_rows[baseline_ids[i]]
            listed.append({
                "sample_id": base.sample_id,
                "epoch": base.epoch,
                "baseline": _flip_side(base),
                "treatment": _flip_side(treat_rows[treatment_ids[j]]),
            })  # fmt: skip
        return listed

    return _safe(
        {
            "baseline": side(baseline, c.baseline),
            "treatment": side(treatment, c.treatment),
            "n_pairs": c.n_pairs,
            "pass_rate_delta": c.pass_rate_delta,
            "delta": c.delta,
            "delta_ci": [c.delta_ci.low, c.delta_ci.high],
            "bootstrap_ci": [c.bootstrap_ci.low, c.bootstrap_ci.high],
            "p_value": c.p_value,
            "test_name": c.test_name,
            "n_clusters": c.n_clusters,
            "interval_method": c.paired.interval_method if c.paired else None,
            "mcnemar": None if test is None else dataclasses.asdict(test),
            "minimum_detectable_effect": c.minimum_detectable_effect,
            "unknown": {
                name: why
                for name in ("interval", "p_value", "bootstrap", "minimum_detectable_effect")
                if (why := c.why(name))
            },
            "score_delta": scores.delta if scores else None,
            "score_delta_ci": [scores.low, scores.high] if scores else [None, None],
            "score_p_value": scores.p_value if scores else None,
            "score_test_name": scores.test_name if scores else None,
            "regressions": flips(shown[0]),
            "improvements": flips(shown[1]),
            "regressions_count": len(c.regressions),
            "improvements_count": len(c.improvements),
            "unpaired_baseline": len(c.unpaired_baseline),
            "unpaired_treatment": len(c.unpaired_treatment),
            "duplicates": c.duplicates,
        }
    )


def _flip_side(row: ResultRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "status": row.status,
        "score": row.score,
        "reason": row.reason,
        "error_kind": row.error_kind,
        "error": row.error,
    }
