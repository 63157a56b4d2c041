"""Finding repeated sample ids, and looking ids up, in 8 bytes per id.

A dict or set of a million ids costs about 110 bytes per id (the id string, its slot and
the table's spare room); these keep one 64-bit hash per id in an `array('q')` instead.
Hashes are Python's own `hash(str)` (cached on the string; salted per process, which is
fine: they are never stored or sent), mixed with a salt when an unsalted pair collides.

- `IdHashes` collects the hashes of a stream of ids and says, once the stream ended,
  which hashes occur more than once: the candidates for a repeated id (a true repeat,
  or two ids whose hashes collide, about once in 2**64 pairs). The caller confirms a
  candidate by reading its source again.
- `IdIndex` maps each of a set of unique ids to its rank among them (`0 .. n - 1`), by
  binary search over the sorted hashes: a table of per-id flags then needs one byte per
  id, not one dict entry.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Hashable, Iterable

__all__ = ["IdHashes", "IdIndex", "id_hash", "sort_hashes"]

_SMALL = 4096
"""Below this many hashes, sorting and finding repeats needs no numpy."""


def id_hash(salt: int) -> Callable[[str], int]:
    """The hash of an id under `salt` (0: `hash(id)` itself, the fastest)."""
    if salt == 0:
        return hash
    return lambda sample_id: hash((salt, sample_id))


def sort_hashes(hashes: array[int]) -> None:
    """Sort `hashes` in place (numpy for large arrays: no list of a million ints)."""
    if len(hashes) < _SMALL:
        hashes[:] = array("q", sorted(hashes))
        return
    import numpy as np

    np.frombuffer(hashes, dtype=np.int64).sort()  # a view: sorts the array's own memory


def _repeats_in_sorted(hashes: array[int]) -> set[int]:
    if len(hashes) < _SMALL:
        return {hashes[i] for i in range(1, len(hashes)) if hashes[i] == hashes[i - 1]}
    import numpy as np

    view = np.frombuffer(hashes, dtype=np.int64)
    return {int(h) for h in view[1:][view[1:] == view[:-1]]}


class IdHashes:
    """The hashes of the ids seen so far; `repeated()` says which occur twice or more.

    Examples:
        >>> seen = IdHashes()
        >>> for sample_id in ("a", "b", "a"):
        ...     seen.add(sample_id)
        >>> seen.repeated() == {hash("a")}
        True
    """

    __slots__ = ("_hashes",)

    def __init__(self) -> None:
        """Start with no ids."""
        self._hashes: array[int] = array("q")

    def add(self, value: Hashable) -> None:
        """Remember the hash of `value` (an id, or any hashable key)."""
        self._hashes.append(hash(value))

    def __len__(self) -> int:
        return len(self._hashes)

    def repeated(self) -> set[int]:
        """The hashes added more than once (sorts the hashes; call once, at the end)."""
        sort_hashes(self._hashes)
        return _repeats_in_sorted(self._hashes)


class IdIndex:
    """Ranks of a set of unique ids, kept as their sorted 64-bit hashes (8 bytes per id).

    `rank(id)` is the id's position among the sorted hashes, or None for an id that is
    not in the set (a foreign id whose hash equals a member's, a 1 in 2**64 chance per
    lookup, would be taken for that member).

    Args:
        ids: Called (with no arguments) for a fresh iterable of the ids; called again
            when two ids' hashes collide (then the hashes are salted) or to find a
            repeated id.
        on_repeat: Called with a repeated id (it may raise); repeats are then ignored.

    Examples:
        >>> index = IdIndex(lambda: ["b", "a", "c"])
        >>> sorted(index.rank(i) for i in "abc"), index.rank("z"), len(index)
        ([0, 1, 2], None, 3)
    """

    __slots__ = ("_hash", "_hashes")

    def __init__(
        self,
        ids: Callable[[], Iterable[str]],
        on_repeat: Callable[[str], None] | None = None,
    ) -> None:
        """Hash, sort and check the ids (see the class docstring)."""
        for salt in range(8):
            hash_of = id_hash(salt)
            hashes = array("q", map(hash_of, ids()))
            sort_hashes(hashes)
            candidates = _repeats_in_sorted(hashes)
            if candidates:
                collides, repeated = _classify(ids(), hash_of, candidates)
                if collides:
                    continue  # two different ids share a hash: salt it and start again
                if repeated is not None and on_repeat is not None:
                    on_repeat(repeated)
                hashes = _distinct_sorted(hashes)
            self._hash, self._hashes = hash_of, hashes
            return
        raise RuntimeError("ids keep colliding under 8 salted hashes")  # pragma: no cover

    def rank(self, sample_id: str) -> int | None:
        """The id's rank (`0 <= rank < len(self)`), or None when it is not a member."""
        h = self._hash(sample_id)
        hashes = self._hashes
        i = bisect.bisect_left(hashes, h)
        return i if i < len(hashes) and hashes[i] == h else None

    def __len__(self) -> int:
        return len(self._hashes)


def _classify(
    ids: Iterable[str], hash_of: Callable[[str], int], candidates: set[int]
) -> tuple[bool, str | None]:
    """Whether two different ids share a candidate hash, and the first repeated id."""
    first: dict[int, str] = {}
    repeated = None
    for sample_id in ids:
        h = hash_of(sample_id)
        if h not in candidates:
            continue
        seen = first.get(h)
        if seen is None:
            first[h] = sample_id
        elif seen != sample_id:
            return True, repeated
        elif repeated is None:
            repeated = sample_id
    return False, repeated


def _distinct_sorted(hashes: array[int]) -> array[int]:
    out: array[int] = array("q")
    last = None
    for h in hashes:
        if h != last:
            out.append(h)
            last = h
    return out
