"""Datasets: samples read from files, validated, streamed and hashed.

Holds `Dataset` (an immutable, typed collection of `Sample`s), the JSONL reader
(`load_jsonl` / `iter_jsonl`, streaming, with `file:line` errors) and the content hash
(`dataset_sha256`, `canonical_bytes`) that a run's fingerprint records. It may import the
shared records (`weakincentives.evals._records`) and the foundation layer (`serde`,
`errors`); nothing else of `evals`.
"""

from ._dataset import (
    Dataset,
    canonical_bytes,
    dataset_sha256,
    iter_jsonl,
    load_jsonl,
)

__all__ = [
    "Dataset",
    "canonical_bytes",
    "dataset_sha256",
    "iter_jsonl",
    "load_jsonl",
]
