"""Template helpers of the curation UI: small server-drawn SVG charts and labels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()

WIDTH, HEIGHT, PAD = 560, 140, 24

# Category colours: distinct hues with enough contrast on white (graph.js uses the same list).
PALETTE = ["#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bc4c00", "#0a7b83", "#bf3989", "#6e7781", "#9a6700"]


@register.simple_tag
def category_colour(category: str, taxonomy: Sequence[str]) -> str:
    try:
        return PALETTE[list(taxonomy).index(category) % len(PALETTE)]
    except ValueError:
        return "#57606a"


@register.filter
def status_label(status: str) -> str:
    return status.replace("_", " ")


@register.simple_tag
def bar_chart(series: Sequence[Any], title: str) -> SafeString:
    """Bars for ``series`` of objects with ``day`` and ``count`` (the dashboard's last days)."""
    top = max([point.count for point in series] + [1])
    step = (WIDTH - 2 * PAD) / max(len(series), 1)
    bars = format_html_join(
        "",
        '<g><rect x="{}" y="{}" width="{}" height="{}" class="bar"><title>{}: {}</title></rect>'
        '<text x="{}" y="{}" class="tick">{}</text></g>',
        (
            (
                _n(PAD + i * step + 2),
                _n(HEIGHT - PAD - (HEIGHT - 2 * PAD) * p.count / top),
                _n(step - 4),
                _n((HEIGHT - 2 * PAD) * p.count / top),
                p.day.isoformat(),
                p.count,
                _n(PAD + i * step + step / 2),
                HEIGHT - 8,
                p.day.strftime("%d"),
            )
            for i, p in enumerate(series)
        ),
    )
    return format_html(
        '<svg viewBox="0 0 {} {}" class="chart" role="img" aria-label="{}">'
        '<text x="{}" y="14" class="tick start">max {}</text>{}</svg>',
        WIDTH,
        HEIGHT,
        title,
        PAD,
        top,
        bars,
    )


def _n(value: float) -> str:
    """A coordinate as text (format_html escapes its arguments, so numbers arrive pre-formatted)."""
    return f"{value:.1f}"


@register.simple_tag
def latency_chart(points: Sequence[dict[str, Any]], p95: float | None) -> SafeString:
    """Latency of recent retrievals, oldest left, with a dashed line across at their ``p95``
    (``ui.selectors.latency_percentiles``, as the dashboard computes it)."""
    if not points or p95 is None:
        return format_html('<p class="muted">{}</p>', "No retrievals yet.")
    values = [float(p["latency_ms"]) for p in points]
    top = max(values) * 1.1 or 1.0
    step = (WIDTH - 2 * PAD) / max(len(values) - 1, 1)

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    line = " ".join(f"{_n(PAD + i * step)},{_n(y(v))}" for i, v in enumerate(values))
    return format_html(
        '<svg viewBox="0 0 {w} {h}" class="chart" role="img" aria-label="Latency of the last {n} retrievals; '
        'p95 {p95} ms">'
        '<polyline points="{line}" class="line"/>'
        '<line x1="{pad}" x2="{end}" y1="{y95}" y2="{y95}" class="p95"/>'
        '<text x="{end}" y="{label_y}" class="tick end">p95 {p95} ms</text>'
        '<text x="{pad}" y="14" class="tick start">max {top} ms</text></svg>',
        w=WIDTH,
        h=HEIGHT,
        n=len(values),
        line=line,
        pad=PAD,
        end=WIDTH - PAD,
        y95=_n(y(p95)),
        label_y=_n(y(p95) - 4),
        p95=f"{p95:.0f}",
        top=f"{max(values):.0f}",
    )
