"""eval_pipeline --peer mem0: the peer's answers are scored by the same function as MemoryHub's,
evidence from the turn id each stored item carries, a two-user question merged by score."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from evaluation.natural import NATURAL_PATH
from evaluation.peer_pipeline import peer_input, peer_jobs, peer_results, run_driver
from evaluation.pipeline import natural_plan
from evaluation.pipeline_scores import summarize

PEER_PYTHON = Path(
    os.environ.get("MEMORYHUB_PEER_PYTHON", str(Path(settings.BASE_DIR) / ".memoryhub" / "peer" / "bin" / "python"))
)
HARNESS = Path(settings.BASE_DIR).parent / "shared" / "peers" / "mem0_locomo.py"


def _one_person():  # type: ignore[no-untyped-def]
    return natural_plan(NATURAL_PATH, split="dev", people=1)


def _fake_output(plan, hits_for):  # type: ignore[no-untyped-def]
    """What the driver writes, every turn stored once; ``hits_for(question)`` picks the hits."""
    sessions = [
        {"user_id": user, "session_id": c.session_id, "ids": [m["correlation_id"] for m in c.messages], "seconds": 0.5}
        for user, items in plan.captures.items()
        for c in items
    ]
    searches = {
        repr(0.1): {
            q.id: [{"user_id": u, "ms": 3.0, "hits": hits_for(q, u)} for u in q.user_ids] for q in plan.questions
        }
    }
    return {"sessions": sessions, "searches": searches}


def test_the_peer_is_scored_from_the_turn_ids_it_stored() -> None:
    plan = _one_person()
    sent = peer_input(plan, thresholds=[0.1])
    assert sent["questions"][0]["user_ids"] == plan.questions[0].user_ids
    assert [m["correlation_id"] for m in sent["captures"]["natural-p01"][0]["messages"]][:2] == ["p01:0:0", "p01:0:1"]

    def hits(question, user):  # type: ignore[no-untyped-def]
        # The evidence turn second behind a wrong one, for answerable questions; nothing otherwise.
        if question.type == "unanswerable":
            return []
        evidence = sorted(question.evidence)[0]
        return [
            {"id": "x", "memory": "unrelated small talk", "score": 0.9, "turns": ["p01:0:0"]},
            {"id": "y", "memory": " ".join(question.answers), "score": 0.5, "turns": [evidence]},
        ]

    output = _fake_output(plan, hits)
    jobs = peer_jobs(output, plan)
    results = peer_results(output, plan, 0.1)
    report = summarize(plan, jobs, results, extra={})
    assert report["memories_per_100_turns"] == 100.0  # one stored item per turn
    assert report["capture_job_run_seconds"]["p50"] == 0.5
    overall = report["overall"]
    assert overall["evidence@5"] == 1.0 and overall["answered@5"] == 1.0
    assert overall["unanswerable_answered_empty"] == 1.0
    assert report["approximated_provenance"] == 0  # never traced by word overlap


def test_a_question_asked_of_two_users_merges_their_hits_by_score() -> None:
    plan = _one_person()
    question = plan.questions[0]
    question.user_ids = ["natural-p01", "other"]
    evidence = sorted(question.evidence)[0]

    def hits(q, user):  # type: ignore[no-untyped-def]
        if q is not question:
            return []
        if user == "other":
            return [{"id": f"o{i}", "memory": "noise", "score": 0.8, "turns": ["p01:0:0"]} for i in range(10)]
        return [{"id": "e", "memory": "the answer", "score": 0.7, "turns": [evidence]}]

    results = peer_results(_fake_output(plan, hits), plan, 0.1)
    items = results[0]["items"]
    assert len(items) == 10 and all(i.score == 0.8 for i in items)  # the lower-scored evidence falls off the top 10


@pytest.mark.slow
@pytest.mark.skipif(not PEER_PYTHON.exists(), reason=f"no peer virtualenv at {PEER_PYTHON} (`make bench` builds it)")
@pytest.mark.skipif(not HARNESS.exists(), reason=f"no peer harness at {HARNESS}")
def test_mem0_on_one_person_through_the_driver(tmp_path: Path) -> None:
    plan = _one_person()
    plan.questions = plan.questions[:3]
    output = run_driver(
        plan, python=str(PEER_PYTHON), harness=str(HARNESS), workdir=tmp_path, thresholds=[0.1, 0.0], log=print
    )
    assert output["network_attempts"] == []
    turns = sum(len(c.messages) for items in plan.captures.values() for c in items)
    assert sum(len(s["ids"]) for s in output["sessions"]) == turns
    for threshold in (0.1, 0.0):
        report = summarize(plan, peer_jobs(output, plan), peer_results(output, plan, threshold), extra={})
        assert report["memories"] == turns and report["retrieve_ms"]["n"] == 3
        assert report["overall"]["evidence@10"] is not None
    # With no threshold mem0 returns its top 10 whatever the score, and every hit names its turn.
    unthresholded = peer_results(output, plan, 0.0)
    assert all(len(r["items"]) == 10 for r in unthresholded)
    assert all(len(item.turns) == 1 for r in unthresholded for item in r["items"])


def test_the_peer_run_refuses_without_the_peer_environment(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="make bench"):
        call_command("eval_pipeline", dataset="natural", people=1, peer="mem0", peer_python=str(tmp_path))
