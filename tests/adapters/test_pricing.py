"""The price table: package data, user files, --price overrides, and cost arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weakincentives.adapters.pricing import (
    ModelPrice,
    PriceTable,
    default_prices,
    load_prices,
    parse_price,
)
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.session import TokenUsage


def test_cost_splits_input_into_plain_cached_and_written_tokens() -> None:
    price = ModelPrice(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    usage = TokenUsage(
        input_tokens=1_000_000,
        output_tokens=200_000,
        cached_tokens=600_000,
        cache_write_tokens=100_000,
    )

    # 300k plain * 3 + 600k * 0.3 + 100k * 3.75 + 200k * 15, per million.
    assert price.cost(usage) == pytest.approx(0.9 + 0.18 + 0.375 + 3.0)


def test_missing_cache_prices_fall_back_to_the_input_price() -> None:
    price = ModelPrice(input=2.0, output=4.0)
    usage = TokenUsage(input_tokens=500_000, cached_tokens=200_000, cache_write_tokens=100_000)

    assert price.cost(usage) == pytest.approx(1.0)


def test_unknown_model_is_unpriced_never_zero() -> None:
    table = PriceTable({"m": ModelPrice(input=1.0, output=1.0)})

    assert table.cost("other", TokenUsage(input_tokens=5)) is None
    assert table.cost(None, TokenUsage()) is None
    assert table.cost("m", TokenUsage()) == 0.0  # priced, and nothing was used


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gpt-4o-audio-preview", None),  # another model, not a snapshot of gpt-4o
        ("claude-sonnet-4-5-extra", None),
    ],
)
def test_snapshots_fall_back_to_their_base_name(model: str, expected: str | None) -> None:
    table = default_prices()

    found = table.lookup(model)

    assert found == (None if expected is None else table.prices[expected])


def test_package_table_says_when_it_was_taken_and_prices_every_provider() -> None:
    table = default_prices()

    assert table.taken is not None and len(table.taken) == 10  # an ISO date
    assert {"gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"} <= set(table.prices)
    assert all(p.input > 0 and p.output > 0 for p in table.prices.values())
    assert table.to_dict()["models"]["gpt-4o-mini"] == {
        "input": 0.15,
        "output": 0.6,
        "cached_input": 0.075,
    }


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_user_file_lays_over_the_package_table(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"prices{suffix}"
    if suffix == ".json":
        body = {"taken": "2026-01-02", "models": {"gpt-4o": {"input": 1, "output": 2}}}
        path.write_text(json.dumps(body))
    else:
        path.write_text('taken = "2026-01-02"\n[models.gpt-4o]\ninput = 1\noutput = 2\n')

    table = load_prices(path, overrides=["local-llama=0,0"])

    assert table.prices["gpt-4o"] == ModelPrice(input=1.0, output=2.0)
    assert table.prices["local-llama"] == ModelPrice(input=0.0, output=0.0)
    assert "gpt-4o-mini" in table.prices  # the rest of the package table stays
    assert table.taken == "2026-01-02"
    assert len(table.sources) == 3


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("m=1,2", ModelPrice(input=1.0, output=2.0)),
        ("m = 1.5, 2 ,0.1", ModelPrice(input=1.5, output=2.0, cached_input=0.1)),
        ("m=1,2,0.1,1.25", ModelPrice(input=1.0, output=2.0, cached_input=0.1, cache_write=1.25)),
    ],
)
def test_parse_price(spec: str, expected: ModelPrice) -> None:
    assert parse_price(spec) == ("m", expected)


@pytest.mark.parametrize("spec", ["m", "m=1", "=1,2", "m=1,2,3,4,5", "m=a,b", "m=-1,2", "m=1,,2"])
def test_bad_price_specs_are_configuration_errors(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"--price"):
        parse_price(spec)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1]",
        '{"models": 3}',
        '{"models": {"m": {"input": 1}}}',
        '{"models": {"m": {"input": 1, "output": 1, "typo": 2}}}',
        '{"models": {"m": {"input": "nan", "output": 1}}}',
    ],
)
def test_bad_price_files_say_what_is_wrong(tmp_path: Path, content: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)

    with pytest.raises(ConfigurationError, match="price"):
        load_prices(path)


def test_missing_price_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the price file"):
        load_prices(tmp_path / "absent.json")
