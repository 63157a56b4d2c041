"""What model calls cost: a price table from model name to dollars per million tokens.

The package ships a table (`data/prices.json`, with the date its prices were taken);
`load_prices` reads it, lays a user file (JSON or TOML, same shape) over it, then
`--price MODEL=IN,OUT[,CACHED[,WRITE]]` overrides. A model the table does not know is
*unpriced*: `PriceTable.cost` returns None, never a silent zero.

A price applies to `TokenUsage` the same way for every provider: cache reads
(`cached_tokens`) at the cached-input price, cache writes (`cache_write_tokens`) at the
cache-write price, the rest of `input_tokens` at the input price and `output_tokens`
(thinking included) at the output price. A missing cached or cache-write price is the
input price. Dated snapshots (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`) and
`-latest` aliases fall back to their base name.

Examples:
    >>> from weakincentives.runtime.session import TokenUsage
    >>> table = PriceTable({"m": ModelPrice(input=2.0, output=8.0, cached_input=0.5)})
    >>> table.cost("m", TokenUsage(input_tokens=1_000_000, cached_tokens=500_000))
    1.25
    >>> table.cost("other", TokenUsage(input_tokens=10)) is None
    True
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.runtime.session import TokenUsage

__all__ = ["ModelPrice", "PriceTable", "default_prices", "load_prices", "parse_price"]

_PER = 1_000_000
_SNAPSHOT = re.compile(r"^(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{3,4}|-latest|@.+)$")
"""What may follow a table name in a model name that still means that model."""
_PRICE_FIELDS = ("input", "output", "cached_input", "cache_write")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """Dollars per million tokens for one model."""

    input: float
    """Prompt tokens not served from or written to a cache."""
    output: float
    """Generated tokens, thinking included."""
    cached_input: float | None = None
    """Prompt tokens read from the provider's cache (None: the input price)."""
    cache_write: float | None = None
    """Prompt tokens written to the provider's cache (None: the input price)."""

    def cost(self, usage: TokenUsage) -> float:
        """Dollars for `usage` at these prices."""
        cached = usage.cached_tokens
        written = usage.cache_write_tokens
        plain = max(0, usage.input_tokens - cached - written)
        read_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        total = (
            plain * self.input
            + cached * read_price
            + written * write_price
            + usage.output_tokens * self.output
        )
        return total / _PER


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Model name -> `ModelPrice`, with where the prices came from."""

    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """Prices by model name."""
    taken: str | None = None
    """When the prices were read off the providers' pages (ISO date), if known."""
    sources: tuple[str, ...] = ()
    """Where each layer of the table came from (package data, a user file, --price)."""
    _found: dict[str, ModelPrice | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Lookups made so far (a run prices the same few names once per sample)."""

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The price of `model`, or None when it is unpriced."""
        if not model:
            return None
        try:
            return self._found[model]
        except KeyError:
            found = self._found[model] = self._search(model)
            return found

    def _search(self, model: str) -> ModelPrice | None:
        name = model.removeprefix("models/")
        found = self.prices.get(name)
        if found is not None:
            return found
        best: str | None = None
        for key in self.prices:
            longer = best is None or len(key) > len(best)
            if longer and name.startswith(key) and _SNAPSHOT.match(name[len(key) :]):
                best = key
        return None if best is None else self.prices[best]

    def cost(self, model: str | None, usage: TokenUsage) -> float | None:
        """Dollars `usage` of `model` cost, or None when the model is unpriced."""
        price = self.lookup(model)
        return None if price is None else price.cost(usage)

    def with_prices(self, prices: Mapping[str, ModelPrice], source: str) -> PriceTable:
        """A copy with `prices` laid over this table's."""
        return PriceTable({**self.prices, **prices}, self.taken, (*self.sources, source))

    def to_dict(self) -> dict[str, Any]:
        """The table as plain JSON values (the shape `load_prices` reads)."""
        return {
            "taken": self.taken,
            "sources": list(self.sources),
            "models": {
                name: {k: getattr(p, k) for k in _PRICE_FIELDS if getattr(p, k) is not None}
                for name, p in sorted(self.prices.items())
            },
        }


@functools.cache
def default_prices() -> PriceTable:
    """The table shipped with the package (read once per process; every run uses it)."""
    # A plain path next to this module, not `importlib.resources` (10 ms to import): the
    # package is installed as files.
    text = Path(__file__).with_name("data").joinpath("prices.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return PriceTable(
        _models(data.get("models"), "the package price table"),
        taken=str(data.get("taken")),
        sources=(f"package table of {data.get('taken')}",),
    )


def load_prices(path: str | Path | None = None, overrides: Iterable[str] = ()) -> PriceTable:
    """The package table, with a user file and `MODEL=IN,OUT[,CACHED[,WRITE]]` laid over it.

    Args:
        path: A JSON or TOML file with a `models` table (and optionally `taken`).
        overrides: `--price` values, applied last.

    Raises:
        ConfigurationError: the file cannot be read or a price does not parse.
    """
    table = default_prices()
    if path is not None:
        table = _layer_file(table, Path(path))
    given = dict(parse_price(spec) for spec in overrides)
    if given:
        table = table.with_prices(given, "--price " + " ".join(sorted(given)))
    return table


def _layer_file(table: PriceTable, path: Path) -> PriceTable:
    import tomllib  # only for a TOML file: not on the import path of every run

    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot read the price file {path}: {exc}; give a JSON or TOML file with a "
            '"models" table of {"input": ..., "output": ...} per model',
        ) from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"price file {path}: expected an object with a models table")
    prices = _models(data.get("models"), f"price file {path}")
    layered = table.with_prices(prices, f"file {path}")
    taken = data.get("taken")
    return PriceTable(layered.prices, str(taken) if taken else table.taken, layered.sources)


def _models(value: object, where: str) -> dict[str, ModelPrice]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where}: expected a 'models' table of model -> prices")
    out: dict[str, ModelPrice] = {}
    for name, entry in value.items():
        if not isinstance(entry, Mapping):
            raise ConfigurationError(f"{where}: the prices of {name!r} are not a table")
        unknown = sorted(set(entry) - set(_PRICE_FIELDS))
        if unknown or "input" not in entry or "output" not in entry:
            raise ConfigurationError(
                f"{where}: {name!r} needs 'input' and 'output' (and optionally 'cached_input', "
                f"'cache_write'); unknown keys: {unknown or 'none'}",
            )
        values = {k: _dollars(entry[k], f"{where}: {name}.{k}") for k in entry}
        out[str(name)] = ModelPrice(**values)
    return out


def _dollars(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigurationError(f"{where}: {value!r} is not a price")
    try:
        number = float(value)
    except ValueError:
        raise ConfigurationError(f"{where}: {value!r} is not a price") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigurationError(f"{where}: a price must be a finite number >= 0, got {value!r}")
    return number


def parse_price(spec: str) -> tuple[str, ModelPrice]:
    """Parse `MODEL=IN,OUT[,CACHED[,WRITE]]` (dollars per million tokens).

    Examples:
        >>> parse_price("my-model=0.5,1.5")
        ('my-model', ModelPrice(input=0.5, output=1.5, cached_input=None, cache_write=None))

    Raises:
        ConfigurationError: the text is not in that shape.
    """
    model, sep, numbers = spec.partition("=")
    parts = [p.strip() for p in numbers.split(",")] if sep else []
    if not model.strip() or not 2 <= len(parts) <= 4 or "" in parts:
        raise ConfigurationError(
            f"--price {spec!r}: expected MODEL=IN,OUT[,CACHED[,WRITE]] in dollars per million "
            "tokens, e.g. --price gpt-4o-mini=0.15,0.60",
        )
    values = [_dollars(p, f"--price {spec!r}") for p in parts]
    fields = dict(zip(_PRICE_FIELDS, values, strict=False))
    return model.strip(), ModelPrice(**fields)
