"""Which samples of a dataset a run covers: `--sample-id`, `--where`, `--shuffle`, `--limit`.

A `Selection` is applied in a fixed order: keep the samples whose id matches one of
`sample_ids` (exact ids or shell-style globs such as `q1*`), then those for which
`where` holds (see `weakincentives.evals._where`), then shuffle them with `seed`, then
keep the first `limit`. Without `shuffle` it streams (reading stops after `limit`
samples); with it, the samples that passed the filters are held in memory to be shuffled.

A selection is part of a run's fingerprint (`to_dict`) and its report header
(`describe`), so a resumed run covers the same samples and a reader sees which ones.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from weakincentives.errors import ConfigurationError

from .._records import Sample
from ._sample_hash import canonical_bytes
from ._where import parse_where

__all__ = ["SelectedSamples", "Selection"]

_GLOB = frozenset("*?[")


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """A subset of a dataset; see the module docstring.

    Examples:
        >>> samples = [Sample(id=f"q{i}", input=i, expected=i) for i in range(10)]
        >>> [s.id for s in Selection(limit=3, shuffle=True, seed=7).apply(samples)]
        ['q8', 'q3', 'q1']
        >>> Selection(sample_ids=("q1*",), where="input > 5").describe()
        'ids q1*; where input > 5'
    """

    limit: int | None = None
    """Keep at most this many samples (after the other steps)."""
    sample_ids: tuple[str, ...] = ()
    """Ids or globs to keep (empty: every id)."""
    where: str | None = None
    """A `--where` expression samples must satisfy."""
    shuffle: bool = False
    """Shuffle (with `seed`) before `limit`: a reproducible random subset."""
    seed: int = 0
    """Seed of the shuffle."""

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigurationError(f"--limit must be at least 1, got {self.limit}")
        if self.where is not None:
            parse_where(self.where)  # a malformed expression fails now, not at sample 1

    @property
    def is_everything(self) -> bool:
        """True when the selection keeps every sample in file order."""
        return self == Selection(seed=self.seed) and not self.shuffle

    def apply(self, samples: Iterable[Sample[Any, Any]]) -> Iterator[Sample[Any, Any]]:
        """Yield the selected samples (see the module docstring for the order).

        Raises:
            ConfigurationError: an exact `sample_ids` entry matched no sample.
        """
        chosen: Iterable[Sample[Any, Any]] = samples
        if self.sample_ids:
            chosen = self._by_id(chosen)
        if self.where is not None:
            chosen = filter(parse_where(self.where), chosen)
        if self.shuffle:
            pool = list(chosen)
            random.Random(self.seed).shuffle(pool)
            chosen = pool
        if self.limit is not None:
            chosen = itertools.islice(chosen, self.limit)
        return iter(chosen)

    def _by_id(self, samples: Iterable[Sample[Any, Any]]) -> Iterator[Sample[Any, Any]]:
        exact = {i for i in self.sample_ids if not _GLOB & set(i)}
        globs = [i for i in self.sample_ids if _GLOB & set(i)]
        found: set[str] = set()
        shown: list[str] = []
        for sample in samples:
            if len(shown) < 3:
                shown.append(sample.id)
            if sample.id in exact:
                found.add(sample.id)
                yield sample
            elif any(fnmatch.fnmatchcase(sample.id, g) for g in globs):
                yield sample
        missing = sorted(exact - found)
        if missing:
            raise ConfigurationError(
                f"--sample-id: no sample has id {', '.join(missing)} (ids look like "
                f"{', '.join(shown) or 'nothing: the dataset is empty'})"
            )

    def to_dict(self) -> dict[str, Any]:
        """The selection as JSON values (empty when it keeps everything): for fingerprints."""
        if self.is_everything:
            return {}
        data: dict[str, Any] = {}
        if self.sample_ids:
            data["sample_ids"] = list(self.sample_ids)
        if self.where is not None:
            data["where"] = self.where
        if self.shuffle:
            data["shuffle"] = True
            data["seed"] = self.seed
        if self.limit is not None:
            data["limit"] = self.limit
        return data

    def describe(self) -> str:
        """One line for a report header, e.g. `ids q1*; where ...; shuffled (seed 7); limit 20`."""
        parts = []
        if self.sample_ids:
            parts.append(f"ids {','.join(self.sample_ids)}")
        if self.where is not None:
            parts.append(f"where {self.where}")
        if self.shuffle:
            parts.append(f"shuffled (seed {self.seed})")
        if self.limit is not None:
            parts.append(f"limit {self.limit}")
        return "; ".join(parts) or "all samples"

    @classmethod
    def from_dict(cls, data: Any) -> Selection | None:
        """The selection `to_dict` wrote, or None for anything else (older runs)."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            return cls(
                limit=data.get("limit"), sample_ids=tuple(data.get("sample_ids", ())),
                where=data.get("where"), shuffle=bool(data.get("shuffle", False)),
                seed=int(data.get("seed", 0)),
            )  # fmt: skip
        except (ConfigurationError, TypeError, ValueError):
            return None


class SelectedSamples:
    """The selected samples of a re-iterable source, read afresh on each iteration.

    `scan()` reads them once to check every row, count them and hash them (the
    `Dataset.sha256` of the same samples) without holding them, so a run over a large
    file is fingerprinted up front and streamed. It is a `Collection`, so the runner
    knows how many results to expect.
    """

    def __init__(self, source: Iterable[Sample[Any, Any]], selection: Selection) -> None:
        self.source = source
        """The samples before selection (a `Dataset`, `SampleFile` or any re-iterable)."""
        self.selection = selection
        """What is kept."""
        self._scanned: tuple[int, str] | None = None

    def __iter__(self) -> Iterator[Sample[Any, Any]]:
        return self.selection.apply(self.source)

    def scan(self) -> tuple[int, str]:
        """Read the selection once: every error surfaces; returns `(len, sha256)`.

        Raises:
            InvalidDatasetError: a row of the source is not valid.
            ConfigurationError: an exact `--sample-id` matched nothing.
        """
        digest = hashlib.sha256()
        count = 0
        for sample in self:
            digest.update(canonical_bytes(sample))
            count += 1
        self._scanned = (count, digest.hexdigest())
        return self._scanned

    def __len__(self) -> int:
        return (self._scanned or self.scan())[0]

    def __contains__(self, item: object) -> bool:
        return any(sample == item for sample in self)

    @property
    def sha256(self) -> str:
        """Content hash of the selected samples (reads them once if not scanned yet)."""
        return (self._scanned or self.scan())[1]
