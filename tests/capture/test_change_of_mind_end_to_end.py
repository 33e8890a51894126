"""A change of mind, end to end without an LLM: POST /capture, the job run as the worker
runs it, the embedding task, then POST /retrieve for the question the user would ask."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from capture.models import CaptureJob
from capture.pipeline import Outcome, run_job
from memories import review
from memories.models import Membership, Memory, Project
from retrieval.tasks import embed_memories_task

pytestmark = pytest.mark.django_db

BLACK = "I use black for formatting my Python code."
RUFF = "Actually I switched from black to ruff format last week, it's much faster."
QUESTION = "Which Python formatter do I use?"


@pytest.fixture(autouse=True)
def no_llm(settings: Any, api: Any) -> None:
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=0)


def turn(api: Any, text: str) -> CaptureJob:
    """One turn posted by the agent; the job and the embedding task run here, as a worker would."""
    body = {"user_id": "alice", "session_id": "s1", "trigger": "turn", "messages": [{"role": "user", "content": text}]}
    response = api.post("/capture", body)
    assert response.status_code == 202, response.content
    job_id = response.json()["job_id"]
    assert run_job(job_id=job_id).outcome == Outcome.DONE
    job = CaptureJob.objects.get(pk=job_id)
    embed_memories_task.apply(args=[job.memory_ids])
    return job


def top_level_ids(api: Any) -> list[str]:
    # min_score 0: the ranking itself, whatever relevance cut the engine applies by default.
    response = api.post("/retrieve", {"user_id": "alice", "query": QUESTION, "min_score": 0})
    assert response.status_code == 200, response.content
    return [m["id"] for m in response.json()["memories"]]


def test_under_the_auto_policy_ruff_supersedes_black_and_retrieval_answers_ruff(api: Any) -> None:
    [black_id] = turn(api, BLACK).memory_ids
    job = turn(api, RUFF)

    [ruff_id] = job.memory_ids
    ruff = Memory.objects.get(pk=ruff_id)
    assert (ruff.content, ruff.status, str(ruff.supersedes_id), ruff.version) == (
        "The user uses ruff format for formatting the user's Python code.",
        "active",
        black_id,
        2,
    )
    assert Memory.objects.get(pk=black_id).status == "superseded"
    assert job.proposals[0]["outcome"] == "created"
    ranked = top_level_ids(api)
    assert ranked[0] == ruff_id and black_id not in ranked


def test_under_the_review_policy_the_switch_is_proposed_and_approval_completes_it(api: Any) -> None:
    Project.objects.filter(pk=api.project.pk).update(capture_policy="review")
    [black_id] = turn(api, BLACK).memory_ids
    review.memory_approve(memory=Memory.objects.get(pk=black_id), actor="user:rita")

    [ruff_id] = turn(api, RUFF).memory_ids

    ruff = Memory.objects.get(pk=ruff_id)
    assert (ruff.status, ruff.supersedes_id, ruff.metadata["proposed_supersedes"]) == ("pending_review", None, black_id)
    assert Memory.objects.get(pk=black_id).status == "active"
    assert f'Proposes to supersede <a href="/p/{api.project.slug}/memories/{black_id}/">' in review_queue(api)

    review.memory_approve(memory=ruff, actor="user:rita")

    assert Memory.objects.get(pk=black_id).status == "superseded"
    ranked = top_level_ids(api)
    assert ranked[0] == ruff_id and black_id not in ranked


def review_queue(api: Any) -> str:
    reviewer = get_user_model().objects.create_user(username="rita", password="x")
    Membership.objects.create(team=api.project.team, user=reviewer, role="reviewer")
    client = Client()
    client.force_login(reviewer)
    response = client.get(f"/p/{api.project.slug}/review/")
    assert response.status_code == 200
    return str(response.content.decode())
