"""The evaluation reports the Evaluation page shows: the JSON files ``eval_retrieval`` and
``eval_capture`` write (one per dataset or capture path, overwritten by each run, so each file
is that dataset's latest run), read from ``MEMORYHUB_REPORTS_DIR``. The figures are drawn on
the server by :mod:`evaluation.report` (tables and inline SVG): no script, no CDN."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from evaluation import report

CAPTURE_SERIES = ["precision", "recall", "supersede_detection", "first_attempt_usable"]
CAPTURE_ROWS = [
    "cases",
    "expected_memories",
    "produced_memories",
    "matched",
    "false_positives",
    "wrong_supersedes",
    "secrets_stored",
    "jobs_failed",
    "job_seconds_p50",
    "job_seconds_p95",
]
MAX_BYTES = 50 * 1024 * 1024  # a report this large is not one these commands wrote


@dataclass
class Report:
    """One report file: its kind, run settings, and the figures as HTML (or why it could not be read)."""

    name: str
    kind: str  # "retrieval", "capture" or "unknown"
    modified: datetime
    run: dict[str, Any] = field(default_factory=dict)
    figures: SafeString = field(default_factory=lambda: mark_safe(""))
    error: str = ""


def latest_reports(*, directory: Path) -> list[Report]:
    """Every ``*.json`` report in ``directory``, newest first; an unreadable file is listed with
    the reason instead of failing the page."""
    if not directory.is_dir():
        return []
    files = [p for p in directory.glob("*.json") if p.is_file()]
    reports = [_load(path) for path in files]
    return sorted(reports, key=lambda r: (r.modified, r.name), reverse=True)


def _load(path: Path) -> Report:
    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    found = Report(name=path.stem, kind="unknown", modified=modified)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError("larger than 50 MB")
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if isinstance(data.get("summary"), dict):
            found.kind, found.run = "retrieval", dict(data.get("run") or {})
            found.figures = mark_safe(report.render_sections(data["summary"], comparison=data.get("comparison")))  # noqa: S308 (escaped by evaluation.report)
        elif isinstance(data.get("all"), dict):
            found.kind, found.run = "capture", dict(data.get("run") or {})
            found.figures = _capture_figures(data)
        else:
            raise ValueError("neither an eval_retrieval nor an eval_capture report")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        found.kind, found.error = "unknown", f"could not read it: {error}"
    return found


def _capture_figures(data: dict[str, Any]) -> SafeString:
    """Capture quality per split as bars, and the counts as a table."""
    groups = [("all", data["all"]), *((name, stats) for name, stats in (data.get("splits") or {}).items())]
    bars = [report.BarGroup(name, [stats.get(key) for key in CAPTURE_SERIES]) for name, stats in groups]
    chart = report.bar_chart(
        bars,
        CAPTURE_SERIES,
        title=f"Capture quality ({data.get('run', {}).get('path', 'rules')} path)",
        description="Precision, recall, supersede detection and first-attempt usability per split, 0 to 1.",
    )
    rows = [[key, *(stats.get(key) for _, stats in groups)] for key in CAPTURE_ROWS]
    table = report.table("Counts and timings", ["Figure", *(name for name, _ in groups)], rows)
    return mark_safe(chart + table)  # noqa: S308 (built from escaped parts by evaluation.report)
