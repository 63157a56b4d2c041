"""The content hash of samples: what fingerprints a run's dataset.

It is the sha256 of each sample's canonical JSON (`id`, `input`, `expected`, `metadata`,
keys sorted, compact, not ASCII-escaped), one per line, in order. It depends on the
samples and their order, not on how a file was formatted.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Iterable
from typing import Any

from weakincentives import serde

from .._records import Sample

__all__ = ["canonical_bytes", "samples_sha256"]

# What `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
# writes, from the standard library's C encoder made once: `JSONEncoder.encode` makes one
# per call (a third of its cost on a small value). No circular check: the values are
# plain JSON data (`_dumped`), which has no cycles.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_iterencode = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]  # the C accelerator
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", True, False,
        True,
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)  # fmt: skip


_encode_str = json.encoder.encode_basestring
"""What the encoder writes for a string (`ensure_ascii=False`), called directly: ids."""


def _encode(value: Any) -> str:
    if type(value) is str:
        return _encode_str(value)
    if _iterencode is None:  # pragma: no cover - CPython always has the C encoder
        return _ENCODER.encode(value)
    return "".join(_iterencode(value, 0))


def canonical_bytes(sample: Sample[Any, Any]) -> bytes:
    """`{"expected":…,"id":…,"input":…,"metadata":…}` and a newline, as UTF-8.

    The same bytes as `json.dumps` of that record with sorted keys (the four keys are
    written in sorted order); each value is JSON-compatible Python first (`_dumped`).
    """
    metadata = sample.metadata
    text = (
        f'{{"expected":{_encode(_dumped(sample.expected))},"id":{_encode(sample.id)},'
        f'"input":{_encode(_dumped(sample.input))},'
        f'"metadata":{_encode(_dumped(metadata)) if metadata else "{}"}}}\n'
    )
    return text.encode("utf-8")


def samples_sha256(samples: Iterable[Sample[Any, Any]]) -> str:
    """The content hash (hex) of `samples`, read once in order (see the module docstring)."""
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(canonical_bytes(sample))
    return digest.hexdigest()


_AS_IS = frozenset({str, int, bool, type(None)})  # serde.dump returns these unchanged


def _dumped(value: Any) -> Any:
    # Runs per sample when a streamed dataset is hashed: skip serde for plain values, and
    # for dicts of them (serde.dump would copy them unchanged).
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict and all(type(k) is str and type(v) in _AS_IS for k, v in value.items()):
        return value
    return serde.dump(value)
