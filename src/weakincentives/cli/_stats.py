"""`wink stats power`: how many samples an A/B eval needs, and what a given n can detect.

Two ways to describe the metric:

- a pass rate: `--baseline-rate P` (and `--effect D` in rate points, 0.05 = 5 points);
  the paired design (both experiments on the same samples, what `wink eval run` does)
  needs the correlation of outcomes between the arms, `--correlation R` (default 0, the
  conservative choice: real A/B pairs are positively correlated and need fewer samples);
  the independent-groups number is printed beside it;
- a score: `--sd S`, the standard deviation of the per-sample differences (a past run's
  `wink eval compare` shows it), with `--effect D` in score units.

Without `--effect` only the detectable effects at `--n` (default a ladder of sizes) are
printed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from weakincentives.errors import ConfigurationError, InvalidStatisticError
from weakincentives.evals import stats

from ._console import fail

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PowerPlan", "plan_power", "register"]

_DEFAULT_SIZES = (50, 100, 200, 500, 1000, 2000)


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerPlan:
    """What `wink stats power` prints."""

    metric: str
    """`rate` or `score`."""
    alpha: float
    """Significance level (two-sided)."""
    power: float
    """Wanted power."""
    sd: float
    """Standard deviation of the per-sample differences used for the paired numbers."""
    effect: float | None
    """The effect to detect, if given."""
    required_pairs: int | None
    """Pairs (samples run under both experiments) needed to detect `effect`."""
    required_per_group: int | None
    """Samples per group for two independent groups (rates only)."""
    mde: tuple[tuple[int, float], ...]
    """`(n, minimum detectable effect)` for each size asked about."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "metric": self.metric,
            "alpha": self.alpha,
            "power": self.power,
            "sd": self.sd,
            "effect": self.effect,
            "required_pairs": self.required_pairs,
            "required_per_group": self.required_per_group,
            "mde": [{"n": n, "effect": e} for n, e in self.mde],
        }


def plan_power(
    *,
    baseline_rate: float | None,
    sd: float | None,
    effect: float | None,
    alpha: float,
    power: float,
    correlation: float,
    sizes: Sequence[int],
) -> PowerPlan:
    """Compute the plan; see the module docstring.

    Raises:
        ConfigurationError: the options do not describe one metric, or are out of range.
    """
    if not -1.0 < correlation < 1.0:
        raise ConfigurationError(f"--correlation must be in (-1, 1), got {correlation}")
    if any(size < 1 for size in sizes):
        raise ConfigurationError(f"--n must be at least 1, got {min(sizes)}")
    try:
        if baseline_rate is not None and sd is None:
            return _rate_plan(baseline_rate, effect, alpha, power, correlation, sizes)
        if sd is None or baseline_rate is not None:
            raise ConfigurationError("give exactly one of --baseline-rate P or --sd S")
        required = None if effect is None else stats.required_sample_size(
            effect, sd=sd, alpha=alpha, power=power
        )  # fmt: skip
        return PowerPlan(
            metric="score", alpha=alpha, power=power, sd=sd, effect=effect,
            required_pairs=required, required_per_group=None,
            mde=_mde(sizes, sd, alpha, power),
        )  # fmt: skip
    except InvalidStatisticError as exc:
        raise ConfigurationError(str(exc)) from exc


def _rate_plan(
    p: float,
    effect: float | None,
    alpha: float,
    power: float,
    correlation: float,
    sizes: Sequence[int],
) -> PowerPlan:
    if not 0.0 < p < 1.0:
        raise ConfigurationError(f"--baseline-rate must be strictly between 0 and 1, got {p}")
    # Var(A - B) = vA + vB - 2 r sqrt(vA vB) for outcomes that are 1 on pass, 0 on fail.
    v1 = p * (1.0 - p)
    sd_at_p = math.sqrt(max(0.0, 2.0 * v1 * (1.0 - correlation)))
    required_pairs = required_groups = None
    if effect is not None:
        p2 = p + effect
        if not 0.0 <= p2 <= 1.0:
            raise ConfigurationError(
                f"--baseline-rate {p} with --effect {effect} gives a rate of {p2:g}, outside "
                "[0, 1]; the effect is in rate points (0.05 = 5 points)"
            )
        v2 = p2 * (1.0 - p2)
        sd_diff = math.sqrt(max(0.0, v1 + v2 - 2.0 * correlation * math.sqrt(v1 * v2)))
        required_pairs = stats.required_sample_size(effect, sd=sd_diff, alpha=alpha, power=power)
        required_groups = stats.required_sample_size_proportions(p, p2, alpha=alpha, power=power)
    return PowerPlan(
        metric="rate", alpha=alpha, power=power, sd=sd_at_p, effect=effect,
        required_pairs=required_pairs, required_per_group=required_groups,
        mde=_mde(sizes, sd_at_p, alpha, power),
    )  # fmt: skip


def _mde(
    sizes: Sequence[int], sd: float, alpha: float, power: float
) -> tuple[tuple[int, float], ...]:
    return tuple(
        (n, stats.minimum_detectable_effect(n, sd=sd, alpha=alpha, power=power)) for n in sizes
    )


def _unit(plan: PowerPlan, x: float) -> str:
    return f"{x * 100:.1f} pts" if plan.metric == "rate" else f"{x:.4g}"


def _render(plan: PowerPlan, console: Console) -> None:
    from rich import box
    from rich.table import Table

    head = f"alpha {plan.alpha:g} (two-sided), power {plan.power:.0%}, sd of differences "
    console.print(head + f"{plan.sd:.4g}")
    if plan.effect is not None:
        console.print(
            f"To detect {_unit(plan, plan.effect)}: [bold]{plan.required_pairs}[/] paired samples "
            "(every sample run under both experiments)"
        )
        if plan.required_per_group is not None:
            console.print(
                f"  or {plan.required_per_group} samples per group with independent groups"
            )
    table = Table(title="Minimum detectable effect", box=box.SIMPLE_HEAD)
    table.add_column("n (pairs)", justify="right")
    table.add_column("detectable effect", justify="right")
    for n, effect in plan.mde:
        table.add_row(str(n), _unit(plan, effect))
    console.print(table)


def _power(
    baseline_rate: Annotated[
        float | None, typer.Option(help="Pass rate of the baseline (0-1).", show_default=False)
    ] = None,
    sd: Annotated[
        float | None,
        typer.Option(help="SD of per-sample score differences.", show_default=False),
    ] = None,
    effect: Annotated[
        float | None,
        typer.Option(help="Effect to detect (rate points, 0.05 = 5 pts, or score units)."),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Two-sided significance level.")] = 0.05,
    power: Annotated[float, typer.Option(help="Probability of detecting the effect.")] = 0.8,
    correlation: Annotated[
        float, typer.Option(help="Correlation of paired outcomes (rates; 0 is conservative).")
    ] = 0.0,
    n: Annotated[
        list[int] | None,
        typer.Option("--n", help="Sample size to show the detectable effect at (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Plan sample sizes: required n for an effect, and the detectable effect at n."""
    from rich.console import Console  # here, not at import: `wink` starts without rich

    sizes = tuple(n or _DEFAULT_SIZES)
    try:
        plan = plan_power(
            baseline_rate=baseline_rate, sd=sd, effect=effect, alpha=alpha, power=power,
            correlation=correlation, sizes=sizes,
        )  # fmt: skip
    except ConfigurationError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(plan.to_dict(), indent=2))
        return
    _render(plan, Console())


def register(app: typer.Typer) -> None:
    """Add `wink stats` to `app`."""
    group = typer.Typer(
        name="stats", help="Statistics helpers for planning evals.", no_args_is_help=True
    )
    group.command("power")(_power)
    app.add_typer(group)
