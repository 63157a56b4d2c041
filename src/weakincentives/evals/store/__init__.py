"""The run store: a run's directory on disk, written as results complete.

Holds `RunStore` (creates, opens and resumes run directories: `_run_store.py`),
`RunHandle` (appends each result to `results.jsonl` and keeps the manifest `run.json`:
`_handle.py`), the manifest's contents and how it is read and written (`_manifest.py`),
the file-level pieces (atomic writes, fsync, the writer lock, tail repair,
`iter_results`: `_files.py`), the background fsync thread (`_syncer.py`), per-run counts
(`_tally.py`), the `Fingerprint` that decides whether a resume is the same run
(`_fingerprint.py`), the `RunProvenance` the manifest records (`_provenance.py`), and
`StoredResults`, the results of one call read back for its report (`_readback.py`). It
may import the shared records and the layers below `evals`; nothing else of `evals`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from ._files import (
        MANIFEST_FILE,
        RESULTS_FILE,
        iter_results,
        latest_results,
    )
    from ._fingerprint import (
        ExperimentFingerprint,
        Fingerprint,
        code_directory,
        diff_fingerprints,
        git_commit,
        qualified_name,
    )
    from ._handle import RunCounts, RunHandle
    from ._manifest import FORMAT_VERSION, RunManifest, RunStatus
    from ._provenance import (
        RunProvenance,
        adapters_of,
        git_dirty,
        git_dirty_future,
        models_of,
        redact_command,
        target_adapter,
    )
    from ._readback import StoredResults, decode_report_fields
    from ._run_store import (
        RunStore,
        new_run_id,
    )
    from ._slim import SlimDecoder, slim_copy


__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "ExperimentFingerprint",
    "Fingerprint",
    "RunCounts",
    "RunHandle",
    "RunManifest",
    "RunProvenance",
    "RunStatus",
    "RunStore",
    "SlimDecoder",
    "StoredResults",
    "adapters_of",
    "code_directory",
    "decode_report_fields",
    "diff_fingerprints",
    "git_commit",
    "git_dirty",
    "git_dirty_future",
    "iter_results",
    "latest_results",
    "models_of",
    "new_run_id",
    "qualified_name",
    "redact_command",
    "slim_copy",
    "target_adapter",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.evals.store._files": (
            "MANIFEST_FILE",
            "RESULTS_FILE",
            "iter_results",
            "latest_results",
        ),
        "weakincentives.evals.store._fingerprint": (
            "ExperimentFingerprint",
            "Fingerprint",
            "code_directory",
            "decode_report_fields",
            "diff_fingerprints",
            "git_commit",
            "qualified_name",
        ),
        "weakincentives.evals.store._handle": ("RunCounts", "RunHandle"),
        "weakincentives.evals.store._manifest": ("FORMAT_VERSION", "RunManifest", "RunStatus"),
        "weakincentives.evals.store._provenance": (
            "RunProvenance",
            "adapters_of",
            "git_dirty",
            "git_dirty_future",
            "models_of",
            "redact_command",
            "target_adapter",
        ),
        "weakincentives.evals.store._readback": ("StoredResults", "decode_report_fields"),
        "weakincentives.evals.store._run_store": ("RunStore", "new_run_id"),
        "weakincentives.evals.store._slim": ("SlimDecoder", "slim_copy"),
    },
)
