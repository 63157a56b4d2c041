"""How statistics print: signed numbers without "-0.0", counts with correct plurals."""

from __future__ import annotations

import math

__all__ = ["format_signed", "plural"]


def format_signed(value: float, digits: int = 1, *, scale: float = 1.0) -> str:
    """`value * scale` with a sign and `digits` decimals; never "-0.0", "n/a" for NaN.

    A value that rounds to zero prints as `+0.0` whatever its sign (a bootstrap bound of
    -0.0004 points is no evidence of a negative effect).

    Examples:
        >>> format_signed(-0.0004, 1, scale=100), format_signed(0.2104, 3)
        ('+0.0', '+0.210')
    """
    if math.isnan(value):
        return "n/a"
    text = f"{value * scale:+.{digits}f}"
    if text.startswith("-") and float(text) == 0.0:
        return "+" + text[1:]
    return text


def plural(count: int, word: str, many: str | None = None) -> str:
    """`"1 sample"`, `"3 samples"`: the count and the word, plural unless the count is 1.

    Examples:
        >>> plural(1, "cluster"), plural(2, "cluster"), plural(0, "match", "matches")
        ('1 cluster', '2 clusters', '0 matches')
    """
    return f"{count} {word if count == 1 else (many or word + 's')}"
