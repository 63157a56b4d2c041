"""Charts as hand-written SVG: one renderer for the HTML report and the viewer.

A chart is a frozen value holding numbers a page has already computed (a `Summary`, an
experiment's statistics, a comparison); `svg()` draws it and `table()` gives the same
numbers as rows of text, the fallback shown beside every chart for screen readers and for
copying. Nothing here computes a statistic, except the bin counts of `Histogram.of`.

Why hand-written: the three chart kinds the pages need (interval bars, histograms and a
line of points) fit in this module, weigh nothing on the page and need no script, so the
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
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BarChart",
    "Chart",
    "Curve",
    "Format",
    "Histogram",
    "Mark",
    "chart_css",
    "chart_json",
    "fmt",
]

Format = Literal["pct", "pp", "count", "num", "ms", "usd"]
"""How a chart's values print: percent, signed percentage points, integer, number,
milliseconds, dollars."""

_WIDTH = 720
_LABEL_W = 190
_VALUE_W = 150
_ROW = 20
_GAP = 6
_AXIS = 22
_SERIES_CLASSES = 8
_MAX_LABEL = 26


def fmt(value: float | None, kind: Format) -> str:
    """`value` as the chart prints it ("n/a" when unknown)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if kind == "pct":
        return f"{value * 100:.1f}%"
    if kind == "pp":
        text = f"{value * 100:+.1f}"
        return ("+0.0" if text == "-0.0" else text) + " pp"
    if kind == "count":
        return f"{value:,.0f}"
    if kind == "ms":
        return f"{value:,.0f} ms" if abs(value) >= 10 else f"{value:.1f} ms"
    if kind == "usd":
        return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"
    return f"{value:.3g}" if abs(value) >= 1000 or 0 < abs(value) < 0.001 else f"{value:.3f}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(value: float | None) -> str:
    """A number for a `data-*` attribute: full precision, empty when unknown."""
    return "" if value is None or not math.isfinite(value) else repr(float(value))


def _clip(text: str, width: int = _MAX_LABEL) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _series_class(index: int) -> str:
    return f"s{index % _SERIES_CLASSES}"


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

    kind: Literal["bars"] = field(default="bars", init=False)

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
        for m in self.marks:
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
        x0, x1 = _LABEL_W, _WIDTH - _VALUE_W
        span = high - low

        def x(value: float) -> float:
            return x0 + (min(max(value, low), high) - low) / span * (x1 - x0)

        names = _series_names(self.marks)
        legend = _legend(names)
        y = _legend_height(names)
        body: list[str] = []
        previous = None
        for m in self.marks:
            if previous is not None and m.label != previous:
                y += _GAP
            body.append(self._mark(m, y, x, names, first=m.label != previous))
            previous = m.label
            y += _ROW
        height = y + _AXIS
        axis = _axis(self.format, low, high, x, top=_legend_height(names), bottom=y)
        return _svg_root(self, height, legend + axis + "".join(body))

    def _mark(self, m: Mark, y: float, x: Any, names: Sequence[str], *, first: bool) -> str:
        cls = _series_class(names.index(m.series)) if m.series in names else "s0"
        mid = y + _ROW / 2
        text = f"{m.label}{f' · {m.series}' if m.series else ''}: {fmt(m.value, self.format)}"
        if m.low is not None:
            text += f" {_interval_text(m, self.format)}"
        if m.n is not None:
            text += f", n={m.n:,}"
        parts = [
            f'<g class="mark {cls}" data-label="{_e(m.label)}" data-series="{_e(m.series)}" '
            f'data-value="{_num(m.value)}" data-low="{_num(m.low)}" data-high="{_num(m.high)}"'
            f"{'' if m.n is None else f' data-n={_q(m.n)}'}><title>{_e(text)}</title>"
        ]
        if first:
            parts.append(
                f'<text class="label" x="{_LABEL_W - 8}" y="{mid + 4:.1f}" '
                f'text-anchor="end">{_e(_clip(m.label))}</text>'
            )
        if _finite(m.value):
            if self.format == "pp":
                parts.append(f'<circle class="dot" cx="{x(m.value):.1f}" cy="{mid:.1f}" r="4"/>')
            else:
                base = x(max(self.domain()[0], 0.0))
                left, right = sorted((base, x(m.value)))
                parts.append(
                    f'<rect class="bar" x="{left:.1f}" y="{y + 4:.1f}" '
                    f'width="{max(right - left, 0.5):.1f}" height="{_ROW - 8}"/>'
                )
        if _finite(m.low) and _finite(m.high):
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
            f'<text class="value" x="{_WIDTH - _VALUE_W + 8}" y="{mid + 4:.1f}">{_e(value)}</text>'
        )
        return "".join(parts) + "</g>"


@dataclass(frozen=True, slots=True, kw_only=True)
class Histogram:
    """Counts of values in shared bins, one small row of bars per series."""

    id: str
    """Element id of the chart."""
    title: str
    """Heading and accessible name."""
    edges: tuple[float, ...]
    """Bin edges, `len(counts) + 1` of them; the last bin includes its upper edge."""
    series: tuple[tuple[str, tuple[int, ...]], ...]
    """`(name, counts per bin)` for each series."""
    format: Format = "num"
    """How the edges print."""
    note: str = ""
    """A sentence under the chart."""

    kind: Literal["histogram"] = field(default="histogram", init=False)

    @classmethod
    def of(
        cls,
        values: Mapping[str, Sequence[float]],
        *,
        id: str,
        title: str,
        format: Format = "num",
        bins: int = 12,
        note: str = "",
    ) -> Histogram:
        """Bin each series' `values` on shared edges (numpy's, over all series at once).

        When the values take at most `bins` distinct integers (a 0/1 score, a tool-call
        count) each integer gets its own bin, so no bar straddles two values.
        """
        import numpy as np

        arrays = [np.asarray(vs, dtype=float) for vs in values.values()]
        every = np.concatenate(arrays) if arrays else np.empty(0)
        every = every[np.isfinite(every)]
        if every.size == 0:
            return cls(id=id, title=title, edges=(), series=(), format=format, note=note)
        lo, hi = float(every.min()), float(every.max())
        whole = bool(np.all(every == np.round(every)))
        if whole and hi - lo + 1 <= bins:
            edges = np.arange(lo - 0.5, hi + 1.0, 1.0)
        elif lo == hi:
            edges = np.array([lo - 0.5, hi + 0.5])
        else:
            edges = np.histogram_bin_edges(every, bins=bins)
        series = tuple(
            (name, tuple(int(c) for c in np.histogram(array, bins=edges)[0]))
            for name, array in zip(values, arrays, strict=True)
        )
        return cls(
            id=id, title=title, edges=tuple(float(e) for e in edges), series=series,
            format=format, note=note,
        )  # fmt: skip

    def table(self) -> tuple[list[str], list[list[str]]]:
        """One row per bin: its range, then the count of each series."""
        head = ["Bin", *(name for name, _ in self.series)]
        rows = []
        for i in range(len(self.edges) - 1):
            label = self._bin_label(i)
            rows.append([label, *(f"{counts[i]:,}" for _, counts in self.series)])
        return head, rows

    def _integer_bins(self) -> bool:
        return len(self.edges) > 1 and all(
            b - a == 1.0 and (a + 0.5).is_integer() for a, b in itertools.pairwise(self.edges)
        )

    def _bin_label(self, i: int) -> str:
        a, b = self.edges[i], self.edges[i + 1]
        if b - a == 1.0 and (a + 0.5).is_integer():
            return fmt(a + 0.5, self.format if self.format != "num" else "count")
        return f"{fmt(a, self.format)} to {fmt(b, self.format)}"

    def svg(self) -> str:
        """Small multiples: one row of bars per series, on one count scale."""
        bins = len(self.edges) - 1
        top = max([c for _, counts in self.series for c in counts] + [1])
        x0, x1 = _LABEL_W, _WIDTH - _VALUE_W
        step = (x1 - x0) / max(bins, 1)
        band = 46
        body = []
        y = 4.0
        for index, (name, counts) in enumerate(self.series):
            cls = _series_class(index)
            total = sum(counts)
            body.append(
                f'<g class="series {cls}" data-series="{_e(name)}" data-n="{total}">'
                f'<text class="label" x="{x0 - 8}" y="{y + band / 2 + 4:.1f}" '
                f'text-anchor="end">{_e(_clip(name))}</text>'
                f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y + band}" y2="{y + band}"/>'
            )
            for i, count in enumerate(counts):
                h = count / top * (band - 4)
                body.append(
                    f'<rect class="bin" x="{x0 + i * step + 1:.1f}" y="{y + band - h:.1f}" '
                    f'width="{max(step - 2, 1):.1f}" height="{h:.1f}" '
                    f'data-low="{_num(self.edges[i])}" data-high="{_num(self.edges[i + 1])}" '
                    f'data-count="{count}"><title>{_e(name)}, {_e(self._bin_label(i))}: '
                    f"{count:,}</title></rect>"
                )
            body.append(
                f'<text class="value" x="{x1 + 8}" y="{y + band / 2 + 4:.1f}">'
                f"n={total:,} · max bin {max(counts, default=0):,}</text></g>"
            )
            y += band + _GAP
        ticks = []
        if bins and self._integer_bins():  # one bin per integer: label each bin's centre
            for i in range(bins):
                ticks.append(
                    f'<text class="tick" x="{x0 + (i + 0.5) * step:.1f}" y="{y + 12:.1f}" '
                    f'text-anchor="middle">{_e(self._bin_label(i))}</text>'
                )
        elif bins:
            for i in sorted({0, bins // 2, bins}):
                ticks.append(
                    f'<text class="tick" x="{x0 + i * step:.1f}" y="{y + 12:.1f}" '
                    f'text-anchor="middle">{_e(fmt(self.edges[i], self.format))}</text>'
                )
        return _svg_root(self, y + _AXIS, "".join(body) + "".join(ticks))


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """One line of points per series over integer x values (pass@k over k)."""

    id: str
    """Element id of the chart."""
    title: str
    """Heading and accessible name."""
    xs: tuple[int, ...]
    """The x values (e.g. k = 1..epochs)."""
    series: tuple[tuple[str, tuple[float, ...]], ...]
    """`(name, y for each x)` for each series."""
    x_label: str = "k"
    """What x is."""
    format: Format = "pct"
    """How the y values print."""
    note: str = ""
    """A sentence under the chart."""

    kind: Literal["curve"] = field(default="curve", init=False)

    def table(self) -> tuple[list[str], list[list[str]]]:
        """One row per x value, one column per series."""
        head = [self.x_label, *(name for name, _ in self.series)]
        rows = [
            [str(k), *(fmt(ys[i], self.format) for _, ys in self.series)]
            for i, k in enumerate(self.xs)
        ]
        return head, rows

    def svg(self) -> str:
        """Lines with a point (and its value as text on hover) per x."""
        names = [name for name, _ in self.series]
        top = _legend_height(names)
        x0, x1 = _LABEL_W, _WIDTH - _VALUE_W
        height = 160
        y0, y1 = top + 8, top + height

        def px(i: int) -> float:
            return x0 + (x1 - x0) * (i / max(len(self.xs) - 1, 1))

        def py(v: float) -> float:
            return y1 - min(max(v, 0.0), 1.0) * (y1 - y0)

        body = [_legend(names)]
        for v in (0.0, 0.5, 1.0):
            body.append(
                f'<line class="grid" x1="{x0}" x2="{x1}" y1="{py(v):.1f}" y2="{py(v):.1f}"/>'
                f'<text class="tick" x="{x0 - 8}" y="{py(v) + 4:.1f}" text-anchor="end">'
                f"{fmt(v, self.format)}</text>"
            )
        for index, (name, ys) in enumerate(self.series):
            cls = _series_class(index)
            points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(ys) if _finite(v))
            body.append(f'<g class="series {cls}" data-series="{_e(name)}">')
            body.append(f'<polyline class="line" points="{points}"/>')
            for i, (k, v) in enumerate(zip(self.xs, ys, strict=True)):
                if _finite(v):
                    body.append(
                        f'<circle class="dot mark" cx="{px(i):.1f}" cy="{py(v):.1f}" r="3.5" '
                        f'data-x="{k}" data-value="{_num(v)}"><title>{_e(name)}, '
                        f"{_e(self.x_label)}={k}: {fmt(v, self.format)}</title></circle>"
                    )
            last = ys[-1] if ys else math.nan
            body.append(
                f'<text class="value" x="{x1 + 8}" y="{py(last) + 4 if _finite(last) else y1:.1f}">'
                f"{_e(_clip(name, 14))} {fmt(last, self.format)}</text></g>"
            )
        for i, k in enumerate(self.xs):
            body.append(
                f'<text class="tick" x="{px(i):.1f}" y="{y1 + 14}" text-anchor="middle">'
                f"{_e(self.x_label)}={k}</text>"
            )
        return _svg_root(self, y1 + _AXIS, "".join(body))


Chart = BarChart | Histogram | Curve
"""Any chart."""


def chart_json(chart: Chart) -> dict[str, Any]:
    """A chart as the viewer's API sends it: drawn SVG, the fallback table, the note."""
    head, rows = chart.table()
    return {
        "id": chart.id,
        "kind": chart.kind,
        "title": chart.title,
        "note": chart.note,
        "svg": chart.svg(),
        "headers": head,
        "rows": rows,
    }


def chart_css() -> str:
    """The charts' stylesheet (`static/charts.css`), for pages that inline their CSS."""
    from importlib import resources

    return resources.files("weakincentives.debug").joinpath("static/charts.css").read_text()


# -- pieces ---------------------------------------------------------------------------


def _svg_root(chart: Chart, height: float, body: str) -> str:
    title_id = f"{chart.id}-title"
    return (
        f'<svg class="wc {chart.kind}" id="{_e(chart.id)}-svg" role="img" '
        f'aria-labelledby="{_e(title_id)}" viewBox="0 0 {_WIDTH} {height:.0f}" '
        f'width="{_WIDTH}" height="{height:.0f}">'
        f'<title id="{_e(title_id)}">{_e(chart.title)}</title>{body}</svg>'
    )


def _series_names(marks: Iterable[Mark]) -> list[str]:
    return list(dict.fromkeys(m.series for m in marks if m.series))


def _legend_height(names: Sequence[str]) -> float:
    return 22.0 if len(names) > 1 else 4.0


def _legend(names: Sequence[str]) -> str:
    if len(names) < 2:
        return ""
    parts, x = [], float(_LABEL_W)
    for index, name in enumerate(names):
        label = _clip(name, 18)
        parts.append(
            f'<g class="legend {_series_class(index)}"><rect class="swatch" x="{x:.0f}" y="4" '
            f'width="10" height="10"/><text class="tick" x="{x + 14:.0f}" y="13">'
            f"{_e(label)}</text></g>"
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
            f"{_e(_tick(v, kind))}</text>"
        )
    return "".join(parts)


def _tick(v: float, kind: Format) -> str:
    if kind == "pct":
        return f"{v * 100:.0f}%"
    if kind == "pp":
        return f"{v * 100:+.0f}" if v else "0"
    return fmt(v, kind)


def _interval_text(m: Mark, kind: Format, *, short: bool = False) -> str:
    if m.low is None or m.high is None or not (_finite(m.low) and _finite(m.high)):
        return "[n/a]"
    if short and kind in ("pct", "pp"):
        return f"[{m.low * 100:.1f}, {m.high * 100:.1f}]"
    return f"[{fmt(m.low, kind)}, {fmt(m.high, kind)}]"


def _finite(value: float | None) -> bool:
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
    return f'"{_e(value)}"'
