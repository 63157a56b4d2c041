"""What a run's page shows: its head, statistics and charts, made once, and ahead of time.

`RunPages` is the part of `ViewerData` behind `/api/runs`, `/api/runs/<run>` and
`/api/runs/<run>/charts`. Each value is made once per run (the index does not change)
and kept in a `Memo`; two requests that need one value share it.

A single run's landing page is made before the browser asks for it. `prework` starts
as soon as the run is read: the statistics of the columns gathered while the run was
read (`_viewer_columns.py`), the histograms and the manifest's head need no SQL. `warm`
starts once the index is finished: the facets, then the SQL charts, one thread for the
charts of the whole run and one for the per-slice chart, beside the rest of the page.
The SQL charts are answered from the rows in memory while SQLite loads the run
(`ResultIndex.in_memory`, `_viewer_early.py`), else on copies of the index
(`ResultIndex.reader`), so that SQLite runs beside the interpreter.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from weakincentives import serde
from weakincentives.debug._bundle import DebugBundle
from weakincentives.errors import RunStoreError, ViewerError
from weakincentives.evals import RunStore

from ._provenance import provenance_rows
from ._svg import BarChart
from ._viewer_charts import (
    MAX_SLICE_VALUES,
    Chart,
    IndexCharts,
    Queryable,
    distribution_charts,
    run_charts,
    slice_chart,
    slice_keys,
    whole_run_charts,
)
from ._viewer_columns import ExperimentColumns
from ._viewer_index import ResultIndex
from ._viewer_memo import Memo
from ._viewer_reading import IndexReader
from ._viewer_stats import experiment_columns
from ._viewer_types import Facets, IndexedRun
from ._viewer_views import experiment_view, json_safe

__all__ = ["NotFoundError", "RunPages"]

_log = logging.getLogger(__name__)
_FIRST_PAGE = frozenset({"charts", "results"})
"""The requests of a run's page after which the index's background work starts."""


class NotFoundError(ViewerError, LookupError):
    """The run, result or page asked for does not exist (the viewer answers 404)."""


class RunPages:
    """The runs' pages of `ViewerData` (see the module docstring)."""

    def __init__(self, index: ResultIndex, *, bundle: DebugBundle | None = None) -> None:
        self._index = index
        self._bundle = bundle
        self._summaries = Memo()
        self._charts = Memo()
        self._first_page: set[str] = set()

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
        return {
            "run_id": run.run_id,
            "path": str(run.path),
            "results": run.results,
            "passed": counts["passed"],
            "failed": counts["failed"],
            "errors": counts["errors"],
            "experiment_names": list(counts["experiment_names"]),
            "pass_rates": [dict(rate) for rate in counts["pass_rates"]],
            **self._manifest(run),
        }

    def _manifest(self, run: IndexedRun) -> dict[str, Any]:
        """What a run's head shows of its manifest, read again on each call.

        A run still being written changes its status: the runs list and the run page
        show the current one. (The first read is the slow one, pydantic building its
        validator: `prework` makes it before the page asks.)
        """
        head: dict[str, Any] = {
            "status": None, "created_at": None, "expected": None, "provenance": [],
        }  # fmt: skip
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
            gathered = self._index.gathered(run_id)
            if gathered is not None:  # in order of first appearance, as the facets say
                return list(gathered.columns.values())
            names = self._counts(run_id)["experiment_names"]
            return [experiment_columns(self._index, run_id, name) for name in names]

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
        self._served("charts")
        return charts

    def _served(self, part: str) -> None:
        """A part of the run page was served (`charts` or `results`, its first rows).

        The index's background work (`ResultIndex.start_background`) starts once both
        were: before, it would slow down whichever comes last.
        """
        self._first_page.add(part)
        if self._first_page >= _FIRST_PAGE:
            self._index.start_background()

    def _run_charts(self, run_id: str, slice_key: str | None) -> dict[str, Any]:
        key, keys = self._slice_key(run_id, slice_key)

        def make() -> dict[str, Any]:
            experiments = self._summaries.get(run_id, lambda: self._summarize(run_id))
            made = self._index_charts(run_id, key)
            charts: dict[str, Any] = json_safe(
                run_charts(made, experiments, self._distributions(run_id), slice_key=key)
            )
            return charts

        return {**self._charts.get((run_id, key), make), "slice_keys": keys}

    def _distributions(self, run_id: str) -> list[Chart]:
        return self._summaries.get(
            ("distributions", run_id), lambda: distribution_charts(self._columns(run_id))
        )

    def _index_charts(self, run_id: str, key: str | None) -> IndexCharts:
        """The run's SQL charts (`index_charts`), with the per-slice chart of `key`."""
        made = self._whole_run_charts(run_id)
        return made if key is None else dataclasses.replace(made, slice=self._slice(run_id, key))

    def _whole_run_charts(self, run_id: str, index: Queryable | None = None) -> IndexCharts:
        """`whole_run_charts` of the run, made once (on `index`; default: the index)."""
        return self._charts.get(
            ("whole", run_id),
            lambda: whole_run_charts(
                index or self._index, run_id, gathered=self._index.gathered(run_id)
            ),
        )

    def _slice(self, run_id: str, key: str, index: Queryable | None = None) -> BarChart:
        """`slice_chart` of the run for `key`, made once (on `index`; default: the index)."""
        return self._charts.get(
            ("slice", run_id, key), lambda: slice_chart(index or self._index, run_id, key)
        )

    def prework(self, run: IndexedRun) -> threading.Thread | None:
        """Start making what `run`'s page shows that needs no SQL, on a background thread.

        `ViewerData.prepare` calls this once the run is read, before the index is
        finished: the statistics from the columns gathered while the run was read, the
        histograms and the whole run's SQL charts (from memory, or on a copy of the
        index) are made meanwhile, and the manifest is read once (its first read builds
        pydantic's validator), so the page finds them made. Nothing is done (None) when
        nothing was gathered.
        """
        if self._index.gathered(run.run_id) is None:
            return None

        # The whole run's SQL charts need no index but the rows': meanwhile.
        self._on_copy(run.run_id, lambda reader: self._whole_run_charts(run.run_id, reader))

        def make() -> None:
            try:
                self._summaries.get(run.run_id, lambda: self._summarize(run.run_id))
                self._distributions(run.run_id)
                self._manifest(run)  # read again by the page: a status may change
            except Exception:  # the page's own request makes it again, and reports it
                _log.debug("preparing the page of %s failed", run.run_id, exc_info=True)

        thread = threading.Thread(target=make, name="wink-debug-prework", daemon=True)
        thread.start()
        return thread

    def warm(self) -> threading.Thread | None:
        """Make a single run's landing page (statistics, charts) on a background thread.

        `wink debug RUN` calls this before it serves, so the page is made while the
        server starts and the browser loads; its requests find it made (or wait for it).
        The SQL charts, the whole run's and the per-slice chart, are made on threads of
        their own (`_on_copy`), beside the rest of the page (the statistics are usually
        made already: `prework`). Nothing is done for several runs or a bundle. Returns
        the thread.
        """
        runs = self._index.runs()
        if self._bundle is not None or len(runs) != 1:
            return None
        run_id = runs[0].run_id

        def make() -> None:
            try:
                if not self._charts.has(("whole", run_id)):  # `prework` may have started it
                    self._on_copy(run_id, lambda reader: self._whole_run_charts(run_id, reader))
                key = self._slice_key(run_id, None)[0]
                if key is not None:
                    self._on_copy(run_id, lambda reader: self._slice(run_id, key, reader))
                self.run(run_id)
                self._run_charts(run_id, None)
            except Exception:  # the page's own request reports it
                _log.debug("warming the run page of %s failed", run_id, exc_info=True)

        thread = threading.Thread(target=make, name="wink-debug-warm", daemon=True)
        thread.start()
        return thread

    def _on_copy(self, run_id: str, make: Callable[[IndexReader | None], object]) -> None:
        """Run `make` on a copy of the index (`ResultIndex.reader`), on a thread of its own.

        While the run is answered from memory (`ResultIndex.in_memory`), on the index
        itself (`make(None)`): SQLite is busy loading it, and memory needs no copy.
        """
        reader = None if self._index.in_memory(run_id) else self._index.reader()

        def run() -> None:
            try:
                make(reader)
            except Exception:  # made again, and reported, by the page's own request
                _log.debug("charting %s on a copy failed", run_id, exc_info=True)
            finally:
                if reader is not None:
                    reader.close()

        threading.Thread(target=run, name="wink-debug-charts", daemon=True).start()

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

    def _provenance(self, run_id: str) -> list[Any]:
        """The run's provenance rows (what its run page shows), read once per run."""
        rows: list[Any] = self._summaries.get(
            ("provenance", run_id), lambda: self._manifest(self._run(run_id))["provenance"]
        )
        return rows
