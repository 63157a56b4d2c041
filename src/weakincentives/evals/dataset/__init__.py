"""Datasets: samples read from files, validated, streamed, selected and hashed.

Holds `Dataset` (an immutable, typed collection of `Sample`s), the readers (`_rows.py`:
JSONL, JSON arrays, CSV, Parquet, Hugging Face, streaming, with `file:line` errors), field
maps and transforms (`_fields.py`), strict loading into samples (`_loaders.py`:
`iter_samples`, `SampleFile`, `DatasetProvenance`), selections (`_selection.py`,
`_where.py`: `--limit`, `--sample-id`, `--where`, `--shuffle`) and the content hash
(`dataset_sha256`, `canonical_bytes`) that a run's fingerprint records. It may import the
shared records (`weakincentives.evals._records`) and the foundation layer (`serde`,
`errors`); nothing else of `evals`.
"""

from typing import TYPE_CHECKING

from weakincentives import _lazy

if TYPE_CHECKING:
    from ._dataset import (
        Dataset,
        canonical_bytes,
        dataset_sha256,
        iter_jsonl,
        load_jsonl,
    )
    from ._fields import TRANSFORMS, FieldMap
    from ._id_hashes import IdHashes, IdIndex
    from ._loaders import DatasetProvenance, SampleFile, iter_samples
    from ._rows import FORMATS, DatasetFormat
    from ._selection import SelectedSamples, Selection
    from ._where import parse_where


__all__ = [
    "FORMATS",
    "TRANSFORMS",
    "Dataset",
    "DatasetFormat",
    "DatasetProvenance",
    "FieldMap",
    "IdHashes",
    "IdIndex",
    "SampleFile",
    "SelectedSamples",
    "Selection",
    "canonical_bytes",
    "dataset_sha256",
    "iter_jsonl",
    "iter_samples",
    "load_jsonl",
    "parse_where",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "weakincentives.evals.dataset._dataset": (
            "Dataset",
            "canonical_bytes",
            "dataset_sha256",
            "iter_jsonl",
            "load_jsonl",
        ),
        "weakincentives.evals.dataset._fields": ("TRANSFORMS", "FieldMap"),
        "weakincentives.evals.dataset._id_hashes": ("IdHashes", "IdIndex"),
        "weakincentives.evals.dataset._loaders": (
            "DatasetProvenance",
            "SampleFile",
            "iter_samples",
        ),
        "weakincentives.evals.dataset._rows": ("FORMATS", "DatasetFormat"),
        "weakincentives.evals.dataset._selection": ("SelectedSamples", "Selection"),
        "weakincentives.evals.dataset._where": ("parse_where",),
    },
)
