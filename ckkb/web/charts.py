"""Charts as inline SVG, rendered by the ckkb plugin.

Why not a charting plugin: datasette-vega (the Datasette charting plugin on PyPI, 0.6.2) does
install, but it has had no release since 2019, its charts are configured by hand in the browser
per page (no default chart for a given query), and it would be a new dependency. The two charts
ckkb needs are fixed bar charts, so the plugin renders them server-side as plain SVG: no
JavaScript, no CDN (the machines that serve this often have no internet), readable in any
browser and in screenshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2f6db5", "#d9822b", "#3a9a5b", "#b53f3f", "#7b5cb5", "#8c8c8c")


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    title: str = ""  # tooltip
    href: str | None = None
    highlight: bool = False


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.2f}"


def hbar_svg(
    bars: Sequence[Bar],
    *,
    unit: str = "",
    width: int = 900,
    row: int = 18,
    label_width: int = 360,
    caption: str = "",
) -> str:
    """A horizontal bar chart: one row per bar, in the order given."""
    if not bars:
        return '<p class="ckkb-empty">nothing to chart</p>'
    top = max((b.value for b in bars), default=0) or 1
    plot = width - label_width - 90
    height = row * len(bars) + 30
    out = [
        f'<svg class="ckkb-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(caption)}">'
    ]
    for i, b in enumerate(bars):
        y = 10 + i * row
        w = max(1.0, plot * (b.value / top)) if b.value > 0 else 0
        color = PALETTE[1] if b.highlight else PALETTE[0]
        label = b.label if len(b.label) <= 60 else b.label[:57] + "..."
        text = f'<text x="{label_width - 6}" y="{y + row * 0.7:.1f}" text-anchor="end" font-size="12">{escape(label)}</text>'
        if b.href:
            text = f'<a href="{escape(b.href)}">{text}</a>'
        out.append(text)
        out.append(
            f'<rect x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" fill="{color}">'
            f"<title>{escape(b.title or b.label)}: {_fmt(b.value)} {escape(unit)}</title></rect>"
        )
        out.append(
            f'<text x="{label_width + w + 4:.1f}" y="{y + row * 0.7:.1f}" font-size="11">{_fmt(b.value)}</text>'
        )
    out.append(
        f'<text x="{label_width}" y="{height - 4}" font-size="11" fill="#555">{escape(unit)}</text>'
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
        f'<svg class="ckkb-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(caption)}">'
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
        text = f'<text x="{label_width - 6}" y="{y + row * 0.7:.1f}" text-anchor="end" font-size="12">{escape(label)}</text>'
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
                f'<rect x="{x0:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{escape(label)} / {escape(s)}: {_fmt(v)}</title></rect>"
            )
            x0 += w
        out.append(
            f'<text x="{x0 + 4:.1f}" y="{y + row * 0.7:.1f}" font-size="11">{_fmt(sum(values.values()))}</text>'
        )
    out.append("</svg>")
    return "".join(out)
