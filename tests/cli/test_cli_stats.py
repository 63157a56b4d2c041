"""`wink stats power`: sample sizes and detectable effects, checked against statsmodels."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from scipy.stats import norm
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize
from typer.testing import CliRunner

from weakincentives.cli import app


def power_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["stats", "power", *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(("sd", "effect"), [(0.4, 0.05), (1.0, 0.2), (0.25, 0.1)])
def test_score_sample_size_matches_a_one_sample_z_test(sd: float, effect: float) -> None:
    data = power_json("--sd", str(sd), "--effect", str(effect))
    expected = NormalIndPower().solve_power(effect_size=effect / sd, alpha=0.05, power=0.8, ratio=0)
    assert data["required_pairs"] == math.ceil(expected)
    assert data["required_per_group"] is None


@pytest.mark.parametrize(("p", "effect"), [(0.7, 0.05), (0.5, -0.1), (0.9, 0.05)])
def test_rate_sample_sizes_match_statsmodels(p: float, effect: float) -> None:
    data = power_json("--baseline-rate", str(p), "--effect", str(effect))
    per_group = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(p + effect, p), alpha=0.05, power=0.8, ratio=1
    )
    assert data["required_per_group"] == math.ceil(per_group)
    # Paired, correlation 0: the sd of a difference of two independent 0/1 outcomes.
    p2 = p + effect
    sd = math.sqrt(p * (1 - p) + p2 * (1 - p2))
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert data["required_pairs"] == math.ceil((z * sd / abs(effect)) ** 2)


def test_detectable_effect_at_each_n_matches_statsmodels() -> None:
    data = power_json(
        "--sd", "0.4", "--n", "100", "--n", "400", "--alpha", "0.01", "--power", "0.9"
    )
    assert [row["n"] for row in data["mde"]] == [100, 400]
    for row in data["mde"]:
        d = NormalIndPower().solve_power(nobs1=row["n"], alpha=0.01, power=0.9, ratio=0)
        assert row["effect"] == pytest.approx(d * 0.4, rel=1e-4)
    assert data["effect"] is None
    assert data["required_pairs"] is None


def test_positive_correlation_needs_fewer_pairs() -> None:
    base = ("--baseline-rate", "0.7", "--effect", "0.05")
    independent = power_json(*base)["required_pairs"]
    correlated = power_json(*base, "--correlation", "0.5")["required_pairs"]
    assert correlated < independent


def test_text_output_names_the_required_n_and_the_mde_table() -> None:
    result = CliRunner().invoke(
        app, ["stats", "power", "--baseline-rate", "0.7", "--effect", "0.05"]
    )
    assert result.exit_code == 0
    assert "paired samples" in result.stdout
    assert "samples per group" in result.stdout
    assert "Minimum detectable effect" in result.stdout
    assert "1000" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "exactly one of --baseline-rate"),
        (["--baseline-rate", "0.5", "--sd", "1"], "exactly one of --baseline-rate"),
        (["--baseline-rate", "1.5"], "strictly between 0 and 1"),
        (["--baseline-rate", "0.9", "--effect", "0.2"], "outside [0, 1]"),
        (["--sd", "1", "--effect", "0"], "effect"),
        (["--sd", "-1"], "sd"),
        (["--sd", "1", "--alpha", "2"], "alpha"),
        (["--sd", "1", "--correlation", "1"], "--correlation"),
        (["--sd", "1", "--n", "0"], "--n must be at least 1"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["stats", "power", *args])
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize("command", [["stats"], ["stats", "power"]])
def test_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout
