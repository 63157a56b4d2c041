"""The viewer's cache: a run's finished index, saved beside it, opened again at once.

`wink debug RUN` builds its index from `results.jsonl` (about a second for 100,000
results) and, once the index is complete (sort indexes and text included), saves it as
`.viewer-cache.sqlite` in the run directory. The next `wink debug RUN` loads that file
instead of reading the run, if it is still the run's:

- its **signature** matches: a hash of the code that builds the index (a new version
  of it builds again), and the size, modification time and inode of `results.jsonl` (a
  result appended, a file rewritten: the cache is ignored and written again);
- its **schema** is exactly the one this code creates (`_query_cache.load_cache`): an
  old or planted file never adds tables, views or triggers.

The cache is written the way `wink query` writes its own (`.query-cache.sqlite`):
atomically, best effort (a read-only run directory just means no cache), and only for
a single run (a directory of runs is indexed every time).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path

from weakincentives.evals import RESULTS_FILE

from ._viewer_index import ResultIndex
from ._viewer_types import IndexedRun

__all__ = ["CACHE_FILE", "index_signature", "open_run_index"]

CACHE_FILE = ".viewer-cache.sqlite"
"""Name of the cache file in a run directory."""

_VERSION = "1"
_CODE = (
    "_run_loader.py", "_viewer_cache.py", "_viewer_index.py", "_viewer_lines.py",
    "_viewer_load.py", "_viewer_schema.py", "_viewer_search.py",
)  # fmt: skip
"""The modules that decide what the index holds."""


@functools.cache
def _code_version() -> str:
    digest = hashlib.sha256(_VERSION.encode())
    for name in _CODE:
        try:
            digest.update((Path(__file__).parent / name).read_bytes())
        except OSError:  # not installed as files: the version constant alone
            digest.update(name.encode())
    return digest.hexdigest()[:16]


def index_signature(run_dir: Path) -> str | None:
    """What the cache of `run_dir` must have been written for; None when unreadable."""
    try:
        stat = (run_dir / RESULTS_FILE).stat()
    except OSError:
        return None
    return f"viewer {_code_version()} {stat.st_size} {stat.st_mtime_ns} {stat.st_ino}"


def open_run_index(
    run_dir: Path,
    *,
    cache: bool = True,
    loaded: Callable[[ResultIndex, IndexedRun], None] | None = None,
) -> ResultIndex:
    """The index of one run: from its cache when valid, else built (and cached later).

    The signature is taken before the file is read: a result appended while the index
    is built changes it, so that cache is not used again. When the run is read,
    `loaded(index, run)` is called once it is read, before the index is finished: the
    run is answered from memory then, while SQLite loads it (`ResultIndex.add_run`
    with `defer`).

    Raises:
        ViewerError: the run cannot be read.
    """
    signature = index_signature(run_dir) if cache else None
    if signature is not None:
        cached = ResultIndex.from_cache(run_dir, run_dir / CACHE_FILE, signature)
        if cached is not None:
            return cached
    index = ResultIndex()
    run = index.add_run(run_dir, defer=True)  # answered from memory while SQLite loads
    if loaded is not None:
        loaded(index, run)
    if signature is not None:
        index.cache_to(run_dir / CACHE_FILE, signature)
    # The rest of the index (sort indexes, text) waits for the first page: see `charts`.
    index.finish(defer=True)
    return index
