"""`wink stats power`: sample sizes and detectable effects, checked against statsmodels."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize
from typer.testing import CliRunner

from weakincentives.cli import app
from weakincentives.evals.stats import discordant_rates, mcnemar_power, mcnemar_sample_size


def power_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["stats", "power", *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(("sd", "effect"), [(0.4, 0.05), (1.0, 0.2), (0.25, 0.1)])
def test_score_sample_size_is_the_paired_t_test_sample_size(sd: float, effect: float) -> None:
    data = power_json("--sd", str(sd), "--effect", str(effect))
    expected = TTestPower().solve_power(effect_size=effect / sd, alpha=0.05, power=0.8)
    assert data["required_pairs"] == math.ceil(expected)
    assert data["test"] == "paired t-test"
    assert data["achieved_power"] == pytest.approx(
        TTestPower().power(effect / sd, data["required_pairs"], 0.05), abs=1e-9
    )
    assert data["achieved_power"] >= 0.8
    assert data["required_per_group"] is None


@pytest.mark.parametrize(("p", "effect"), [(0.7, 0.05), (0.5, -0.1), (0.9, 0.05)])
def test_rate_sample_sizes_are_mcnemar_sample_sizes(p: float, effect: float) -> None:
    data = power_json("--baseline-rate", str(p), "--effect", str(effect))
    per_group = NormalIndPower().solve_power(
        effect_size=proportion_effectsize(p + effect, p), alpha=0.05, power=0.8, ratio=1
    )
    assert data["required_per_group"] == math.ceil(per_group)
    # Correlation 0: independent outcomes, so P(pass -> fail) = p (1 - p2), and so on.
    p2 = p + effect
    assert data["p10"] == pytest.approx(p * (1 - p2), abs=1e-12)
    assert data["p01"] == pytest.approx(p2 * (1 - p), abs=1e-12)
    assert data["test"] == "McNemar"
    assert data["sd"] is None  # no sd is behind a McNemar plan, so none is printed
    n = data["required_pairs"]
    assert n == mcnemar_sample_size(p10=data["p10"], p01=data["p01"])
    assert data["achieved_power"] == mcnemar_power(n, p10=data["p10"], p01=data["p01"])
    assert data["achieved_power"] >= 0.8 > mcnemar_power(n - 1, p10=data["p10"], p01=data["p01"])


def test_the_issue_case_plans_for_mcnemar() -> None:
    # The z-test planner printed 1248 pairs, where McNemar's power is 0.786.
    data = power_json("--baseline-rate", "0.7", "--effect", "0.05")
    assert data["required_pairs"] == 1291
    assert data["achieved_power"] == pytest.approx(0.8000, abs=5e-5)


def test_detectable_effect_at_each_n_reaches_the_power() -> None:
    data = power_json(
        "--sd", "0.4", "--n", "100", "--n", "400", "--alpha", "0.01", "--power", "0.9"
    )
    assert [row["n"] for row in data["mde"]] == [100, 400]
    for row in data["mde"]:
        assert TTestPower().power(row["effect"] / 0.4, row["n"], 0.01) == pytest.approx(
            0.9, abs=1e-7
        )
    assert data["effect"] is None
    assert data["required_pairs"] is None


def test_rate_detectable_effect_is_mcnemar_s_and_unknown_when_out_of_reach() -> None:
    data = power_json("--baseline-rate", "0.7", "--n", "5", "--n", "1000")
    tiny, large = data["mde"]
    assert tiny == {"n": 5, "effect": None}  # no rise of 0.7 is detected with 5 pairs
    p10, p01 = discordant_rates(0.7, 0.7 + large["effect"])
    assert mcnemar_power(1000, p10=p10, p01=p01) == pytest.approx(0.8, abs=1e-5)


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
    assert "1291 paired samples" in result.stdout
    assert "power 0.800" in result.stdout
    assert "assuming 17.5% of pairs go pass->fail and 22.5% fail->pass" in result.stdout
    assert "sd of differences" not in result.stdout
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
        (["--baseline-rate", "0.9", "--effect", "0.05", "--correlation", "-0.9"], "impossible"),
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
