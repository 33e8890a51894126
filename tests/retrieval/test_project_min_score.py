"""A project's own min_score (settings page) is the cut of retrieve calls that name none."""

from __future__ import annotations

from memories.models import Project

FACTS = ["Alice's favourite drink is green tea.", "Alice deploys the billing service with Kubernetes."]


def _retrieve(api, **body):
    response = api.post("/retrieve", {"user_id": "alice", "query": "What does Alice drink?", **body})
    assert response.status_code == 200, response.content
    return [m["content"] for m in response.json()["memories"]]


def test_the_projects_min_score_cuts_unless_the_request_names_its_own(api, make_memory):
    for content in FACTS:
        make_memory(content=content)
    Project.objects.filter(pk=api.project.pk).update(retrieval_rate_limit=0)
    assert "Alice's favourite drink is green tea." in _retrieve(api)  # the server default keeps it
    Project.objects.filter(pk=api.project.pk).update(min_score=1.0)  # nothing scores above 1
    assert _retrieve(api) == []
    assert "Alice's favourite drink is green tea." in _retrieve(api, min_score=0)
