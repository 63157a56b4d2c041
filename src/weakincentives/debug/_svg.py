"""Charts as hand-written SVG: one renderer for the HTML report and the viewer.

A chart is a frozen value holding numbers a page has already computed (a `Summary`, an
experiment's statistics, a comparison); `svg()` draws it and `table()` gives the same
numbers as rows of text, the fallback shown beside every chart for screen readers and for
copying. Nothing here computes a statistic, except the bin counts of `Histogram.of`.

This module holds the bar charts (`BarChart` of `Mark`s) and the drawing pieces shared
with `_charts.py` (histograms, curves). Why hand-written: the three chart kinds the pages
need (interval bars, histograms and a line of points) fit in two small modules, weigh
nothing on the page and need no script, so the
HTML report stays one file without JavaScript and the viewer fetches nothing from the
network. Colours come from CSS classes (`static/charts.css`), so both pages theme them
light and dark, and the viewer's Content-Security-Policy (no inline styles) holds.

Every drawn mark carries its numbers as `data-*` attributes (`data-series`,
`data-label`, `data-value`, `data-low`, `data-high`, `data-count`), and every chart an
`<title>` and a text label per mark: what a browser test reads back and a screen reader
speaks. Text is escaped; a label cannot inject markup.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from weakincentives.evals import stats
from weakincentives.evals.report import format_usd

__all__ = [
    "AXIS",
    "GAP",
    "LABEL_W",
    "MAX_LABEL",
    "ROW",
    "SERIES_CLASSES",
    "VALUE_W",
    "WIDTH",
    "BarChart",
    "Format",
    "Mark",
    "clip",
    "esc",
    "finite",
    "fmt",
    "legend",
    "legend_height",
    "num_attr",
    "series_class",
    "series_names",
    "svg_root",
]

Format = Literal["pct", "pp", "count", "num", "ms", "usd"]
"""How a chart's values print: percent, signed percentage points ("pts"), integer, number,
milliseconds, dollars."""

WIDTH = 720
LABEL_W = 190
VALUE_W = 150
ROW = 20
GAP = 6
AXIS = 22
SERIES_CLASSES = 8
MAX_LABEL = 26


def fmt(value: float | None, kind: Format) -> str:
    """`value` as the chart prints it ("n/a" when unknown)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if kind == "pct":
        return f"{value * 100:.1f}%"
    if kind == "pp":
        # Points, printed as every other view prints them ("+2.5 pts", never "-0.0").
        return stats.format_signed(value, scale=100) + " pts"
    if kind == "count":
        return f"{value:,.0f}"
    if kind == "ms":
        return f"{value:,.0f} ms" if abs(value) >= 10 else f"{value:.1f} ms"
    if kind == "usd":
        return format_usd(value)  # as the report's cost lines print dollars
    return f"{value:.3g}" if abs(value) >= 1000 or 0 < abs(value) < 0.001 else f"{value:.3f}"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def num_attr(value: float | None) -> str:
    """A number for a `data-*` attribute: full precision, empty when unknown."""
    return "" if value is None or not math.isfinite(value) else repr(float(value))


def clip(text: str, width: int = MAX_LABEL) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def series_class(index: int) -> str:
    return f"s{index % SERIES_CLASSES}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    """One bar of a `BarChart`: a value, optionally with its interval and n."""

    label: str
    """Row label: an experiment, a check, a slice value."""
    value: float
    """The value drawn."""
    series: str = ""
    """The series (colour) the mark belongs to, e.g. the experiment of a slice."""
    low: float | None = None
    """Lower end of the value's interval, if any."""
    high: float | None = None
    """Upper end of the value's interval, if any."""
    n: int | None = None
    """Results behind the value, if known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BarChart:
    """Horizontal bars (or dots, for signed values) with interval whiskers.

    Marks with the same `label` are drawn together, one row per series.
    """

    id: str
    """Element id of the chart (unique on a page)."""
    title: str
    """Heading and accessible name."""
    marks: tuple[Mark, ...]
    """What to draw, in order."""
    format: Format = "pct"
    """How values print; `pp` draws dots around a zero line."""
    note: str = ""
    """A sentence under the chart saying what the numbers are."""
    series_order: tuple[str, ...] = ()
    """Every series of the page, in order (the experiments): each keeps its colour in
    every chart and its place among a label's rows, even where some series have no mark.
    Empty: the order in which `marks` first name them."""

    kind: Literal["bars"] = field(default="bars", init=False)

    def ordered(self) -> tuple[list[Mark], list[str]]:
        """The marks, a label's rows in series order, and every series in colour order."""
        names = list(dict.fromkeys([*self.series_order, *series_names(self.marks)]))
        labels = list(dict.fromkeys(m.label for m in self.marks))
        rank = {name: i for i, name in enumerate(names)}
        place = {label: i for i, label in enumerate(labels)}
        marks = sorted(self.marks, key=lambda m: (place[m.label], rank.get(m.series, -1)))
        return marks, names

    def domain(self) -> tuple[float, float]:
        """The value axis: 0-100% for rates, symmetric around 0 for `pp`, else 0-max."""
        ends = [v for m in self.marks for v in (m.value, m.low, m.high) if v is not None]
        ends = [v for v in ends if math.isfinite(v)]
        if self.format == "pct":
            return 0.0, 1.0
        if self.format == "pp":
            reach = max([abs(v) for v in ends] + [0.05])
            return -_nice(reach), _nice(reach)
        top = max([*ends, 0.0])
        if self.format == "count":  # whole-number ticks: a multiple of the 4 steps
            return 0.0, float(max(4, math.ceil(_nice(top) / 4) * 4))
        return 0.0, _nice(top) if top > 0 else 1.0

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Headers and rows of text: the numbers the chart draws."""
        series = any(m.series for m in self.marks)
        interval = any(m.low is not None for m in self.marks)
        head = ["", *(["Series"] if series else []), "Value"]
        head += ["95% interval"] if interval else []
        head += ["n"] if any(m.n is not None for m in self.marks) else []
        rows = []
        for m in self.ordered()[0]:
            row = [m.label, *([m.series] if series else []), fmt(m.value, self.format)]
            if interval:
                row.append(_interval_text(m, self.format))
            if len(head) > len(row):
                row.append("" if m.n is None else f"{m.n:,}")
            rows.append(row)
        return head, rows

    def svg(self) -> str:
        """The chart as an `<svg>` element."""
        low, high = self.domain()
        x0, x1 = LABEL_W, WIDTH - VALUE_W
        span = high - low

        def x(value: float) -> float:
            return x0 + (min(max(value, low), high) - low) / span * (x1 - x0)

        marks, names = self.ordered()
        drawn = set(series_names(marks))
        key = legend(names, shown=drawn)
        y = legend_height(names)
        body: list[str] = []
        previous = None
        for m in marks:
            if previous is not None and m.label != previous:
                y += GAP
            body.append(self._mark(m, y, x, names, first=m.label != previous))
            previous = m.label
            y += ROW
        height = y + AXIS
        axis = _axis(self.format, low, high, x, top=legend_height(names), bottom=y)
        return svg_root(self, height, key + axis + "".join(body))

    def _mark(self, m: Mark, y: float, x: Any, names: Sequence[str], *, first: bool) -> str:
        cls = series_class(names.index(m.series)) if m.series in names else "s0"
        mid = y + ROW / 2
        text = f"{m.label}{f' · {m.series}' if m.series else ''}: {fmt(m.value, self.format)}"
        if m.low is not None:
            text += f" {_interval_text(m, self.format)}"
        if m.n is not None:
            text += f", n={m.n:,}"
        parts = [
            f'<g class="mark {cls}" data-label="{esc(m.label)}" data-series="{esc(m.series)}" '
            f'data-value="{num_attr(m.value)}" data-low="{num_attr(m.low)}" '
            f'data-high="{num_attr(m.high)}"'
            f"{'' if m.n is None else f' data-n={_q(m.n)}'}><title>{esc(text)}</title>"
        ]
        if first:
            parts.append(
                f'<text class="label" x="{LABEL_W - 8}" y="{mid + 4:.1f}" '
                f'text-anchor="end">{esc(clip(m.label))}</text>'
            )
        if finite(m.value):
            if self.format == "pp":
                parts.append(f'<circle class="dot" cx="{x(m.value):.1f}" cy="{mid:.1f}" r="4"/>')
            else:
                base = x(max(self.domain()[0], 0.0))
                left, right = sorted((base, x(m.value)))
                parts.append(
                    f'<rect class="bar" x="{left:.1f}" y="{y + 4:.1f}" '
                    f'width="{max(right - left, 0.5):.1f}" height="{ROW - 8}"/>'
                )
        if finite(m.low) and finite(m.high):
            assert m.low is not None and m.high is not None
            a, b = x(m.low), x(m.high)
            parts.append(
                f'<path class="whisker" d="M{a:.1f} {mid:.1f}H{b:.1f}M{a:.1f} {mid - 5:.1f}'
                f'V{mid + 5:.1f}M{b:.1f} {mid - 5:.1f}V{mid + 5:.1f}"/>'
            )
        value = fmt(m.value, self.format)
        if m.low is not None:
            value += f" {_interval_text(m, self.format, short=True)}"
        parts.append(
            f'<text class="value" x="{WIDTH - VALUE_W + 8}" y="{mid + 4:.1f}">{esc(value)}</text>'
        )
        return "".join(parts) + "</g>"


# -- pieces ---------------------------------------------------------------------------


def svg_root(chart: Any, height: float, body: str) -> str:
    """The `<svg>` element of `chart` (anything with `id`, `kind` and `title`)."""
    title_id = f"{chart.id}-title"
    return (
        f'<svg class="wc {chart.kind}" id="{esc(chart.id)}-svg" role="img" '
        f'aria-labelledby="{esc(title_id)}" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}">'
        f'<title id="{esc(title_id)}">{esc(chart.title)}</title>{body}</svg>'
    )


def series_names(marks: Iterable[Mark]) -> list[str]:
    return list(dict.fromkeys(m.series for m in marks if m.series))


def legend_height(names: Sequence[str]) -> float:
    return 22.0 if len(names) > 1 else 4.0


def legend(names: Sequence[str], *, shown: Iterable[str] | None = None) -> str:
    """A swatch per series (colour by its place in `names`), those in `shown` only."""
    if len(names) < 2:
        return ""
    keep = set(names if shown is None else shown)
    parts, x = [], float(LABEL_W)
    for index, name in enumerate(names):
        if name not in keep:
            continue
        label = clip(name, 18)
        parts.append(
            f'<g class="legend {series_class(index)}"><rect class="swatch" x="{x:.0f}" y="4" '
            f'width="10" height="10"/><text class="tick" x="{x + 14:.0f}" y="13">'
            f"{esc(label)}</text></g>"
        )
        x += 24 + 7 * len(label)
    return "".join(parts)


def _axis(kind: Format, low: float, high: float, x: Any, *, top: float, bottom: float) -> str:
    steps = 4
    parts = []
    for i in range(steps + 1):
        v = low + (high - low) * i / steps
        cls = "zero" if v == 0 and kind == "pp" else "grid"
        parts.append(
            f'<line class="{cls}" x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top}" y2="{bottom}"/>'
            f'<text class="tick" x="{x(v):.1f}" y="{bottom + 14}" text-anchor="middle">'
            f"{esc(_tick(v, kind))}</text>"
        )
    return "".join(parts)


def _tick(v: float, kind: Format) -> str:
    if kind == "pct":
        return f"{v * 100:.0f}%"
    if kind == "pp":
        return f"{v * 100:+.0f}" if v else "0"
    return fmt(v, kind)


def _interval_text(m: Mark, kind: Format, *, short: bool = False) -> str:
    if m.low is None or m.high is None or not (finite(m.low) and finite(m.high)):
        return "[n/a]"
    if short and kind in ("pct", "pp"):
        return f"[{m.low * 100:.1f}, {m.high * 100:.1f}]"
    return f"[{fmt(m.low, kind)}, {fmt(m.high, kind)}]"


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _nice(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above `value`."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _q(value: object) -> str:
    return f'"{esc(value)}"'
