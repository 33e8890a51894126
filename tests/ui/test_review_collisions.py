"""The review queue shows what a proposal collides with, and supersede-instead,
merge, filters and undo act on it through the services, with honest history."""

from __future__ import annotations

from typing import Any

import pytest

from memories import lifecycle, services
from memories.models import Memory, MemoryEdge, MemoryRevision, Project, Relationship, Status

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
EXISTING = "The user drinks black coffee every morning."
PROPOSAL = "The user drinks black coffee every morning, without sugar."


def remember(project: Project, content: str, *, user_id: str = "alice", **fields: Any) -> Memory:
    """A memory written and embedded inline with the real local model (so the search sees it)."""
    draft = services.MemoryDraft(user_id=user_id, content=content, **fields)
    return services.memory_create(project=project, draft=draft, actor="system:test")


def propose(project: Project, content: str, *, user_id: str = "alice", **fields: Any) -> Memory:
    draft = services.MemoryDraft(user_id=user_id, content=content, **fields)
    return services.memory_create(project=project, draft=draft, actor="capture:test", status=Status.PENDING_REVIEW)


def url(project: Project, tail: str = "") -> str:
    return f"/p/{project.slug}/review/{tail}"


def test_a_card_shows_the_users_existing_memory_most_like_the_proposal(client_as, project):
    existing = remember(project, EXISTING)
    unrelated = remember(project, "The user lives in Lisbon.")
    other_user = remember(project, EXISTING, user_id="bob")
    proposal = propose(project, PROPOSAL)
    body = client_as("viewer").get(url(project)).content.decode()
    card = body[body.index(f'id="card-{proposal.pk}"') :]
    assert f'data-similar="{existing.pk}"' in card
    assert f'data-similar="{other_user.pk}"' not in body  # bob's memory is not alice's collision
    assert f'data-similar="{unrelated.pk}"' not in body  # below the similarity floor


def test_supersede_instead_makes_the_proposal_the_successor(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    response = client_as("reviewer").post(url(project, f"{proposal.pk}/supersede/{existing.pk}/"), headers=HTMX)
    assert response.status_code == 200
    proposal.refresh_from_db()
    existing.refresh_from_db()
    assert (proposal.status, proposal.supersedes_id, proposal.version) == (Status.ACTIVE, existing.pk, 2)
    assert existing.status == Status.SUPERSEDED
    assert MemoryEdge.objects.filter(
        from_memory=proposal, to_memory=existing, relationship=Relationship.SUPERSEDES
    ).exists()
    assert MemoryRevision.objects.filter(memory=existing, action="superseded", actor="user:reviewer-person").exists()


def test_supersede_instead_of_another_users_memory_is_refused_and_changes_nothing(client_as, project):
    bobs = remember(project, EXISTING, user_id="bob")
    proposal = propose(project, PROPOSAL)
    response = client_as("reviewer").post(url(project, f"{proposal.pk}/supersede/{bobs.pk}/"), headers=HTMX)
    assert response.status_code == 409
    assert Memory.objects.get(pk=proposal.pk).status == Status.PENDING_REVIEW
    assert Memory.objects.get(pk=bobs.pk).status == Status.ACTIVE


def test_a_viewer_cannot_supersede_instead(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    response = client_as("viewer").post(url(project, f"{proposal.pk}/supersede/{existing.pk}/"), headers=HTMX)
    assert response.status_code == 403
    assert Memory.objects.get(pk=existing.pk).status == Status.ACTIVE


def test_merge_edits_the_existing_memory_and_rejects_the_proposal(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    merged = "The user drinks black coffee, no sugar, every morning."
    response = client_as("reviewer").post(
        url(project, f"{proposal.pk}/merge/{existing.pk}/"), {"content": merged}, headers=HTMX
    )
    assert response.status_code == 200
    existing.refresh_from_db()
    assert existing.content == merged and existing.status == Status.ACTIVE
    assert Memory.objects.get(pk=proposal.pk).status == Status.DELETED
    edit = MemoryRevision.objects.get(memory=existing, action="edit")
    assert edit.before["content"] == EXISTING and str(proposal.pk) in edit.reason
    assert MemoryRevision.objects.filter(memory=proposal, action="delete", reason=f"merged into {existing.pk}").exists()


def test_merge_with_an_empty_text_keeps_both_texts(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    client_as("reviewer").post(url(project, f"{proposal.pk}/merge/{existing.pk}/"), {"content": "  "}, headers=HTMX)
    assert Memory.objects.get(pk=existing.pk).content == f"{EXISTING} {PROPOSAL}"


def test_undo_of_supersede_instead_restores_both_memories(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    client = client_as("reviewer")
    client.post(url(project, f"{proposal.pk}/supersede/{existing.pk}/"), headers=HTMX)
    assert "Undo" in client.get(url(project)).content.decode()
    response = client.post(url(project, "undo/"), headers=HTMX)
    assert response.status_code == 200 and "Undone" in response.content.decode()
    proposal.refresh_from_db()
    existing.refresh_from_db()
    assert (proposal.status, proposal.supersedes_id, proposal.version) == (Status.PENDING_REVIEW, None, 1)
    assert existing.status == Status.ACTIVE
    assert not MemoryEdge.objects.filter(from_memory=proposal, to_memory=existing).exists()
    # History keeps the action and its undo.
    actions = list(MemoryRevision.objects.filter(memory=proposal).values_list("action", flat=True))
    assert actions == ["create", "approve", "unapprove"]
    assert list(MemoryRevision.objects.filter(memory=existing).values_list("action", flat=True)) == [
        "create",
        "superseded",
        "restore",
    ]


def test_undo_of_merge_gives_back_the_old_text_and_the_proposal(client_as, project):
    existing = remember(project, EXISTING)
    proposal = propose(project, PROPOSAL)
    client = client_as("reviewer")
    client.post(url(project, f"{proposal.pk}/merge/{existing.pk}/"), {"content": "Merged."}, headers=HTMX)
    client.post(url(project, "undo/"), headers=HTMX)
    assert Memory.objects.get(pk=existing.pk).content == EXISTING
    assert Memory.objects.get(pk=proposal.pk).status == Status.PENDING_REVIEW


def test_undo_of_a_reject_and_of_a_bulk_approve(client_as, project):
    first, second = propose(project, "First proposal."), propose(project, "Second proposal.")
    client = client_as("reviewer")
    client.post(url(project, f"{first.pk}/reject/"), headers=HTMX)
    client.post(url(project, "undo/"), headers=HTMX)
    assert Memory.objects.get(pk=first.pk).status == Status.PENDING_REVIEW
    client.post(url(project, "bulk/"), {"action": "approve", "ids": [str(first.pk), str(second.pk)]}, headers=HTMX)
    client.post(url(project, "undo/"), headers=HTMX)
    assert {m.status for m in Memory.objects.filter(pk__in=[first.pk, second.pk])} == {Status.PENDING_REVIEW}


def test_undo_refuses_what_changed_since_and_twice(client_as, project):
    proposal = propose(project, "Approve me.")
    client = client_as("reviewer")
    client.post(url(project, f"{proposal.pk}/approve/"), headers=HTMX)
    lifecycle.memory_archive(memory=proposal, actor="user:someone-else")
    response = client.post(url(project, "undo/"), headers=HTMX)
    assert "1 could not be undone" in response.content.decode()
    assert Memory.objects.get(pk=proposal.pk).status == Status.ARCHIVED
    again = client.post(url(project, "undo/"), headers=HTMX)
    assert again.status_code == 409 and again.content.decode() == "There is nothing to undo."


def test_undo_is_per_reviewer(client_as, project):
    proposal = propose(project, "Approve me.")
    client_as("reviewer").post(url(project, f"{proposal.pk}/approve/"), headers=HTMX)
    response = client_as("admin").post(url(project, "undo/"), headers=HTMX)
    assert response.status_code == 409
    assert Memory.objects.get(pk=proposal.pk).status == Status.ACTIVE


def test_filters_by_user_category_and_confidence(client_as, project):
    low = propose(project, "Low confidence.", category="user-facts", metadata={"confidence": 0.3})
    high = propose(project, "High confidence.", category="user-facts", metadata={"confidence": 0.9})
    bobs = propose(project, "Bob's proposal.", user_id="bob", metadata={"confidence": 0.9})
    client = client_as("viewer")

    def shown(**query: str) -> set[str]:
        body = client.get(url(project), query, headers=HTMX).content.decode()
        return {str(m.pk) for m in (low, high, bobs) if f'id="card-{m.pk}"' in body}

    assert shown() == {str(low.pk), str(high.pk), str(bobs.pk)}
    assert shown(user="bob") == {str(bobs.pk)}
    assert shown(category="user-facts") == {str(low.pk), str(high.pk)}
    assert shown(confidence="low") == {str(low.pk)}
    assert shown(confidence="high", user="alice") == {str(high.pk)}
    assert shown(confidence="nonsense") == shown()  # an invalid filter is ignored, not a 500
    page = client.get(url(project), {"user": "bob"}).content.decode()
    assert "1 of 3 match the filters." in page
    assert '<span class="badge" id="pending-count">3</span>' in page  # the heading counts all waiting
