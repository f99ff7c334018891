"""Charts as inline SVG, rendered by the ckkb plugin.

Why not a charting plugin: datasette-vega (the Datasette charting plugin on PyPI, 0.6.2) does
install, but it has had no release since 2019, its charts are configured by hand in the browser
per page (no default chart for a given query), and it would be a new dependency. The two charts
ckkb needs are fixed bar charts, so the plugin renders them server-side as plain SVG: no
JavaScript, no CDN (the machines that serve this often have no internet), readable in any
browser and in screenshots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2f6db5", "#d9822b", "#3a9a5b", "#b53f3f", "#7b5cb5", "#8c8c8c")


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    title: str = ""  # tooltip: the full name
    href: str | None = None
    highlight: bool = False


@dataclass(frozen=True)
class Line:
    """A vertical reference line across the plot (a peak, a roofline bound)."""

    value: float
    label: str


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.2f}"


def nice_ticks(top: float, n: int = 6) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 times a power of ten) up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    count = math.ceil(top / step - 1e-9)
    return [round(k * step, 10) for k in range(count + 1)]


def hbar_svg(
    bars: Sequence[Bar],
    *,
    unit: str = "",
    width: int = 1000,
    row: int = 20,
    label_width: int = 360,
    caption: str = "",
    lines: Sequence[Line] = (),
) -> str:
    """A horizontal bar chart: one row per bar, in the order given, with an axis of round ticks
    (top and bottom) and optional reference lines. The highlighted bar (the winner) is drawn in
    the second colour and carries class `ckkb-winner`; every bar carries its full name in
    `data-name` and in its tooltip."""
    if not bars:
        return '<p class="ckkb-empty">nothing to chart</p>'
    top = max([b.value for b in bars] + [ln.value for ln in lines] + [0.0]) or 1.0
    ticks = nice_ticks(top)
    top = ticks[-1]
    plot = width - label_width - 70
    head = 34 if lines else 20
    height = head + row * len(bars) + 24
    out = [
        f'<svg class="ckkb-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(caption)}">'
    ]
    bottom = head + row * len(bars)
    for t in ticks:  # axis: grid line, label above and below the bars
        x = label_width + plot * t / top
        out.append(
            f'<line class="ckkb-tick" x1="{x:.1f}" y1="{head - 4}" x2="{x:.1f}" y2="{bottom}" '
            'stroke="#ddd"/>'
        )
        for y in (head - 8, bottom + 14):
            out.append(
                f'<text class="ckkb-tick-label" x="{x:.1f}" y="{y}" text-anchor="middle" '
                f'font-size="11" fill="#555">{_fmt(t)}</text>'
            )
    for i, b in enumerate(bars):
        y = head + i * row
        w = max(1.0, plot * (b.value / top)) if b.value > 0 else 0
        color = PALETTE[1] if b.highlight else PALETTE[0]
        cap = label_width // 7  # characters that fit at 12 px
        label = b.label if len(b.label) <= cap else b.label[: cap - 1] + "…"
        tip = f"{escape(b.title or b.label)}: {_fmt(b.value)} {escape(unit)}"
        text = (
            f'<text class="ckkb-label" data-name="{escape(b.title or b.label)}" '
            f'x="{label_width - 6}" y="{y + row * 0.7:.1f}" text-anchor="end" '
            f'font-size="12"><title>{tip}</title>{escape(label)}</text>'
        )
        if b.href:
            text = f'<a href="{escape(b.href)}">{text}</a>'
        out.append(text)
        cls = "ckkb-bar ckkb-winner" if b.highlight else "ckkb-bar"
        out.append(
            f'<rect class="{cls}" data-name="{escape(b.title or b.label)}" '
            f'data-value="{b.value}" x="{label_width}" y="{y + 2}" width="{w:.1f}" '
            f'height="{row - 4}" fill="{color}"><title>{tip}</title></rect>'
        )
        out.append(
            f'<text x="{label_width + w + 4:.1f}" y="{y + row * 0.7:.1f}" '
            f'font-size="11">{_fmt(b.value)}</text>'
        )
    for k, ln in enumerate(lines):
        x = label_width + plot * ln.value / top
        color = PALETTE[3 + k % 2]
        out.append(
            f'<line class="ckkb-refline" x1="{x:.1f}" y1="{head - 2}" x2="{x:.1f}" '
            f'y2="{bottom}" stroke="{color}" stroke-dasharray="5,3" stroke-width="2">'
            f"<title>{escape(ln.label)}: {_fmt(ln.value)} {escape(unit)}</title></line>"
        )
        out.append(
            f'<text x="{x - 4:.1f}" y="{10 + 11 * k}" text-anchor="end" font-size="11" '
            f'fill="{color}">{escape(ln.label)} {_fmt(ln.value)}</text>'
        )
    out.append(
        f'<text x="{width - 4}" y="{bottom + 14}" text-anchor="end" font-size="11" '
        f'fill="#555">{escape(unit)}</text>'
    )
    out.append("</svg>")
    return "".join(out)


def stacked_svg(
    rows: Sequence[tuple[str, dict[str, float]]],
    series: Sequence[str],
    *,
    width: int = 900,
    row: int = 20,
    label_width: int = 260,
    caption: str = "",
    hrefs: dict[str, str] | None = None,
) -> str:
    """Horizontal stacked bars: one row per label, one colour per series, with a legend."""
    if not rows:
        return '<p class="ckkb-empty">nothing to chart</p>'
    top = max((sum(v.values()) for _, v in rows), default=0) or 1
    plot = width - label_width - 60
    legend_h = 22
    height = legend_h + row * len(rows) + 10
    out = [
        f'<svg class="ckkb-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(caption)}">'
    ]
    x = label_width
    for j, s in enumerate(series):
        out.append(
            f'<rect x="{x}" y="4" width="12" height="12" fill="{PALETTE[j % len(PALETTE)]}"/>'
        )
        out.append(f'<text x="{x + 16}" y="14" font-size="12">{escape(s)}</text>')
        x += 24 + 8 * len(s)
    for i, (label, values) in enumerate(rows):
        y = legend_h + i * row
        text = (
            f'<text x="{label_width - 6}" y="{y + row * 0.7:.1f}" text-anchor="end" '
            f'font-size="12">{escape(label)}</text>'
        )
        if hrefs and label in hrefs:
            text = f'<a href="{escape(hrefs[label])}">{text}</a>'
        out.append(text)
        x0 = float(label_width)
        for j, s in enumerate(series):
            v = values.get(s, 0)
            if v <= 0:
                continue
            w = plot * v / top
            out.append(
                f'<rect x="{x0:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" '
                f'fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{escape(label)} / {escape(s)}: {_fmt(v)}</title></rect>"
            )
            x0 += w
        out.append(
            f'<text x="{x0 + 4:.1f}" y="{y + row * 0.7:.1f}" font-size="11">'
            f"{_fmt(sum(values.values()))}</text>"
        )
    out.append("</svg>")
    return "".join(out)
