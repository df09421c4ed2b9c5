"""Inline SVG plots of a latency series: a histogram and a percentile curve.

The layout keeps every part in its own band, by construction: the title on top, the
legend in a row below it, the plot area below the legend (every bar, curve and marker
line stays inside it), the x tick labels and the x-axis label under the plot area, and
the y tick labels and the rotated y-axis label to its left. Nothing can overlap the legend
whatever the data. Classes name the parts (``legend``, ``data``, ``tick``, ``axis-label``)
so a browser test can check the geometry.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mcp_tap.gate.health import percentile as percentile  # the gate's nearest rank
from mcp_tap.report.markup import e, ms

PERCENTILES: Final[tuple[tuple[str, float], ...]] = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0))
"""The percentiles the plots mark."""

WIDTH: Final = 620
HEIGHT: Final = 300
LEFT: Final = 64
RIGHT: Final = 16
TITLE_Y: Final = 16
LEGEND_TOP: Final = 26
LEGEND_HEIGHT: Final = 18
TOP: Final = 56
BASE: Final = HEIGHT - 46
LEGEND_STEP: Final = 130
_MAX_TICKS: Final = 8


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps a value range onto pixels, logarithmically when the range is wide."""

    low: float
    high: float
    start: float
    end: float
    log: bool

    @classmethod
    def fit(cls, values: Sequence[float], start: float, end: float) -> Scale:
        """A scale from the smallest to the largest of ``values``."""
        low, high = min(values), max(values)
        log = low > 0 and high / low > 20
        if high <= low:
            low, high = (low * 0.9, low * 1.1) if low > 0 else (0.0, 1.0)
        return cls(low, high, start, end, log)

    def _t(self, value: float) -> float:
        if self.log:
            value = max(value, self.low)
            return (math.log10(value) - math.log10(self.low)) / (
                math.log10(self.high) - math.log10(self.low))
        return (value - self.low) / (self.high - self.low)

    def __call__(self, value: float) -> float:
        return self.start + (self.end - self.start) * min(1.0, max(0.0, self._t(value)))

    def ticks(self, count: int = 5) -> list[float]:
        """Tick values: 1-2-5 steps on a log scale (decades only when dense), else even."""
        if not self.log:
            return [self.low + (self.high - self.low) * i / (count - 1) for i in range(count)]
        values: list[float] = []
        exponent = math.floor(math.log10(self.low))
        while 10 ** exponent <= self.high * 1.0001:
            for step in (1, 2, 5):
                tick = step * 10 ** exponent
                if self.low <= tick <= self.high:
                    values.append(float(tick))
            exponent += 1
        if len(values) > _MAX_TICKS:
            decades = [v for v in values if math.isclose(math.log10(v) % 1, 0, abs_tol=1e-9)]
            values = decades or values[:: math.ceil(len(values) / _MAX_TICKS)]
        return values or [self.low, self.high]

    def edges(self, bins: int) -> list[float]:
        """The edges of ``bins`` equal-width bins (equal in log space on a log scale)."""
        if self.log:
            lo, hi = math.log10(self.low), math.log10(self.high)
            return [10 ** (lo + (hi - lo) * i / bins) for i in range(bins + 1)]
        return [self.low + (self.high - self.low) * i / bins for i in range(bins + 1)]


def tick_label(value: float) -> str:
    """A short tick label."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def _open(css: str, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot {css}" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
        f"<title>{e(title)}</title>",
        f'<text class="plot-title" x="{LEFT}" y="{TITLE_Y}" font-weight="600">{e(title)}</text>',
    ]


def _axis_labels(x_label: str, y_label: str) -> list[str]:
    middle = (TOP + BASE) / 2
    return [
        f'<text class="axis-label" x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{HEIGHT - 8}" '
        f'text-anchor="middle">{e(x_label)}</text>',
        f'<text class="axis-label" x="14" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle:.1f})">{e(y_label)}</text>',
    ]


def _legend(values: Sequence[float], marker: str) -> tuple[list[str], list[float]]:
    """The legend row above the plot area, and the percentile values it names."""
    found = [percentile(values, p) for _, p in PERCENTILES]
    width = LEGEND_STEP * len(PERCENTILES)
    parts = [f'<g class="legend"><rect class="legend-box" x="{LEFT - 4}" y="{LEGEND_TOP}" '
             f'width="{width}" height="{LEGEND_HEIGHT}" rx="3"/>']
    middle = LEGEND_TOP + LEGEND_HEIGHT / 2
    for index, ((name, _), value) in enumerate(zip(PERCENTILES, found, strict=True)):
        x = LEFT + index * LEGEND_STEP
        swatch = (f'<circle cx="{x + 7}" cy="{middle}" r="4"/>' if marker == "dot" else
                  f'<line x1="{x}" x2="{x + 14}" y1="{middle}" y2="{middle}"/>')
        parts.append(f'<g class="entry {name}">{swatch}<text x="{x + 19}" y="{middle + 4}">'
                     f"{e(name)} {e(ms(value))}</text></g>")
    parts.append("</g>")
    return parts, found


def _sample_note(count: int, kept: int) -> str:
    if count > kept:
        return f"{count} exchanges, plotted from a uniform sample of {kept}"
    return f"{count} exchanges"


def histogram_svg(values: Sequence[float], count: int, what: str = "latency") -> str:
    """The distribution of ``values`` (``count`` is the whole series' size)."""
    x = Scale.fit(values, LEFT, WIDTH - RIGHT)
    bins = max(5, min(30, math.ceil(math.sqrt(len(values))) * 2))
    edges = x.edges(bins)
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, bisect.bisect_right(edges, value) - 1))] += 1
    unit = max(1, math.ceil(max(counts) / 4))
    peak = unit * max(1, math.ceil(max(counts) / unit))

    def y(n: float) -> float:
        return BASE - (BASE - TOP) * n / peak

    parts = _open("histogram", f"{what.capitalize()} distribution "
                               f"({_sample_note(count, len(values))})")
    for level in range(0, peak + 1, unit):
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(level):.1f}" '
                     f'y2="{y(level):.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y(level) + 4:.1f}" '
                     f'text-anchor="end">{level}</text>')
    for i, n in enumerate(counts):
        if not n:
            continue
        x0, x1 = x(edges[i]), x(edges[i + 1])
        parts.append(
            f'<rect class="binbar data" x="{x0 + 0.5:.1f}" y="{y(n):.1f}" '
            f'width="{max(1.0, x1 - x0 - 1):.1f}" height="{BASE - y(n):.1f}">'
            f"<title>{e(ms(edges[i]))} \u2013 {e(ms(edges[i + 1]))}: {n}</title></rect>"
        )
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{BASE}" '
                 f'y2="{BASE}"/>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BASE}"/>')
    for tick in x.ticks():
        parts.append(f'<line class="axis" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{BASE}" '
                     f'y2="{BASE + 4}"/>')
        parts.append(f'<text class="tick" x="{x(tick):.1f}" y="{BASE + 16}" '
                     f'text-anchor="middle">{e(tick_label(tick))}</text>')
    sample = "sampled exchanges" if count > len(values) else "exchanges"
    parts += _axis_labels(f"{what} (ms{', log scale' if x.log else ''})", sample)
    legend, found = _legend(values, "line")
    parts += legend
    for (name, _), value in zip(PERCENTILES, found, strict=True):
        px = x(value)
        parts.append(
            f'<g class="pct {name}" data-percentile="{name}" data-ms="{value:.3f}">'
            f'<line class="data" x1="{px:.1f}" x2="{px:.1f}" y1="{TOP}" y2="{BASE}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def percentile_svg(values: Sequence[float], count: int, what: str = "latency") -> str:
    """``values`` sorted against their percentile rank, the marked percentiles as dots.

    The curve is the nearest-rank step function (value *i* of *n* holds from rank
    100·i/n to 100·(i+1)/n), so each marked percentile lies on it.
    """
    ordered = sorted(values)
    y = Scale.fit(ordered, BASE, TOP)

    def x(p: float) -> float:
        return LEFT + (WIDTH - RIGHT - LEFT) * p / 100.0

    parts = _open("percentiles", f"{what.capitalize()} by percentile "
                                 f"({_sample_note(count, len(values))})")
    for tick in y.ticks():
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" '
                     f'y2="{y(tick):.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y(tick) + 4:.1f}" '
                     f'text-anchor="end">{e(tick_label(tick))}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{BASE}" '
                 f'y2="{BASE}"/>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BASE}"/>')
    for mark in (0, 25, 50, 75, 100):
        parts.append(f'<text class="tick" x="{x(mark):.1f}" y="{BASE + 16}" '
                     f'text-anchor="middle">p{mark}</text>')
    n = len(ordered)
    points = " ".join(f"{x(100.0 * (i + end) / n):.1f},{y(v):.1f}"
                      for i, v in enumerate(ordered) for end in (0, 1))
    parts.append(f'<polyline class="curve data" points="{points}"/>')
    parts += _axis_labels("percentile rank",
                          f"{what} (ms{', log scale' if y.log else ''})")
    legend, found = _legend(ordered, "dot")
    parts += legend
    for (name, p), value in zip(PERCENTILES, found, strict=True):
        parts.append(
            f'<g class="pct {name}" data-percentile="{name}" data-ms="{value:.3f}">'
            f'<circle class="data" cx="{x(p):.1f}" cy="{y(value):.1f}" r="4"/></g>')
    parts.append("</svg>")
    return "".join(parts)
