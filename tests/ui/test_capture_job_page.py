"""A capture job you can open: its source messages, each proposal's outcome and
why it was not written, what validation rejected, and links to the memories."""

from __future__ import annotations

import pytest

from capture.models import CaptureJob, JobStatus
from memories.models import Memory, Project

pytestmark = pytest.mark.django_db


def finished_job(project: Project, written: Memory, existing: Memory) -> CaptureJob:
    """A job as capture leaves it (capture.services.capture_job_write_memories and record_extraction)."""
    return CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="key:support bot",
        status=JobStatus.DONE,
        window=[
            {"role": "user", "content": "I switched to Helix. My token is [REDACTED:api_key]."},
            {"role": "assistant", "content": "Noted."},
        ],
        proposals=[
            {
                "content": "The user uses Helix.",
                "category": "user-facts",
                "confidence": 0.9,
                "outcome": "created",
                "memory_id": str(written.pk),
                "status": "pending_review",
                "detail": "",
                "reason": "stated",
            },
            {
                "content": "The user likes tea.",
                "category": "user-facts",
                "confidence": 0.7,
                "outcome": "near_duplicate",
                "memory_id": str(existing.pk),
                "detail": "cosine similarity 0.973 to an existing memory",
            },
            {
                "content": "x" * 10,
                "category": "user-facts",
                "confidence": 0.5,
                "outcome": "failed",
                "memory_id": None,
                "detail": "content is mostly a secret",
            },
        ],
        memory_ids=[str(written.pk)],
        payload={
            "extractor": "rules",
            "rejected": [{"item": {"content": "Blah."}, "reason": "unknown category 'misc'"}],
        },
    )


def test_the_job_page_shows_messages_outcomes_reasons_and_links(client_as, memory_factory, project):
    written = memory_factory("The user uses Helix.", status="pending_review")
    existing = memory_factory("The user likes tea.")
    job = finished_job(project, written, existing)
    body = client_as("viewer").get(f"/p/{project.slug}/captures/{job.pk}/").content.decode()
    assert "I switched to Helix. My token is [REDACTED:api_key]." in body and "Noted." in body
    assert f'href="/p/{project.slug}/memories/{written.pk}/">written memory' in body
    assert f'href="/p/{project.slug}/memories/{existing.pk}/">existing memory' in body
    assert "not written: near-duplicate" in body and "cosine similarity 0.973 to an existing memory" in body
    assert "not written: refused" in body and "content is mostly a secret" in body
    assert "unknown category &#x27;misc&#x27;" in body and "extracted by rules" in body


def test_the_jobs_list_links_to_each_job(client_as, project):
    job = CaptureJob.objects.create(project=project, user_id="alice", trigger="turn", created_by="t")
    body = client_as("viewer").get(f"/p/{project.slug}/captures/").content.decode()
    assert f'href="/p/{project.slug}/captures/{job.pk}/"' in body


def test_another_projects_job_is_not_found(client_as, project, other_project):
    job = CaptureJob.objects.create(project=other_project, user_id="alice", trigger="turn", created_by="t")
    assert client_as("admin").get(f"/p/{project.slug}/captures/{job.pk}/").status_code == 404


def test_a_job_with_odd_stored_json_still_renders(client_as, project):
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        window={"not": "a list"},
        proposals=["not a dict", {"content": "No outcome yet."}],
        payload={"rejected": "nope"},
    )
    response = client_as("viewer").get(f"/p/{project.slug}/captures/{job.pk}/")
    assert response.status_code == 200
    assert "No outcome yet." in response.content.decode() and "not written yet" in response.content.decode()
