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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.errors import BundleError, ViewerError
from weakincentives.evals import (
    RESULTS_FILE,
    EvalReport,
    OutcomeComparison,
    compare_outcomes,
    paired_cost_delta,
)

from ._diff import pair_diff
from ._viewer_cache import open_run_index
from ._viewer_charts import (
    comparison_charts,
    slice_comparisons,
)
from ._viewer_index import ResultIndex
from ._viewer_memo import Memo
from ._viewer_page import NotFoundError, RunPages
from ._viewer_types import IndexedRun, ResultRow
from ._viewer_views import (
    bundle_view,
    comparison_view,
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


@dataclass(frozen=True, slots=True)
class SideSpec:
    """One side of an A/B comparison: an experiment of a run."""

    run_id: str
    """The run."""
    experiment: str
    """The experiment within the run."""


class ViewerData(RunPages):
    """The viewer's data: an index of runs, or one bundle. Build with `ViewerData.open`."""

    def __init__(
        self, target: Path, *, index: ResultIndex | None = None, bundle: DebugBundle | None = None
    ) -> None:
        super().__init__(index if index is not None else ResultIndex(), bundle=bundle)
        self._target = target
        self._comparisons = Memo()
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
                early: list[ViewerData] = []

                def loaded(index: ResultIndex, run: IndexedRun) -> None:
                    early.append(cls(path, index=index))
                    early[0].prework(run)

                index = open_run_index(runs[0], cache=cache, loaded=loaded)
                return early[0] if early else cls(path, index=index)
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
        self._served("results")
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
        from ._html_report import render_html_report

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
