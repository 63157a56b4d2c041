"""SQL functions that give `wink query` the report's own intervals.

`pass_rate_low(passed, sample_id)` and `pass_rate_high(passed, sample_id)` are aggregates:
over the rows of a group they return the ends of the pass rate's 95% interval exactly as
the report, `--json`, the HTML report and the viewer compute it
(`weakincentives.evals.stats.summarize_outcomes`): Wilson with one row per sample,
clustered by sample when a sample repeats (epochs). Group by experiment (and run) to get
one experiment's interval; a group that mixes experiments is not a rate anyone reports.

Examples:
    SELECT experiment, avg(passed) AS pass_rate,
           pass_rate_low(passed, sample_id) AS low, pass_rate_high(passed, sample_id) AS high
    FROM results GROUP BY run_id, experiment
"""

from __future__ import annotations

import sqlite3

from weakincentives.evals import stats

__all__ = ["SQL_FUNCTIONS", "register_stat_functions"]

SQL_FUNCTIONS: tuple[tuple[str, str], ...] = (
    ("pass_rate_low(passed, sample_id)",
     "lower end of the pass rate's 95% interval, as the report computes it"),
    ("pass_rate_high(passed, sample_id)", "upper end of the same interval"),
)  # fmt: skip
"""`(signature, description)` of each function, shown by `--schema`."""


class _PassRateEnd:
    """An aggregate collecting `(passed, sample_id)` rows; `finalize` gives one end."""

    high = False

    def __init__(self) -> None:
        self._passed: list[bool] = []
        self._samples: list[str] = []

    def step(self, passed: object, sample_id: object) -> None:
        self._passed.append(bool(passed))
        self._samples.append(str(sample_id))

    def finalize(self) -> float | None:
        if not self._passed:
            return None
        passes = [1.0 if p else 0.0 for p in self._passed]
        summary = stats.summarize_outcomes(
            self._passed, passes, clusters=stats.repeated_samples(self._samples)
        )
        end = summary.pass_rate_high if self.high else summary.pass_rate_low
        return None if end != end else end  # NaN (one sample, clustered) is NULL in SQL


class _PassRateHigh(_PassRateEnd):
    high = True


def register_stat_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Add the functions of `SQL_FUNCTIONS` to `conn`; returns `conn`."""
    # typeshed's aggregate protocol only describes one-argument `step` methods.
    conn.create_aggregate("pass_rate_low", 2, _PassRateEnd)  # type: ignore[arg-type]
    conn.create_aggregate("pass_rate_high", 2, _PassRateHigh)  # type: ignore[arg-type]
    return conn
