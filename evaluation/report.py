"""Evaluation reports: a JSON file of the summary and one self-contained HTML page.

The HTML page has no external resources (no third-party JS/CSS, no fonts, no images): the
charts are inline SVG drawn here, and every chart is followed by a table with the same
numbers, so the page reads the same with a screen reader, in a text browser or printed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

# Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
CATEGORY_METRICS: tuple[str, ...] = ("R@5", "R@10", "NDCG@10")
COMPARISON_METRICS: tuple[str, ...] = ("R@5", "R@10", "Hit@10", "NDCG@10", "MRR")
HEADLINE_FIELDS: tuple[tuple[str, str], ...] = (
    ("n", "Scored cases"),
    ("R@5", "Recall@5"),
    ("R@10", "Recall@10"),
    ("Hit@10", "Hit@10"),
    ("NDCG@10", "NDCG@10"),
    ("MRR", "MRR"),
    ("P@5", "Precision@5"),
    ("returned_precision", "Precision of returned"),
    ("negatives_empty_rate", "Negatives answered empty"),
    ("leaked_ids", "Cross-user leaks"),
    ("cases_with_forbidden", "Cases returning a forbidden id"),
    ("token_budget_compliance", "Token-budget compliance"),
    ("latency_p50_ms", "Latency p50 (ms)"),
    ("latency_p95_ms", "Latency p95 (ms)"),
)
SAFETY_FIELDS: tuple[tuple[str, str], ...] = (
    ("cases", "Cases"),
    ("n", "Scored"),
    ("negatives", "Negatives"),
    ("negatives_empty_rate", "Negatives empty"),
    ("returned_precision", "Precision of returned"),
    ("leaked_ids", "Leaked ids"),
    ("cases_with_forbidden", "Forbidden returned"),
    ("token_budget_compliance", "Budget compliance"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p95_ms", "p95 ms"),
)
_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;
padding:0 1rem;color:#1a1a1a;background:#fff;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6rem 0 1.2rem;font-size:.9rem}
th,td{border:1px solid #bbb;padding:.25rem .5rem;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:.3rem 0}
figure{margin:1rem 0}figcaption{font-weight:600;margin-bottom:.4rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}
svg{max-width:100%;height:auto}svg text{font-size:12px;fill:#1a1a1a}
.note{color:#444;font-size:.9rem}.worse{color:#a40000}.better{color:#005a00}
"""


@dataclass(frozen=True)
class BarGroup:
    """One labelled row of a bar chart: a value (or None) per series."""

    label: str
    values: Sequence[float | None]


def write_json(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``summary`` as indented UTF-8 JSON (parents created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: NaN is not JSON and would break other readers of the file.
    target.write_text(json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return target


def fmt(value: Any, *, digits: int = 3) -> str:
    """A table cell: floats with ``digits`` decimals, ints as is, None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "chart"


def _legend(series: Sequence[str], x: int) -> list[str]:
    parts = []
    for index, name in enumerate(series):
        left = x + index * 140
        colour = PALETTE[index % len(PALETTE)]
        parts.append(f'<rect x="{left}" y="6" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{left + 17}" y="16">{escape(name)}</text>')
    return parts


def _ratio(value: float) -> str:
    return f"{value:.3f}"


def _bar(x: int, y: int, value: float | None, scale: float, colour: str, label: Callable[[float], str]) -> list[str]:
    if value is None:
        return [f'<text x="{x + 4}" y="{y + 11}">n/a</text>']
    width = max(0.0, value) * scale
    return [
        f'<rect x="{x}" y="{y}" width="{width:.1f}" height="14" fill="{colour}"/>',
        f'<text x="{x + width + 4:.1f}" y="{y + 11}">{escape(label(value))}</text>',
    ]


def bar_chart(
    groups: Sequence[BarGroup],
    series: Sequence[str],
    *,
    title: str,
    description: str,
    max_value: float | None = 1.0,
    value_label: Callable[[float], str] = _ratio,
) -> str:
    """Horizontal grouped bars as an inline, labelled SVG (``role="img"``, title + desc).

    ``max_value`` fixes the full-width value (1.0 for ratios, so charts compare by eye);
    None scales to the largest value.
    """
    label_w, plot_w, bar_h, gap, top = 170, 430, 16, 12, 30
    largest = max((v for group in groups for v in group.values if v is not None), default=0.0)
    full = max(largest, max_value or 0.0)
    scale = plot_w / full if full > 0 else 0.0
    group_h = bar_h * len(series) + gap
    height = top + group_h * len(groups) + 4
    chart_id = _slug(title)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 90}" height="{height}" '
        f'viewBox="0 0 {label_w + plot_w + 90} {height}" role="img" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d">',
        f'<title id="{chart_id}-t">{escape(title)}</title><desc id="{chart_id}-d">{escape(description)}</desc>',
        *_legend(series, label_w),
    ]
    for row, group in enumerate(groups):
        y0 = top + row * group_h
        parts.append(f'<text x="{label_w - 8}" y="{y0 + bar_h * len(series) / 2 + 4:.0f}" text-anchor="end">')
        parts.append(f"{escape(group.label)}</text>")
        for index, value in enumerate(group.values):
            parts += _bar(label_w, y0 + index * bar_h, value, scale, PALETTE[index % len(PALETTE)], value_label)
    parts.append(f'<line x1="{label_w}" y1="{top - 4}" x2="{label_w}" y2="{height}" stroke="#555"/></svg>')
    return "".join(parts)


def _table_html(caption: str, head: str, body: Sequence[str]) -> str:
    rows = "".join(body)
    return f"<table><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def table(caption: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An accessible table: caption, column headers, and the first cell as the row header."""
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    body = []
    for row in rows:
        first, *rest = row
        cells = "".join(f'<td class="num">{escape(fmt(cell))}</td>' for cell in rest)
        body.append(f'<tr><th scope="row">{escape(fmt(first))}</th>{cells}</tr>')
    return _table_html(caption, head, body)


def _figure(caption: str, chart: str, fallback: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{chart}{fallback}</figure>"


def _groups(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    rows: list[tuple[str, Mapping[str, Any]]] = [("all", summary["overall"])]
    if summary["headline"].get("cases") != summary["overall"].get("cases"):
        rows.append((str(summary.get("headline_group", "headline")), summary["headline"]))
    rows += [(name, stats) for name, stats in summary["categories"].items()]
    return rows


def _headline_section(summary: Mapping[str, Any]) -> str:
    groups = [("all", summary["overall"]), (str(summary.get("headline_group")), summary["headline"])]
    if groups[0][1].get("cases") == groups[1][1].get("cases"):
        groups = groups[:1]
    rows = [[label, *(stats.get(key) for _, stats in groups)] for key, label in HEADLINE_FIELDS]
    header = ["Metric", *(name for name, _ in groups)]
    return "<h2>Headline</h2>" + table("Headline figures (means over scored cases)", header, rows)


def _category_section(summary: Mapping[str, Any]) -> str:
    categories = summary["categories"]
    scored = {name: stats for name, stats in categories.items() if stats.get("n")}
    groups = [BarGroup(name, [stats.get(m) for m in CATEGORY_METRICS]) for name, stats in scored.items()]
    chart = bar_chart(
        groups,
        CATEGORY_METRICS,
        title="Ranking quality per category",
        description="Recall@5, Recall@10 and NDCG@10 per category, on a 0 to 1 scale.",
    )
    rows = [[name, stats.get("n"), *(stats.get(m) for m in CATEGORY_METRICS)] for name, stats in scored.items()]
    fallback = table("Ranking quality per category", ["Category", "n", *CATEGORY_METRICS], rows)
    note = ""
    unscored = sorted(set(categories) - set(scored))
    if unscored:
        note = f'<p class="note">Not ranked (no relevant ids by design): {escape(", ".join(unscored))}.</p>'
    return "<h2>Per category</h2>" + _figure("Ranking quality per category", chart, fallback) + note


def _histogram_label(bucket: Mapping[str, Any]) -> str:
    if bucket["hi"] is None:
        return f"> {bucket['lo']:g} ms"
    if not bucket["lo"]:
        return f"≤ {bucket['hi']:g} ms"
    return f"{bucket['lo']:g}–{bucket['hi']:g} ms"


def _latency_section(summary: Mapping[str, Any]) -> str:
    overall = summary["overall"]
    if not overall.get("latency_n"):
        return '<h2>Latency</h2><p class="note">No per-case latency was recorded.</p>'
    stats = [("p50", overall.get("latency_p50_ms")), ("p95", overall.get("latency_p95_ms"))]
    stats_chart = bar_chart(
        [BarGroup(name, [value]) for name, value in stats],
        ["latency"],
        title="Latency percentiles",
        description="Median and 95th percentile retrieval latency in milliseconds.",
        max_value=None,
        value_label=lambda v: f"{v:.1f} ms",
    )
    buckets = summary.get("latency_histogram", [])
    hist_rows = [(_histogram_label(b), float(b["count"])) for b in buckets]
    hist_chart = bar_chart(
        [BarGroup(label, [count]) for label, count in hist_rows],
        ["cases"],
        title="Latency histogram",
        description="Number of cases per latency bucket.",
        max_value=None,
        value_label=lambda v: f"{v:.0f}",
    )
    return (
        "<h2>Latency</h2>"
        + _figure("Latency percentiles", stats_chart, table("Latency percentiles", ["Statistic", "ms"], stats))
        + _figure(
            "Latency histogram",
            hist_chart,
            table("Latency histogram", ["Bucket", "Cases"], [(lbl, int(c)) for lbl, c in hist_rows]),
        )
    )


def _safety_section(summary: Mapping[str, Any]) -> str:
    rows = [[name, *(stats.get(key) for key, _ in SAFETY_FIELDS)] for name, stats in _groups(summary)]
    header = ["Group", *(label for _, label in SAFETY_FIELDS)]
    return "<h2>Safety, budget and latency per group</h2>" + table("Safety, budget and latency", header, rows)


def _full_metrics_section(summary: Mapping[str, Any]) -> str:
    metrics = list(summary.get("metrics", []))
    rows = [[name, stats.get("n"), *(stats.get(m) for m in metrics)] for name, stats in _groups(summary)]
    return "<h2>All ranking metrics</h2>" + table("All ranking metrics per group", ["Group", "n", *metrics], rows)


def _delta_cell(delta: float | None) -> str:
    if delta is None:
        return "<td>—</td>"
    css = "better" if delta > 0 else "worse" if delta < 0 else ""
    return f'<td class="num {css}">{delta:+.3f}</td>'


def _comparison_table(group: str, compared: Mapping[str, Any]) -> str:
    body = []
    for metric, row in compared["metrics"].items():
        cells = f'<td class="num">{fmt(row["ours"])}</td><td>{escape(fmt(row["best_method"]))}</td>'
        cells += f'<td class="num">{fmt(row["best"])}</td>{_delta_cell(row["delta"])}'
        body.append(f'<tr><th scope="row">{escape(metric)}</th>{cells}</tr>')
    head = "".join(f'<th scope="col">{h}</th>' for h in ("Metric", "Ours", "Best baseline", "Value", "Delta"))
    caption = f"{group}: ours against the best baseline (n ours {fmt(compared['n_ours'])}, "
    caption += f"n baseline {fmt(compared['n_baseline'])})"
    return _table_html(caption, head, body)


def _comparison_chart(group: str, compared: Mapping[str, Any], methods: Sequence[str]) -> str:
    metrics = [m for m in COMPARISON_METRICS if m in compared["metrics"]]
    bars = [
        BarGroup(m, [compared["metrics"][m]["ours"], *(compared["metrics"][m]["baselines"].get(x) for x in methods)])
        for m in metrics
    ]
    return bar_chart(
        bars,
        ["ours", *methods],
        title=f"Ours against baselines ({group})",
        description=f"Our value and each baseline method's value per metric for the {group} group, 0 to 1.",
    )


def _comparison_section(comparison: Mapping[str, Any] | None) -> str:
    if not comparison or not comparison.get("groups"):
        return ""
    methods = list(comparison.get("methods", []))
    parts = [f"<h2>Against the baselines ({escape(fmt(comparison.get('baseline')))})</h2>"]
    for group in ("all_non_adversarial", "adversarial", "all"):
        compared = comparison["groups"].get(group)
        if compared is None:
            continue
        if not compared.get("comparable"):
            parts.append(f'<p class="note">{escape(group)}: case counts differ, the deltas are indicative only.</p>')
        chart = _comparison_chart(group, compared, methods)
        parts.append(_figure(f"Ours against baselines — {group}", chart, _comparison_table(group, compared)))
    others = [g for g in comparison["groups"] if g not in ("all_non_adversarial", "adversarial", "all")]
    parts += [_comparison_table(g, comparison["groups"][g]) for g in others]
    return "".join(parts)


def _run_info_section(run_info: Mapping[str, Any]) -> str:
    items = []
    for key, value in run_info.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        items.append(f"<dt>{escape(str(key))}</dt><dd>{escape(shown)}</dd>")
    return f"<h2>Run</h2><dl>{''.join(items)}</dl>" if items else ""


def render_sections(summary: Mapping[str, Any], *, comparison: Mapping[str, Any] | None = None) -> str:
    """The report's figures (tables and inline SVG charts) without the page around them: the
    HTML report's body, and the web UI's Evaluation page."""
    return "".join(
        [
            _headline_section(summary),
            _comparison_section(comparison),
            _category_section(summary),
            _latency_section(summary),
            _safety_section(summary),
            _full_metrics_section(summary),
        ]
    )


def render_html(
    summary: Mapping[str, Any],
    *,
    title: str,
    run_info: Mapping[str, Any],
    comparison: Mapping[str, Any] | None = None,
) -> str:
    """One self-contained HTML page for a summary from ``metrics.summarise``.

    ``run_info`` (dataset, engine settings, commit, date…) is shown as given; ``comparison``
    is the output of ``baselines.compare`` and adds the baseline charts when present.
    """
    body = f"<h1>{escape(title)}</h1>" + _run_info_section(run_info) + render_sections(summary, comparison=comparison)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )
