"""The maintenance figures of eval_pipeline --consolidate (evaluation/maintenance.py): duplicates
counted per user and scope on real vectors, fewer after a consolidation, and the command's report
holding them with stale-first before and after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from evaluation import maintenance
from memories.models import Scope
from tests.consolidation.conftest import consolidate, remember

DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")


@pytest.mark.django_db
def test_duplicates_are_counted_within_one_user_and_scope_and_consolidation_lowers_them(project):
    for text in DOG:
        remember(project, text)
    remember(project, DOG[0])  # said a third time: two duplicates of the first
    remember(project, "The user lives in Lisbon.")
    remember(project, DOG[0], user_id="bob")  # another user's: no duplicate of alice's
    remember(project, "The team deploys on Fridays.", scope=Scope.PROJECT)
    remember(project, "The team deploys on Fridays.", user_id="bob", scope=Scope.USER)

    before = maintenance.duplicates([project.pk])
    assert before == {"memories": 7, "duplicates": 2, "per_100_memories": 28.57, "threshold": 0.72}

    consolidate(project)
    after = maintenance.duplicates([project.pk])
    assert after["duplicates"] == 0 and after["memories"] == 5


def test_the_maintenance_lines_say_what_was_measured():
    before = {"memories": 50, "duplicates": 5, "per_100_memories": 10.0, "threshold": 0.72}
    after = {"memories": 46, "duplicates": 1, "per_100_memories": 2.17, "threshold": 0.72}
    runs = {"runs": 2, "runs_by_status": {"done": 2}, "counts": {"merged": 4}, "wall_seconds": 1.0}
    section = maintenance.report(before=before, after=after, consolidation=runs, stale_first=(0.25, 0.125))
    text = "\n".join(maintenance.lines(section))
    assert "before 10.0 (5 of 50), after 2.17 (1 of 46)" in text
    assert "stale value ranked first (change questions): before 0.25, after 0.125" in text
    assert "merged 4" in text and section["duplicate_definition"].endswith("cosine >= 0.72")


@pytest.mark.slow
def test_eval_pipeline_consolidates_every_person_and_reports_before_and_after(servers: None, tmp_path: Path):
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "eval_pipeline", "--dataset", "natural",
         "--split", "dev", "--people", "2", "--consolidate", "--out", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    section = report["maintenance"]
    assert section["consolidation"]["runs"] == 2 and section["consolidation"]["runs_by_status"] == {"done": 2}
    before, after = section["duplicates_before"], section["duplicates_after"]
    assert before["memories"] >= 1 and after["memories"] <= before["memories"]
    assert after["duplicates"] <= before["duplicates"]
    merged = section["consolidation"]["counts"].get("merged", 0) + section["consolidation"]["counts"]["superseded"]
    assert before["memories"] - after["memories"] == merged
    assert section["overall_before"]["questions"] == report["overall"]["questions"]
    assert section["stale_first_after"] == report["overall"]["stale_first"]
    assert "duplicates per 100 memories: before" in done.stdout
