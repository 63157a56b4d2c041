"""Checks every EvalLoop debug-bundle test makes (sync and async loops alike)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from weakincentives.debug import DebugBundle
from weakincentives.evals import EvalResult


def open_checked_bundles(
    results: Iterable[EvalResult], directory: Path, *, run_id: str
) -> tuple[dict[str, EvalResult], dict[str, DebugBundle]]:
    """Results and bundles by sample id, each bundle verified and matching its result.

    Checks what holds for every bundle: its checksums, its place under `directory`
    (one folder per request id), its ids, the session before the run, and `eval.json`.
    """
    got = {r.sample_id: r for r in results}
    opened = {sid: DebugBundle.open(r.bundle_path) for sid, r in got.items() if r.bundle_path}
    for sample_id, bundle in opened.items():
        bundle.verify()
        result = got[sample_id]
        assert bundle.path.parent == directory / str(result.request_id)
        ids = bundle.manifest.ids
        assert (ids.sample_id, ids.experiment, ids.run_id) == (sample_id, "baseline", run_id)
        assert bundle.session_before is not None
        data = bundle.eval
        assert data is not None
        assert (data["sample_id"], data["passed"]) == (sample_id, result.passed)
        assert data["request_id"] == result.request_id
    return got, opened
