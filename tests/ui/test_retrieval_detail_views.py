"""The retrieval log drills into one call: the memories it returned, with scores."""

from __future__ import annotations

from django.utils.html import escape

from memories.models import Memory, Project
from retrieval.models import RetrievalLog


def test_a_retrieve_call_is_logged_with_scores_and_its_page_lists_what_it_returned(api, make_memory, client_as):
    tea = make_memory(content="Alice's favourite drink is green tea.")
    make_memory(content="Alice deploys the billing service with Kubernetes.")
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=0)
    body = api.post("/retrieve", {"user_id": "alice", "query": "What does Alice drink?", "min_score": 0}).json()
    log = RetrievalLog.objects.get(correlation_id=body["correlation_id"])
    assert log.scores == [round(m["score"], 4) for m in body["memories"]]
    client = client_as("viewer")
    assert (
        f'href="/p/{api.project.slug}/retrievals/{log.pk}/"'
        in client.get(f"/p/{api.project.slug}/retrievals/").content.decode()
    )
    page = client.get(f"/p/{api.project.slug}/retrievals/{log.pk}/").content.decode()
    returned = page[page.index('id="returned"') :]
    first, second = (escape(m["content"]) for m in body["memories"][:2])
    assert returned.index(first) < returned.index(second)
    assert f"{body['memories'][0]['score']:.3f}" in returned
    assert f'href="/p/{api.project.slug}/memories/{tea["id"]}/"' in returned


def test_a_memory_erased_since_and_an_old_log_without_scores_still_show(client_as, project, memory_factory):
    kept = memory_factory("Still here.")
    log = RetrievalLog.objects.create(
        project=project, user_id="alice", correlation_id="c1", query_hash="h", result_count=2,
        memory_ids=[str(kept.pk), "7d0f2f4e-0000-4000-8000-000000000000"], latency_ms=12.5,
    )  # fmt: skip
    page = client_as("viewer").get(f"/p/{project.slug}/retrievals/{log.pk}/").content.decode()
    assert "Still here." in page and "gone (erased since)" in page
    assert "logged before scores were kept" in page
    assert Memory.objects.filter(pk=kept.pk).exists()


def test_another_projects_log_is_not_found(client_as, project, other_project):
    log = RetrievalLog.objects.create(
        project=other_project, user_id="alice", correlation_id="c2", query_hash="h", latency_ms=1.0
    )
    assert client_as("viewer").get(f"/p/{project.slug}/retrievals/{log.pk}/").status_code == 404
