"""What the next commands need to name the same run: the hints `wink eval run` prints."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Hints"]

_QUERY_EXAMPLE = (
    "SELECT experiment, round(avg(passed), 3) AS pass_rate, count(*) AS n "
    "FROM results GROUP BY experiment"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hints:
    """What the next commands need to name the same run."""

    target: str
    dataset: Path | None
    evaluators: Sequence[str]
    experiments: Sequence[str]
    epochs: int
    runs_dir: Path
    input_type: str | None
    expected_type: str | None
    distributed: tuple[str, ...] = ()
    """`--redis URL` and its companions (the URL without its password)."""
    plan_args: Sequence[str] = ()
    """Dataset source, selection and model flags, as given (they are in the fingerprint)."""

    def resume_command(self, run_id: str) -> str:
        args = ["wink", "eval", "run", self.target]
        if self.dataset is not None:
            args += ["--dataset", str(self.dataset)]
        for flag, values in (("--evaluator", self.evaluators), ("--experiment", self.experiments)):
            for value in values:
                args += [flag, value]
        for flag, option in (
            ("--input-type", self.input_type),
            ("--expected-type", self.expected_type),
        ):
            if option:
                args += [flag, option]
        args += self.plan_args
        if self.epochs != 1:
            args += ["--epochs", str(self.epochs)]
        if self.runs_dir != Path("runs"):
            args += ["--runs-dir", str(self.runs_dir)]
        return shlex.join([*args, *self.distributed, "--resume", run_id])

    def text(self, run_id: str) -> str:
        run_dir = shlex.quote(str(self.runs_dir / run_id))
        return "\n".join(
            [
                f"Run directory: {self.runs_dir / run_id}",
                f"  report:  wink eval report {run_dir}",
                f"  query:   wink query {run_dir} {shlex.quote(_QUERY_EXAMPLE)}",
                f"  view:    wink debug {run_dir}",
                f"  resume:  {self.resume_command(run_id)}",
            ]
        )
