"""What `wink debug TARGET` shows: run directories (indexed at startup) or one bundle.

`ViewerData.open(target)` accepts

- a run directory (`run.json` and/or `results.jsonl`), or its `results.jsonl`,
- a directory of run directories (e.g. `runs/`), every run in it,
- a debug bundle (`.zip`), shown on its own.

Everything here only reads: run files through the index, bundles through
`DebugBundle.open` (members are read into memory and checked, never extracted).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.errors import BundleError, RunStoreError, ViewerError
from weakincentives.evals import (
    RESULTS_FILE,
    EvalReport,
    OutcomeComparison,
    RunStore,
    compare_outcomes,
    paired_cost_delta,
)

from ._diff import pair_diff
from ._html_report import render_html_report
from ._provenance import provenance_rows
from ._viewer_cache import open_run_index
from ._viewer_charts import (
    MAX_SLICE_VALUES,
    IndexCharts,
    Queryable,
    comparison_charts,
    index_charts,
    run_charts,
    slice_comparisons,
    slice_keys,
)
from ._viewer_index import IndexReader, ResultIndex
from ._viewer_memo import Memo
from ._viewer_stats import ExperimentColumns, experiment_columns
from ._viewer_types import Facets, IndexedRun, ResultRow
from ._viewer_views import (
    bundle_view,
    comparison_view,
    experiment_view,
    json_safe,
    parse_results_query,
    row_view,
    sample_io,
)

__all__ = ["NotFoundError", "SideSpec", "ViewerData"]

_SQLITE_INT_LIMIT = 2**63
"""Result ids are SQLite rowids: 64-bit signed integers (a larger one matches no result)."""

_log = logging.getLogger(__name__)
TargetKind = Literal["runs", "bundle"]


class NotFoundError(ViewerError, LookupError):
    """The run, result or page asked for does not exist (the viewer answers 404)."""


@dataclass(frozen=True, slots=True)
class SideSpec:
    """One side of an A/B comparison: an experiment of a run."""

    run_id: str
    """The run."""
    experiment: str
    """The experiment within the run."""


class ViewerData:
    """The viewer's data: an index of runs, or one bundle. Build with `ViewerData.open`."""

    def __init__(
        self, target: Path, *, index: ResultIndex | None = None, bundle: DebugBundle | None = None
    ) -> None:
        self._target = target
        self._index = index if index is not None else ResultIndex()
        self._bundle = bundle
        self._summaries = Memo()
        self._comparisons = Memo()
        self._charts = Memo()
        self._bundles = Memo(8)

    @classmethod
    def open(cls, target: str | Path, *, cache: bool = True) -> ViewerData:
        """Read `target` (see the module docstring) and index its runs.

        With `cache`, a single run's index is read from, and saved to, its cache file
        (`.viewer-cache.sqlite` in the run directory; see `_viewer_cache.py`).

        Raises:
            ViewerError: `target` is none of the accepted kinds, or cannot be read.
        """
        return cls.prepare(target, cache=cache)[1]()

    @classmethod
    def prepare(
        cls, target: str | Path, *, cache: bool = True
    ) -> tuple[dict[str, Any], Callable[[], ViewerData]]:
        """Check `target` and say what it holds, leaving the slow part for later.

        Returns `(info, build)`: `info` is what the built data's `info()` gives, and
        `build()` reads and indexes the runs (what `open` does after the checks).
        `wink debug` serves its page while `build` runs (`ViewerServer`).

        Raises:
            ViewerError: `target` is none of the accepted kinds (`build` raises it when
                a run cannot be read).
        """
        path = Path(target)
        if path.name == RESULTS_FILE:
            path = path.parent
        if path.is_file():
            try:
                data = cls(path, bundle=DebugBundle.open(path))
            except BundleError as exc:
                raise ViewerError(f"cannot show {path} as a debug bundle: {exc}") from exc
            return data.info(), lambda: data
        if not path.is_dir():
            raise ViewerError(f"{path}: no such file or directory")
        runs = _run_dirs(path)
        if not runs:
            raise ViewerError(
                f"{path} is not a run directory (no results.jsonl) and holds no runs; pass a "
                "run directory, a directory of runs (e.g. runs/) or a debug bundle (.zip)"
            )

        def build() -> ViewerData:
            if len(runs) == 1:
                return cls(path, index=open_run_index(runs[0], cache=cache))
            index = ResultIndex()
            for run_dir in runs:
                index.add_run(run_dir)
            # The rest of the index (sort indexes, text) waits for the first page: see
            # `charts`.
            index.finish(defer=True)
            return cls(path, index=index)

        # A run's id is its directory's name (`ResultIndex.add_run`).
        return {"target": str(path), "kind": "runs", "runs": [r.name for r in runs]}, build

    @property
    def kind(self) -> TargetKind:
        """`bundle` for one bundle, else `runs`."""
        return "bundle" if self._bundle is not None else "runs"

    @property
    def index(self) -> ResultIndex:
        """The index of the runs (empty for a bundle)."""
        return self._index

    def info(self) -> dict[str, Any]:
        """What the viewer shows: target path and kind, run ids."""
        return {
            "target": str(self._target),
            "kind": self.kind,
            "runs": [run.run_id for run in self._index.runs()],
        }

    # -- runs --------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        """Every run: id, status, dates and result counts per status."""
        return [self._run_head(run) for run in self._index.runs()]

    def run(self, run_id: str) -> dict[str, Any]:
        """One run: head, per-experiment statistics, and the values the filters take."""
        run = self._run(run_id)
        facets = self._facets(run_id)
        return {
            **self._run_head(run),
            "experiments": self._summaries.get(run_id, lambda: self._summarize(run_id)),
            "facets": json_safe(serde.dump(facets)),
            "slice_keys": slice_keys(facets.metadata),
            "skipped": list(run.skipped),
            "skipped_count": run.skipped_count,
        }

    def _run(self, run_id: str) -> IndexedRun:
        run = self._index.run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} here")
        return run

    def _counts(self, run_id: str) -> dict[str, Any]:
        """A run's counts by status and by experiment.

        Computed once per run (the index does not change once open): each is a scan of
        the run's rows, and the run page asks for them on every page of its grid.
        """

        def make() -> dict[str, Any]:
            facets = self._facets(run_id)
            statuses = facets.statuses
            return {
                "passed": statuses.get("passed", 0),
                "failed": statuses.get("failed", 0),
                "errors": statuses.get("error", 0),
                "experiment_names": list(facets.experiments),
                # Per experiment, never pooled: a run's experiments answer different questions.
                "pass_rates": [
                    {"experiment": name, "n": n, "passed": passed, "pass_rate": passed / n}
                    for name, (n, passed) in self._index.experiment_passes(run_id).items()
                ],
            }

        return self._summaries.get(("counts", run_id), make)

    def _run_head(self, run: IndexedRun) -> dict[str, Any]:
        counts = self._counts(run.run_id)
        head: dict[str, Any] = {
            "run_id": run.run_id,
            "path": str(run.path),
            "results": run.results,
            "passed": counts["passed"],
            "failed": counts["failed"],
            "errors": counts["errors"],
            "experiment_names": list(counts["experiment_names"]),
            "pass_rates": [dict(rate) for rate in counts["pass_rates"]],
            "status": None,
            "created_at": None,
            "expected": None,
            "provenance": [],
        }
        try:
            handle = RunStore(run.path.parent).open(run.path)
            head["status"] = handle.status
        except RunStoreError:
            return head  # results without a manifest: still worth showing
        manifest = handle.manifest
        head["created_at"] = manifest.created_at.isoformat()
        head["expected"] = manifest.counts.expected
        head["provenance"] = provenance_rows(json_safe(serde.dump(manifest)))
        return head

    def _columns(self, run_id: str) -> list[ExperimentColumns]:
        """Each experiment's columns: what its statistics and histograms are made of."""

        def make() -> list[ExperimentColumns]:
            names = self._counts(run_id)["experiment_names"]
            gathered = self._index.gathered(run_id)
            made = gathered.columns if gathered is not None else {}
            return [
                made.get(name) or experiment_columns(self._index, run_id, name) for name in names
            ]

        return self._summaries.get(("columns", run_id), make)

    def _summarize(self, run_id: str) -> list[dict[str, Any]]:
        return [experiment_view(columns) for columns in self._columns(run_id)]

    def charts(self, run_id: str, slice_key: str | None = None) -> dict[str, Any]:
        """The run page's charts and failure groups.

        `slice_key` picks the metadata key of the per-slice chart; None picks the first
        one worth slicing on (2-20 values), "" none.

        Raises:
            NotFoundError: no such run.
            ViewerError: no result has metadata key `slice_key`.
        """
        charts = self._run_charts(run_id, slice_key)
        # The run page's charts come last: the index's background work starts after them.
        self._index.start_background()
        return charts

    def _run_charts(self, run_id: str, slice_key: str | None) -> dict[str, Any]:
        key, keys = self._slice_key(run_id, slice_key)

        def make() -> dict[str, Any]:
            experiments = self._summaries.get(run_id, lambda: self._summarize(run_id))
            made = self._index_charts(run_id, key, self._index)
            charts: dict[str, Any] = json_safe(
                run_charts(made, experiments, self._columns(run_id), slice_key=key)
            )
            return charts

        return {**self._charts.get((run_id, key), make), "slice_keys": keys}

    def _index_charts(self, run_id: str, key: str | None, index: Queryable) -> IndexCharts:
        return self._charts.get(
            ("index", run_id, key),
            lambda: index_charts(
                index, run_id, slice_key=key, gathered=self._index.gathered(run_id)
            ),
        )

    def warm(self) -> threading.Thread | None:
        """Make a single run's landing page (statistics, charts) on a background thread.

        `wink debug RUN` calls this before it serves, so the page is made while the
        server starts and the browser loads; its requests find it made (or wait for it).
        The SQL charts are made on a copy of the index (`ResultIndex.reader`) beside the
        statistics. Nothing is done for several runs or a bundle. Returns the thread.
        """
        runs = self._index.runs()
        if self._bundle is not None or len(runs) != 1:
            return None
        run_id = runs[0].run_id

        def charts(reader: IndexReader, key: str | None) -> None:
            try:
                self._index_charts(run_id, key, reader)
            except Exception:  # made again, and reported, by the page's own request
                _log.debug("charting %s on a copy failed", run_id, exc_info=True)
            finally:
                reader.close()

        def make() -> None:
            try:
                key = self._slice_key(run_id, None)[0]
                reader = self._index.reader()
                threading.Thread(target=charts, args=(reader, key), daemon=True).start()
                self.run(run_id)
                self._run_charts(run_id, None)
            except Exception:  # the page's own request reports it
                _log.debug("warming the run page of %s failed", run_id, exc_info=True)

        thread = threading.Thread(target=make, name="wink-debug-warm", daemon=True)
        thread.start()
        return thread

    def _facets(self, run_id: str) -> Facets:
        self._run(run_id)
        # The index does not change: its facets are computed once per run.
        return self._summaries.get(("facets", run_id), lambda: self._index.facets(run_id))

    def _slice_key(self, run_id: str, asked: str | None) -> tuple[str | None, list[str]]:
        """The slice key to chart (None: none) and the keys worth slicing on."""
        metadata = self._facets(run_id).metadata
        keys = slice_keys(metadata)
        if asked is None:
            suggested = [k for k in keys if 2 <= len(metadata[k]) <= MAX_SLICE_VALUES]
            return (suggested[0] if suggested else None), keys
        if asked and asked not in metadata:
            known = ", ".join(metadata) or "none (no metadata)"
            raise ViewerError(
                f"no result of run {run_id!r} has metadata key {asked!r}; keys: {known}"
            )
        return asked or None, keys

    def results(self, run_id: str, query: Iterable[tuple[str, str]]) -> dict[str, Any]:
        """One page of the results grid (see `parse_results_query` for the parameters).

        Raises:
            NotFoundError: no such run.
            ViewerError: a bad parameter.
        """
        self._run(run_id)
        flt, page = parse_results_query(query)
        found = self._index.page(
            run_id, flt, sort=page.sort, descending=page.descending,
            offset=page.offset, limit=page.limit,
        )  # fmt: skip
        return {
            "total": found.total,
            "offset": found.offset,
            "limit": found.limit,
            "rows": [row_view(row) for row in found.rows],
        }

    def result(self, run_id: str, result_id: int) -> dict[str, Any]:
        """One result in full, with its bundle when it has one.

        Raises:
            NotFoundError: no such run or result.
        """
        self._run(run_id)
        self._index.start_background()  # a first page other than a run's (see `charts`)
        if not 0 <= result_id < _SQLITE_INT_LIMIT:  # ids are SQLite rowids
            raise NotFoundError(f"run {run_id!r} has no result {result_id}")
        row = self._index.get(run_id, result_id)
        result = self._index.read(run_id, result_id)
        if row is None or result is None:
            raise NotFoundError(f"run {run_id!r} has no result {result_id}")
        bundle, problem = self._open_bundle(result.bundle_path, self._run(run_id).path)
        view = None
        if bundle is not None:
            try:
                view = bundle_view(bundle)
            except BundleError as exc:
                problem = str(exc)
        return {
            "row": row_view(row),
            "result": json_safe(serde.dump(result)),
            "sample": sample_io(bundle, result),
            "bundle": view,
            "bundle_error": problem,
            "siblings": [row_view(r) for r in self._index.siblings(run_id, row.sample_id)],
            "provenance": self._provenance(run_id),
        }

    def _provenance(self, run_id: str) -> list[Any]:
        """The run's provenance rows (what its run page shows), read once per run."""
        return self._summaries.get(
            ("provenance", run_id), lambda: self._run_head(self._run(run_id))["provenance"]
        )

    def _open_bundle(self, path: Path | None, run_dir: Path) -> tuple[DebugBundle | None, Any]:
        if path is None:
            return None, None
        found = _find_bundle(path, run_dir)
        if found is None:
            return None, f"bundle {path} not found (looked in the working directory and the run's)"
        try:
            return self._bundles.get(found, lambda: DebugBundle.open(found)), None
        except BundleError as exc:
            return None, str(exc)

    # -- comparisons and reports ----------------------------------------------------------

    def compare(self, baseline: SideSpec, treatment: SideSpec) -> dict[str, Any]:
        """Paired comparison of two experiments, of one run or of two runs.

        Raises:
            NotFoundError: a run or experiment does not exist.
            ViewerError: both sides are the same.
        """
        return self._compared(baseline, treatment)[0]

    def _compared(
        self, baseline: SideSpec, treatment: SideSpec
    ) -> tuple[dict[str, Any], OutcomeComparison]:
        if baseline == treatment:
            raise ViewerError("pick two different experiments (or runs) to compare")
        self._index.start_background()  # a first page other than a run's (see `charts`)
        return self._comparisons.get(
            (baseline, treatment), lambda: self._compare(baseline, treatment)
        )

    def compare_charts(
        self, baseline: SideSpec, treatment: SideSpec, *, slice_key: str | None = None
    ) -> dict[str, Any]:
        """The charts of a comparison: paired delta, discordant pairs, per-slice deltas.

        `slice_key` picks the metadata key of the per-slice deltas (None: the first one
        of the baseline's run worth slicing on; "": none).

        Raises:
            NotFoundError: a run or experiment does not exist.
            ViewerError: both sides are the same, or no result has `slice_key`.
        """
        comparison = self._compared(baseline, treatment)[1]
        key, keys = self._slice_key(baseline.run_id, slice_key)
        charts = self._charts.get(
            ("compare", baseline, treatment, key),
            lambda: self._compare_charts(baseline, treatment, comparison, key),
        )
        return {"charts": charts, "slice": key, "slice_keys": keys}

    def _compare_charts(
        self,
        baseline: SideSpec,
        treatment: SideSpec,
        comparison: OutcomeComparison,
        key: str | None,
    ) -> list[dict[str, Any]]:
        names = (comparison.baseline_name, comparison.treatment_name)
        slices = []
        if key is not None:
            slices = slice_comparisons(
                self._index, (baseline.run_id, baseline.experiment),
                (treatment.run_id, treatment.experiment), key, names,
            )  # fmt: skip
        charts: list[dict[str, Any]] = json_safe(comparison_charts(comparison, slices, key=key))
        return charts

    def pair(self, baseline: tuple[str, int], treatment: tuple[str, int]) -> dict[str, Any]:
        """Two results side by side (a flipped sample): both in full, and their diffs.

        Raises:
            NotFoundError: a run or result does not exist.
        """
        sides = [self.result(run_id, result_id) for run_id, result_id in (baseline, treatment)]
        results = [self._index.read(run_id, rid) for run_id, rid in (baseline, treatment)]
        assert results[0] is not None and results[1] is not None  # result() found both
        return {
            "baseline": {"run_id": baseline[0], **sides[0]},
            "treatment": {"run_id": treatment[0], **sides[1]},
            "diff": pair_diff(results[0], results[1]),
        }

    def _compare(
        self, baseline: SideSpec, treatment: SideSpec
    ) -> tuple[dict[str, Any], OutcomeComparison]:
        sides = []
        for spec in (baseline, treatment):
            self._run(spec.run_id)
            if spec.experiment not in self._index.experiments(spec.run_id):
                raise NotFoundError(f"run {spec.run_id!r} has no experiment {spec.experiment!r}")
            sides.append(self._index.outcomes(spec.run_id, spec.experiment))
        same_run = baseline.run_id == treatment.run_id
        label = (lambda s: s.experiment) if same_run else (lambda s: f"{s.run_id}/{s.experiment}")
        # Columns, not `EvalResult`s: 100,000 results compare in about half a second.
        comparison = compare_outcomes(
            sides[0][0], sides[1][0], baseline_name=label(baseline), treatment_name=label(treatment)
        )

        def rows(
            base_ids: Sequence[int], treat_ids: Sequence[int]
        ) -> tuple[Mapping[int, ResultRow], ...]:
            return (
                self._index.rows(baseline.run_id, base_ids),
                self._index.rows(treatment.run_id, treat_ids),
            )

        view = comparison_view(
            comparison,
            baseline={"run_id": baseline.run_id, "experiment": baseline.experiment},
            treatment={"run_id": treatment.run_id, "experiment": treatment.experiment},
            baseline_ids=sides[0][1],
            treatment_ids=sides[1][1],
            rows=rows,
        )
        delta = paired_cost_delta(
            self._index.cost_rows(baseline.run_id, baseline.experiment),
            self._index.cost_rows(treatment.run_id, treatment.experiment),
        )
        view["cost_delta"] = None if delta is None else serde.json_safe(delta.to_dict())
        return view, comparison

    def html_report(
        self, run_id: str, *, baseline: str | None = None, slice_key: str | None = None
    ) -> str:
        """The self-contained HTML report of one run (rendered in memory, never written).

        Raises:
            NotFoundError: no such run.
        """
        run = self._run(run_id)
        report = EvalReport.load(run.path, slim=True)  # the report reads no transcript
        return render_html_report(report, baseline=baseline or None, slice_key=slice_key or None)

    # -- one bundle ------------------------------------------------------------------------

    def bundle(self) -> dict[str, Any]:
        """The bundle given as the target.

        Raises:
            NotFoundError: the target is not a bundle.
            ViewerError: the bundle cannot be parsed.
        """
        if self._bundle is None:
            raise NotFoundError("the viewer was started on runs, not on a bundle")
        try:
            view = bundle_view(self._bundle)
        except BundleError as exc:
            raise ViewerError(str(exc)) from exc
        return {"bundle": view, "sample": sample_io(self._bundle)}


def _run_dirs(path: Path) -> list[Path]:
    if (path / RESULTS_FILE).is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / RESULTS_FILE).is_file())


def _find_bundle(path: Path, run_dir: Path) -> Path | None:
    """Where a result's bundle is: as written, else relative to the run or its parents.

    Runs record bundle paths as the writing process saw them, often relative to its
    working directory (`eval_bundles/<request>/<time>.zip`).
    """
    candidates = [path] if path.is_absolute() else [
        path, run_dir / path, run_dir.parent / path, run_dir.parent.parent / path,
    ]  # fmt: skip
    for candidate in candidates:
        if candidate.suffix == ".zip" and candidate.is_file():
            return candidate
    return None
