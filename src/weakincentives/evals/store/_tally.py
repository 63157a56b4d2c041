"""`Tally`: what a run has recorded so far, key by key, and the counts derived from it.

The writer keeps one (updated under its lock with each append); a read-only handle or a
resume rebuilds it by scanning `results.jsonl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._records import EvalResult
from ._files import iter_results

__all__ = ["ResultKey", "RunCounts", "Tally"]

ResultKey = tuple[str, str, int]
"""`(sample_id, experiment_name, epoch)`: what a run records once."""

# What the latest line of a key says, kept per key by the writer (small ints are shared
# objects, so the table costs a dict slot and a key tuple per result).
_PASSED, _FAILED, _ERROR, _CANCELLED = range(4)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCounts:
    """How far a run got: one count per `(sample, experiment, epoch)`, latest line wins."""

    expected: int | None = None
    """Results the run plans to record (samples x experiments x epochs), if known."""
    results: int = 0
    """Distinct keys with a result."""
    passed: int = 0
    """Of those, passed."""
    errors: int = 0
    """Of those, errored (cancelled included)."""

    @property
    def failed(self) -> int:
        """Scored but not passed."""
        return self.results - self.passed - self.errors


def _code(result: EvalResult) -> int:
    if result.error is None:
        return _PASSED if result.score.passed else _FAILED
    return _CANCELLED if result.error_kind == "cancelled" else _ERROR


class Tally:
    """Latest state per key (last line wins) and the counts derived from it.

    With `unique` set (see `RunHandle.expect_unique_keys`), keys added from then on are
    counted without being remembered: the caller appends each key once, and the table
    stays the size it had (the keys of a resumed run), however many results follow.
    """

    def __init__(self) -> None:
        self.states: dict[ResultKey, int] = {}
        self.by_code = [0, 0, 0, 0]
        self.unique = False
        """Count new keys without keeping them (the caller adds each key once)."""
        self.untracked = 0
        """Keys added while `unique`, counted but not in `states`."""

    @property
    def distinct(self) -> int:
        """Distinct keys counted."""
        return len(self.states) + self.untracked

    def add(self, result: EvalResult) -> int | None:
        """Count `result` in; return what its key held before (for `undo`)."""
        code = _code(result)
        key = (result.sample_id, result.experiment_name, result.epoch)  # `result.key`
        old = self.states.get(key)
        if old is not None:
            self.by_code[old] -= 1
            self.states[key] = code
        elif self.unique:
            self.untracked += 1
        else:
            self.states[key] = code
        self.by_code[code] += 1
        return old

    def undo(self, result: EvalResult, old: int | None) -> None:
        """Take back `add(result)`, which returned `old` (undo several adds in reverse)."""
        key = result.key
        if old is None and key not in self.states:  # counted untracked
            self.untracked -= 1
            self.by_code[_code(result)] -= 1
            return
        self.by_code[self.states[key]] -= 1
        if old is None:
            del self.states[key]
        else:
            self.states[key] = old
            self.by_code[old] += 1

    def keys(self, *, include_errors: bool) -> set[ResultKey]:
        allowed = {_PASSED, _FAILED, _ERROR} if include_errors else {_PASSED, _FAILED}
        return {k for k, code in self.states.items() if code in allowed}

    def counts(self, expected: int | None) -> RunCounts:
        passed, _, errors, cancelled = self.by_code
        return RunCounts(
            expected=expected, results=self.distinct, passed=passed, errors=errors + cancelled
        )

    @classmethod
    def scan(cls, run_dir: Path) -> Tally:
        tally = cls()
        for result in iter_results(run_dir):
            tally.add(result)
        return tally
