"""manage.py eval_pipeline runs end to end: web server and worker started, sessions captured over
HTTP, questions retrieved, and the report holds every figure with values a real run can have."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from evaluation.natural import NATURAL_PATH, load_natural
from evaluation.pipeline import (
    Item,
    JobRecord,
    Question,
    _memory_item,
    natural_plan,
    speakers_named,
)
from evaluation.pipeline_scores import score_question

pytestmark = pytest.mark.slow


def test_two_people_through_the_real_pipeline(servers: None, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    # A subprocess, as an operator runs it: the service it starts must reach the same servers
    # (the suite exported their URLs), and the command's project is its own.
    done = subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "eval_pipeline", "--dataset", "natural",
         "--split", "dev", "--people", "2", "--out", str(out), "--details", str(tmp_path / "details.jsonl")],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == report

    people = load_natural(split="dev")[:2]
    sessions = sum(len(p["sessions"]) for p in people)
    questions = sum(len(p["questions"]) for p in people)
    assert report["users"] == 2
    assert report["capture_jobs"] == sessions
    assert report["capture_jobs_by_status"] == {"done": sessions}
    assert report["turns"] == sum(len(s["messages"]) for p in people for s in p["sessions"])
    assert report["extractor"] == "rules"  # no LLM configured in the tests
    assert report["memories"] >= 1  # the rules keep at least one of these facts
    assert 0 < report["memories_per_100_turns"] <= 100
    assert 0 <= report["capture_job_seconds"]["p50"] <= report["capture_job_seconds"]["p95"] < 60
    assert report["retrieve_ms"]["n"] == questions
    assert 0 < report["retrieve_ms"]["p50"] <= report["retrieve_ms"]["p95"]
    overall = report["overall"]
    assert overall["questions"] == questions
    for metric in ("evidence@5", "evidence@10", "answer_words@5", "answer_words@10", "answered@5"):
        assert 0 <= overall[metric] <= 1, metric
    assert overall["evidence@5"] <= overall["evidence@10"]
    assert overall["answered@5"] <= overall["answered@5+profile"] <= 1
    assert report["profiles"] == 2  # each person's profile rebuilt before the questions
    assert 0 <= overall["unanswerable_answered_empty"] <= 1
    assert set(report["by_group"]) == {"dev"}
    assert {"single", "unanswerable"} <= set(report["by_type"])
    assert len((tmp_path / "details.jsonl").read_text().splitlines()) == questions
    assert report["foreign_items"] == 0  # a project per person: nobody else's memory can come back


def _question(**fields: object) -> Question:
    base: dict[str, object] = {
        "id": "q", "query": "is tomas still vegetarian?", "user_ids": ["u"], "group": "dev", "tenant": "p02",
        "type": "change",
        "evidence": frozenset({"p02:1:2"}), "answers": ["pescatarian"], "stale": ["vegetarian"],
        "answer_text": "pescatarian",
    }  # fmt: skip
    return Question(**{**base, **fields})  # type: ignore[arg-type]


def test_scores_follow_provenance_and_aliases() -> None:
    stale = Item("memory", "Tomas is vegetarian.", 0.9, frozenset({"p02:0:2"}))
    current = Item("episode", "so he's pescatarian now, not vegetarian", 0.5, frozenset({"p02:1:2"}))
    row = score_question({"question": _question(), "items": [stale, current]})
    assert row["evidence@5"] and row["answered@5"] and row["answer_words@5"] == 1.0
    assert row["stale_first"]  # the superseded value ranked first, the current one not with it
    row = score_question({"question": _question(), "items": [current, stale]})
    assert not row["stale_first"]
    # Nothing from the evidence turn, no alias: the question counts as missed.
    row = score_question({"question": _question(), "items": [stale]})
    assert not row["evidence@10"] and not row["answered@5"] and row["answer_words@10"] == 0
    # A memory traced to another person's turn is counted as having crossed over.
    row = score_question({"question": _question(), "items": [Item("memory", "x", 0.4, frozenset({"p04:0:0"}))]})
    assert row["foreign"] == 1
    empty = score_question({"question": _question(type="unanswerable", answers=[], evidence=frozenset()), "items": []})
    assert empty["answered_empty"]


def test_the_profile_answers_beside_the_items_in_its_own_column() -> None:
    stale = Item("memory", "Tomas is vegetarian.", 0.9, frozenset({"p02:0:2"}))
    profile = "- The user's husband tomas is pescatarian now."
    row = score_question({"question": _question(), "items": [stale], "profile": profile})
    assert not row["answered@5"] and row["answered@5+profile"]
    row = score_question({"question": _question(), "items": [stale], "profile": "- The user lives in Porto."})
    assert not row["answered@5+profile"]


def test_provenance_from_the_service_wins_over_the_approximation() -> None:
    job = JobRecord("job-1", "u", [{"correlation_id": "p01:0:2", "content": "i have celiac disease"}])
    listed = {"id": "m1", "content": "The user has celiac disease.", "score": 0.7,
              "source": {"capture_job": "job-1", "messages": [{"id": "x", "correlation_id": "p01:0:4"}]}}  # fmt: skip
    item = _memory_item(listed, {}, {"job-1": job})
    assert item.turns == {"p01:0:4"} and not item.approximated
    # No list at all (a service without provenance): traced by shared words within the job.
    bare = {**listed, "source": {"capture_job": "job-1"}}
    item = _memory_item(bare, {}, {"job-1": job})
    assert item.turns == {"p01:0:2"} and item.approximated
    # An empty list is the service's answer (no stored message), not a reason to guess.
    empty = {**listed, "source": {"capture_job": "job-1", "messages": []}}
    assert _memory_item(empty, {}, {"job-1": job}).turns == frozenset()


def test_a_sample_captures_only_the_users_it_asks() -> None:
    plan = natural_plan(NATURAL_PATH, split="dev", sample=10)
    assert len(plan.questions) == 10
    assert set(plan.captures) == {user for q in plan.questions for user in q.user_ids}
    assert len(plan.captures) < len(load_natural(split="dev"))


def test_a_locomo_question_goes_to_the_speaker_it_names() -> None:
    speakers = ["Caroline", "Melanie"]
    assert speakers_named("When did Melanie paint a sunrise?", speakers) == ["Melanie"]
    assert speakers_named("What did Mel and her kids make?", speakers) == ["Melanie"]
    assert speakers_named("What do Caroline and Melanie both like?", speakers) == speakers
    assert speakers_named("What did the charity race raise awareness for?", speakers) == []
    assert speakers_named("Where did they go camping?", speakers) == []
