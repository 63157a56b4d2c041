"""`wink stats power`: how many samples an A/B eval needs, and what a given n can detect.

Two ways to describe the metric:

- a pass rate: `--baseline-rate P` (and `--effect D` in rate points, 0.05 = 5 points);
  the paired design (both experiments on the same samples, what `wink eval run` does)
  is tested with McNemar's test, as the report does, and the plan is its exact power
  (`stats.mcnemar_power`). That power depends on how many pairs disagree, which follows
  from the correlation of outcomes between the arms, `--correlation R` (default 0, the
  conservative choice: real A/B pairs are positively correlated and need fewer samples);
  the shares of pairs that flip are printed. The independent-groups number is printed
  beside it;
- a score: `--sd S`, the standard deviation of the per-sample differences (a past run's
  `wink eval compare` shows it), with `--effect D` in score units; the plan is the paired
  t-test's exact power (`stats.t_test_power`).

The printed n reaches at least the asked power (its exact power is printed beside it).

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
_NAN = math.nan


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerPlan:
    """What `wink stats power` prints; every number printed is one the plan used."""

    metric: str
    """`rate` or `score`."""
    test: str
    """The test the plan is for: `"McNemar"` (rates) or `"paired t-test"` (scores)."""
    alpha: float
    """Significance level (two-sided)."""
    power: float
    """Wanted power."""
    sd: float | None
    """Scores: the standard deviation of the per-sample differences. None for rates."""
    p10: float | None
    """Rates with an effect: the share of pairs that go pass -> fail (baseline passes,
    treatment fails) under the planned effect; McNemar's power depends on it and `p01`."""
    p01: float | None
    """Rates with an effect: the share of pairs that go fail -> pass."""
    effect: float | None
    """The effect to detect, if given."""
    required_pairs: int | None
    """Pairs (samples run under both experiments) needed to detect `effect`."""
    achieved_power: float | None
    """The exact power of the test at `required_pairs` (at least `power`)."""
    required_per_group: int | None
    """Samples per group for two independent groups (rates only)."""
    mde: tuple[tuple[int, float], ...]
    """`(n, minimum detectable effect)` for each size asked about; NaN when none is."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form (an effect no size detects is null)."""
        return {
            "metric": self.metric, "test": self.test, "alpha": self.alpha, "power": self.power,
            "sd": self.sd, "p10": self.p10, "p01": self.p01, "effect": self.effect,
            "required_pairs": self.required_pairs, "achieved_power": self.achieved_power,
            "required_per_group": self.required_per_group,
            "mde": [{"n": n, "effect": None if math.isnan(e) else e} for n, e in self.mde],
        }  # fmt: skip


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
        return _score_plan(sd, effect, alpha, power, sizes)
    except InvalidStatisticError as exc:
        raise ConfigurationError(str(exc)) from exc


def _score_plan(
    sd: float, effect: float | None, alpha: float, power: float, sizes: Sequence[int]
) -> PowerPlan:
    if not (math.isfinite(sd) and sd > 0):
        raise ConfigurationError(f"--sd must be a number > 0, got {sd}")
    required = achieved = None
    if effect is not None:
        required = stats.required_sample_size(effect, sd=sd, alpha=alpha, power=power)
        achieved = stats.t_test_power(
            effect, se=sd / math.sqrt(required), df=required - 1, alpha=alpha
        )
    mde = tuple(
        (n, stats.minimum_detectable_effect(n, sd=sd, alpha=alpha, power=power) if n > 1 else _NAN)
        for n in sizes
    )
    return PowerPlan(
        metric="score", test="paired t-test", alpha=alpha, power=power, sd=sd, p10=None,
        p01=None, effect=effect, required_pairs=required, achieved_power=achieved,
        required_per_group=None, mde=mde,
    )  # fmt: skip


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
    p10 = p01 = required_pairs = achieved = required_groups = None
    if effect is not None:
        p2 = p + effect
        if not 0.0 <= p2 <= 1.0:
            raise ConfigurationError(
                f"--baseline-rate {p} with --effect {effect} gives a rate of {p2:g}, outside "
                "[0, 1]; the effect is in rate points (0.05 = 5 points)"
            )
        p10, p01 = stats.discordant_rates(p, p2, correlation)
        required_pairs = stats.mcnemar_sample_size(p10=p10, p01=p01, alpha=alpha, power=power)
        achieved = stats.mcnemar_power(required_pairs, p10=p10, p01=p01, alpha=alpha)
        required_groups = stats.required_sample_size_proportions(p, p2, alpha=alpha, power=power)
    mde = tuple(
        (n, stats.mcnemar_detectable_rise(
            n, baseline_rate=p, correlation=correlation, alpha=alpha, power=power
        ))
        for n in sizes
    )  # fmt: skip
    return PowerPlan(
        metric="rate", test="McNemar", alpha=alpha, power=power, sd=None, p10=p10, p01=p01,
        effect=effect, required_pairs=required_pairs, achieved_power=achieved,
        required_per_group=required_groups, mde=mde,
    )  # fmt: skip


def _unit(plan: PowerPlan, x: float) -> str:
    if math.isnan(x):
        return "n/a (not detectable at this n)"
    return f"{x * 100:.1f} pts" if plan.metric == "rate" else f"{x:.4g}"


def _render(plan: PowerPlan, console: Console) -> None:
    from rich import box
    from rich.table import Table

    head = f"{plan.test}, alpha {plan.alpha:g} (two-sided), power {plan.power:.0%}"
    if plan.sd is not None:
        head += f", sd of differences {plan.sd:.4g}"
    console.print(head, highlight=False)
    if plan.effect is not None and plan.achieved_power is not None:
        console.print(
            f"To detect {_unit(plan, plan.effect)}: [bold]{plan.required_pairs}[/] paired samples "
            f"(every sample run under both experiments; power {plan.achieved_power:.3f})",
            highlight=False,
        )
        if plan.p10 is not None and plan.p01 is not None:
            console.print(
                f"  assuming {plan.p10:.1%} of pairs go pass->fail and {plan.p01:.1%} fail->pass",
                highlight=False,
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
