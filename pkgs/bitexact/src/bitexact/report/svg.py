"""Inline SVG scatter plots with axes, ticks and labels (no scripts, no network: a report is one file)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

W, H = 640, 340
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 16, 56
PLOT_W, PLOT_H = W - LEFT - RIGHT, H - TOP - BOTTOM
TICK = 5
COLOURS = {"token-diverged": "#c0392b", "logprob-diverged": "#2c7fb8", "measured": "#2c7fb8"}


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # the tooltip
    kind: str  # a CSS class: what the point is (its colour comes from the legend's class)


def nice_step(span: float, target: int = 8) -> float:
    """1, 2 or 5 times a power of ten, giving about `target` intervals over `span`."""
    if span <= 0:
        return 1.0
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def ticks(maximum: float, integer: bool) -> list[float]:
    """0, nice steps, and the maximum itself as the last tick (the axis ends there)."""
    step = nice_step(maximum)
    if integer:
        step = max(1.0, math.ceil(step))
    values = [i * step for i in range(int(maximum // step) + 1)]
    if values and maximum - values[-1] < 0.5 * step and len(values) > 1:
        values.pop()  # too close to the end tick to label both
    if not values or values[-1] != maximum:
        values.append(maximum)
    return values


def _label(value: float, integer: bool) -> str:
    return str(int(round(value))) if integer else f"{value:.4g}"


def x_of(value: float, x_max: float) -> float:
    return LEFT + PLOT_W * (value / x_max if x_max else 0.0)


def y_of(value: float, y_max: float) -> float:
    return TOP + PLOT_H - PLOT_H * (value / y_max if y_max else 0.0)


def x_tick(x: float, label: str) -> list[str]:
    """A tick under the x axis at pixel `x`, with its label."""
    bottom = TOP + PLOT_H
    return [
        f'<line class="tick" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + TICK}" stroke="black"/>',
        f'<text class="tick-label" x="{x:.1f}" y="{bottom + TICK + 13}" text-anchor="middle" '
        f'font-size="11">{label}</text>',
    ]


def y_tick(y: float, label: str) -> list[str]:
    """A tick left of the y axis at pixel `y`, with its label."""
    return [
        f'<line class="tick" x1="{LEFT - TICK}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="black"/>',
        f'<text class="tick-label" x="{LEFT - TICK - 3}" y="{y + 4:.1f}" text-anchor="end" '
        f'font-size="11">{label}</text>',
    ]


def axis_labels(x_label: str, y_label: str) -> list[str]:
    """The x axis's label under it and the y axis's, turned, left of it."""
    mid = TOP + PLOT_H / 2
    return [
        f'<text class="axis-label" x="{LEFT + PLOT_W / 2}" y="{H - 10}" text-anchor="middle" font-size="13">'
        f"{html.escape(x_label)}</text>",
        f'<text class="axis-label" x="16" y="{mid}" transform="rotate(-90 16 {mid})" text-anchor="middle" '
        f'font-size="13">{html.escape(y_label)}</text>',
    ]


def scatter(
    points: list[Point],
    *,
    x_max: float,
    y_max: float,
    x_label: str,
    y_label: str,
    x_integer: bool = True,
    y_integer: bool = False,
) -> str:
    """x runs from 0 to x_max and y from 0 to y_max, whatever the points span."""
    x_max = x_max or 1
    y_max = y_max or 1.0
    aria = html.escape(f"{y_label} against {x_label}")
    bottom = TOP + PLOT_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" role="img" aria-label="{aria}">',
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" '
        'fill="none" stroke="#ddd"/>',
        '<g class="x-axis">',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + PLOT_W}" y2="{bottom}" stroke="black"/>',
    ]
    for value in ticks(x_max, x_integer):
        out += x_tick(x_of(value, x_max), _label(value, x_integer))
    x_text, y_text = axis_labels(x_label, y_label)
    out += [
        x_text,
        "</g>",
        '<g class="y-axis">',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + PLOT_H}" stroke="black"/>',
    ]
    for value in ticks(y_max, y_integer):
        out += y_tick(y_of(value, y_max), _label(value, y_integer))
    out += [y_text, "</g>", '<g class="points">']
    # Points that land on the same pixel are drawn once, larger, with their count: a plot never hides how
    # many divergences share a position and margin.
    groups: dict[tuple[str, float, float], list[Point]] = {}
    for p in points:
        groups.setdefault((p.kind, round(x_of(p.x, x_max), 1), round(y_of(p.y, y_max), 1)), []).append(p)
    for (kind, cx, cy), same in groups.items():
        colour = COLOURS.get(kind, "#555")
        radius = 5 if len(same) == 1 else 7
        title = html.escape("\n".join(p.label for p in same))
        count = f" coincident-{len(same)}" if len(same) > 1 else ""
        out.append(
            f'<circle class="point {kind}{count}" cx="{cx:.1f}" cy="{cy:.1f}" r="{radius}" fill="{colour}">'
            f"<title>{title}</title></circle>"
        )
        if len(same) > 1:
            out.append(
                f'<text class="count" x="{cx + 9:.1f}" y="{cy - 6:.1f}" font-size="11" fill="{colour}">'
                f"&#215;{len(same)}</text>"
            )
    out += ["</g>", "</svg>"]
    return "\n".join(out)


@dataclass(frozen=True)
class Series:
    name: str
    values: dict[int, float]  # x category (e.g. prompt tokens) -> y
    colour: str
    hollow: bool = False  # rings: figures quoted from elsewhere


def series_plot(series: list[Series], *, x_label: str, y_label: str) -> str:
    """Lines over categorical x (each distinct x an even step, labelled with its value), y from 0; each
    series named once, at its right end, labels pushed apart so that they never overlap."""
    xs = sorted({x for s in series for x in s.values})
    top = max((v for s in series for v in s.values.values()), default=0.0) * 1.1 or 1.0
    right = 200  # room for the series names
    width = W + right - RIGHT
    step = PLOT_W / max(len(xs), 1)

    def px(x: int) -> float:
        return LEFT + step * (xs.index(x) + 0.5)

    bottom = TOP + PLOT_H
    aria = html.escape(f"{y_label} against {x_label}")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot series" width="{width}" height="{H}" '
        f'viewBox="0 0 {width} {H}" role="img" aria-label="{aria}">',
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" '
        'stroke="#ddd"/>',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + PLOT_W}" y2="{bottom}" stroke="black"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>',
    ]
    out.append('<g class="x-axis">')
    for x in xs:
        out += x_tick(px(x), str(x))
    out += ["</g>", '<g class="y-axis">']
    for value in ticks(top, False):
        out += y_tick(y_of(value, top), _label(value, False))
    out.append("</g>")
    out += axis_labels(x_label, y_label)
    ends: list[tuple[float, Series]] = []
    for s in series:
        points = [(px(x), y_of(v, top), x, v) for x, v in sorted(s.values.items())]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
            dash = ' stroke-dasharray="4 3"' if s.hollow else ""
            out.append(
                f'<polyline fill="none" stroke="{s.colour}" stroke-width="1.5"{dash} points="{path}"/>'
            )
        for x, y, cat, v in points:
            fill = f'fill="white" stroke="{s.colour}" stroke-width="2"' if s.hollow else f'fill="{s.colour}"'
            out.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="4.5" {fill}>'
                f"<title>{html.escape(f'{s.name}: {v:g} at {cat}')}</title></circle>"
            )
        if points:
            ends.append((points[-1][1], s))
    # names at the right edge, in the order of their last points, at least 13 px apart
    placed: list[float] = []
    for y, _ in sorted(ends, key=lambda e: e[0]):
        placed.append(max(y, placed[-1] + 13) if placed else y)
    for (_, s), y in zip(sorted(ends, key=lambda e: e[0]), placed, strict=True):
        out.append(
            f'<text class="series-name" x="{LEFT + PLOT_W + 8}" y="{y + 4:.1f}" font-size="12" '
            f'fill="{s.colour}">{html.escape(s.name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
