"""Histograms and curves, and any chart as the viewer's API sends it.

The bar charts and the drawing pieces are in `_svg.py` (see its docstring for why the
charts are hand-written SVG and what each mark carries); this module adds the two other
kinds a page draws (`Histogram`, `Curve`), `Chart` (any of the three) and `chart_json`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._svg import (
    AXIS,
    GAP,
    LABEL_W,
    VALUE_W,
    WIDTH,
    BarChart,
    Format,
    clip,
    esc,
    finite,
    fmt,
    legend,
    legend_height,
    num_attr,
    series_class,
    svg_root,
)

__all__ = ["Chart", "Curve", "Histogram", "chart_css", "chart_json"]


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
        x0, x1 = LABEL_W, WIDTH - VALUE_W
        step = (x1 - x0) / max(bins, 1)
        band = 46
        body = []
        y = 4.0
        for index, (name, counts) in enumerate(self.series):
            cls = series_class(index)
            total = sum(counts)
            body.append(
                f'<g class="series {cls}" data-series="{esc(name)}" data-n="{total}">'
                f'<text class="label" x="{x0 - 8}" y="{y + band / 2 + 4:.1f}" '
                f'text-anchor="end">{esc(clip(name))}</text>'
                f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y + band}" y2="{y + band}"/>'
            )
            for i, count in enumerate(counts):
                h = count / top * (band - 4)
                body.append(
                    f'<rect class="bin" x="{x0 + i * step + 1:.1f}" y="{y + band - h:.1f}" '
                    f'width="{max(step - 2, 1):.1f}" height="{h:.1f}" '
                    f'data-low="{num_attr(self.edges[i])}" '
                    f'data-high="{num_attr(self.edges[i + 1])}" '
                    f'data-count="{count}"><title>{esc(name)}, {esc(self._bin_label(i))}: '
                    f"{count:,}</title></rect>"
                )
            body.append(
                f'<text class="value" x="{x1 + 8}" y="{y + band / 2 + 4:.1f}">'
                f"n={total:,} · max bin {max(counts, default=0):,}</text></g>"
            )
            y += band + GAP
        ticks = []
        if bins and self._integer_bins():  # one bin per integer: label each bin's centre
            for i in range(bins):
                ticks.append(
                    f'<text class="tick" x="{x0 + (i + 0.5) * step:.1f}" y="{y + 12:.1f}" '
                    f'text-anchor="middle">{esc(self._bin_label(i))}</text>'
                )
        elif bins:
            for i in sorted({0, bins // 2, bins}):
                ticks.append(
                    f'<text class="tick" x="{x0 + i * step:.1f}" y="{y + 12:.1f}" '
                    f'text-anchor="middle">{esc(fmt(self.edges[i], self.format))}</text>'
                )
        return svg_root(self, y + AXIS, "".join(body) + "".join(ticks))


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
        top = legend_height(names)
        x0, x1 = LABEL_W, WIDTH - VALUE_W
        height = 160
        y0, y1 = top + 8, top + height

        def px(i: int) -> float:
            return x0 + (x1 - x0) * (i / max(len(self.xs) - 1, 1))

        def py(v: float) -> float:
            return y1 - min(max(v, 0.0), 1.0) * (y1 - y0)

        body = [legend(names)]
        for v in (0.0, 0.5, 1.0):
            body.append(
                f'<line class="grid" x1="{x0}" x2="{x1}" y1="{py(v):.1f}" y2="{py(v):.1f}"/>'
                f'<text class="tick" x="{x0 - 8}" y="{py(v) + 4:.1f}" text-anchor="end">'
                f"{fmt(v, self.format)}</text>"
            )
        for index, (name, ys) in enumerate(self.series):
            cls = series_class(index)
            points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(ys) if finite(v))
            body.append(f'<g class="series {cls}" data-series="{esc(name)}">')
            body.append(f'<polyline class="line" points="{points}"/>')
            for i, (k, v) in enumerate(zip(self.xs, ys, strict=True)):
                if finite(v):
                    body.append(
                        f'<circle class="dot mark" cx="{px(i):.1f}" cy="{py(v):.1f}" r="3.5" '
                        f'data-x="{k}" data-value="{num_attr(v)}"><title>{esc(name)}, '
                        f"{esc(self.x_label)}={k}: {fmt(v, self.format)}</title></circle>"
                    )
            # The value at the last x, beside the line: one line only (several would
            # overlap where the lines meet; the legend and the table name them).
            last = ys[-1] if ys else math.nan
            if len(self.series) == 1 and finite(last):
                body.append(
                    f'<text class="value" x="{x1 + 8}" y="{py(last) + 4:.1f}">'
                    f"{fmt(last, self.format)}</text>"
                )
            body.append("</g>")
        for i, k in enumerate(self.xs):
            body.append(
                f'<text class="tick" x="{px(i):.1f}" y="{y1 + 14}" text-anchor="middle">'
                f"{esc(self.x_label)}={k}</text>"
            )
        return svg_root(self, y1 + AXIS, "".join(body))


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
