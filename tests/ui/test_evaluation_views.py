"""The Evaluation page: the latest eval_retrieval / eval_capture reports with their
figures, drawn on the server from the JSON files in MEMORYHUB_REPORTS_DIR."""

from __future__ import annotations

import json

from evaluation import capture_scores, report
from evaluation.metrics import CaseResult, summarise


def _retrieval_report(directory, name="golden"):
    summary = summarise(
        [CaseResult("q1", "single-hop", ["a", "b"], {"a"}), CaseResult("q2", "multi-hop", ["c"], {"d"})]
    )
    run = {
        "dataset": name,
        "cases": 2,
        "corpus": 4,
        "hyde": False,
        "top_k": 10,
        "commit": "abc1234",
        "date": "2026-11-23 20:00",
    }
    report.write_json({"run": run, "summary": summary, "comparison": None}, directory / f"{name}.json")


def test_the_page_shows_each_reports_run_and_its_svg_charts(client_as, project, settings, tmp_path):
    settings.MEMORYHUB_REPORTS_DIR = tmp_path
    _retrieval_report(tmp_path)
    captured = {**capture_scores.report([]), "run": {"path": "rules", "policy": "auto", "split": "all", "seconds": 1.5}}
    (tmp_path / "capture-rules.json").write_text(json.dumps(captured))
    (tmp_path / "notes.json").write_text("[1, 2")
    page = client_as("viewer").get(f"/p/{project.slug}/evaluation/").content.decode()
    retrieval = page[page.index('id="report-golden"') : page.index('id="report-capture-rules"')]
    assert "commit <code>abc1234</code>" in retrieval and "2 cases over 4 memories" in retrieval
    assert "<svg" in retrieval and "Ranking quality per category" in retrieval
    capture_part = page[page.index('id="report-capture-rules"') :]
    assert "Capture: rules path" in capture_part and "<svg" in capture_part
    assert "<code>notes.json</code>: could not read it" in page  # listed, not a 500


def test_without_reports_the_page_says_how_to_make_them(client_as, project, settings, tmp_path):
    settings.MEMORYHUB_REPORTS_DIR = tmp_path / "missing"
    page = client_as("viewer").get(f"/p/{project.slug}/evaluation/").content.decode()
    assert 'id="no-reports"' in page and "manage.py eval_retrieval" in page


def test_a_report_cannot_inject_markup(client_as, project, settings, tmp_path):
    settings.MEMORYHUB_REPORTS_DIR = tmp_path
    _retrieval_report(tmp_path, name="evil")
    data = json.loads((tmp_path / "evil.json").read_text())
    data["run"]["commit"] = "<script>alert(1)</script>"
    data["summary"]["categories"]["<img src=x>"] = data["summary"]["categories"]["single-hop"]
    (tmp_path / "evil.json").write_text(json.dumps(data))
    page = client_as("viewer").get(f"/p/{project.slug}/evaluation/").content.decode()
    assert "<script>alert" not in page and "<img src=x>" not in page
    assert "&lt;img src=x&gt;" in page
