"""The HTML report is self-contained, accessible, and shows the numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evaluation.baselines import compare
from evaluation.metrics import CaseResult, summarise
from evaluation.report import render_html, write_json


def _summary() -> dict[str, Any]:
    return summarise(
        [
            CaseResult("q1", "single-hop", ["a", "b"], {"b"}, latency_ms=12.0, token_count=90, token_budget=100),
            CaseResult("q2", "temporal", ["c"], {"c"}, latency_ms=48.0, token_count=40, token_budget=100),
            CaseResult("q3", "adversarial", ["x"], {"z"}, latency_ms=7.0),
            CaseResult("q4", "negative", [], set(), negative=True, latency_ms=3.0),
        ]
    )


def _baselines() -> dict[str, Any]:
    group = {"n": 2, "R@5": 0.9, "R@10": 0.95, "Hit@10": 0.95, "NDCG@10": 0.8, "MRR": 0.65}
    return {"name": "toy", "corpus": "c.jsonl", "cases": "q.jsonl", "results": {"bm25": {"all_non_adversarial": group}}}


def test_report_shows_the_headline_and_category_numbers() -> None:
    page = render_html(_summary(), title="Golden run", run_info={"dataset": "golden", "hyde": False})
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Golden run</title>" in page
    assert "0.750" in page  # headline MRR: (1/2 + 1) / 2
    assert "0.667" in page  # overall R@5 over the three scored cases: (1 + 1 + 0) / 3
    assert "single-hop" in page and "temporal" in page and "adversarial" in page
    assert "9.5 ms" in page  # p50 of 3, 7, 12, 48 ms
    assert "<dt>hyde</dt><dd>false</dd>" in page


def test_every_chart_is_a_labelled_svg_followed_by_a_table() -> None:
    page = render_html(_summary(), title="Golden run", run_info={}, comparison=compare(_summary(), _baselines()))
    charts = re.findall(r"<figure>.*?</figure>", page, flags=re.S)
    assert len(charts) == 4  # categories, latency percentiles, latency histogram, baselines
    for figure in charts:
        assert 'role="img"' in figure and "<title id=" in figure and "<desc id=" in figure
        assert figure.index("<svg") < figure.index("<table>")
        assert "<caption>" in figure and 'scope="col"' in figure


def test_report_compares_against_the_best_baseline() -> None:
    page = render_html(_summary(), title="t", run_info={}, comparison=compare(_summary(), _baselines()))
    assert "Against the baselines (toy)" in page
    assert "bm25" in page
    assert "+0.100" in page  # our headline R@5 1.0 against 0.9


def test_report_loads_nothing_from_outside_and_escapes_text() -> None:
    page = render_html(_summary(), title="<script>alert(1)</script>", run_info={"note": "a & b"})
    assert "<script" not in page
    assert "&lt;script&gt;" in page and "a &amp; b" in page
    external = re.findall(r"""(?:src|href)\s*=|https?://(?!www\.w3\.org/2000/svg)""", page)
    assert external == []


def test_an_empty_run_still_renders() -> None:
    page = render_html(summarise([]), title="empty", run_info={})
    assert "No per-case latency was recorded." in page


def test_write_json_round_trips(tmp_path: Path) -> None:
    path = write_json(_summary(), tmp_path / "out" / "summary.json")
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(_summary()))
