"""Dependent invalidation (docs/adr/0094-dependent-invalidation.md): a memory linked to another as
derived from it or depending on it waits for review again when that one is superseded, merged
or forgotten, with the reason "what it rests on changed"."""

from __future__ import annotations

import pytest

from consolidation import services as consolidation_services
from consolidation.models import ConsolidationAction
from memories import edges, lifecycle, review
from memories.models import Memory, Status
from tests.consolidation.conftest import consolidate, fresh, remember

pytestmark = pytest.mark.django_db


def rests_on(api, make_memory, relationship: str = "depends_on") -> tuple[dict, dict]:
    source = make_memory(content="The team deploys the API on Heroku.")
    plan = make_memory(
        content="The deploy checklist starts with the Heroku release phase.",
        related=[{"id": source["id"], "relationship": relationship}],
    )
    assert plan["related"] == [{"id": source["id"], "relationship": relationship}]
    return source, plan


def last_revision(memory_id: str):
    return Memory.objects.get(pk=memory_id).revisions.order_by("-created_at", "-id").first()


def test_a_dependent_memory_returns_to_review_when_its_source_is_superseded(api, make_memory):
    source, plan = rests_on(api, make_memory)
    unrelated = make_memory(content="The user likes short answers.")
    response = api.post(
        f"/memories/{source['id']}/supersede", {"user_id": "alice", "content": "The team deploys the API on Fly.io."}
    )
    assert response.status_code == 201
    waiting = api.get(f"/memories/{plan['id']}", user_id="alice").json()
    assert waiting["status"] == "pending_review"
    revision = last_revision(plan["id"])
    assert revision.action == "return_to_review"
    assert revision.reason == f"what it rests on changed: {source['id']} was superseded"
    assert api.get(f"/memories/{unrelated['id']}", user_id="alice").json()["status"] == "active"
    # The review decides: approved, it is current again.
    review.memory_approve(memory=Memory.objects.get(pk=plan["id"]), actor="user:reviewer")
    assert Memory.objects.get(pk=plan["id"]).status == Status.ACTIVE


@pytest.mark.parametrize(("action", "word"), [("delete", "deleted"), ("archive", "archived")])
def test_a_memory_derived_from_a_forgotten_one_returns_to_review(api, make_memory, action, word):
    source, derived = rests_on(api, make_memory, "derived_from")
    memory = Memory.objects.get(pk=source["id"])
    getattr(lifecycle, f"memory_{action}")(memory=memory, actor="user:someone")
    assert Memory.objects.get(pk=derived["id"]).status == Status.PENDING_REVIEW
    assert last_revision(derived["id"]).reason == f"what it rests on changed: {source['id']} was {word}"


def test_deleting_through_the_api_sends_what_rests_on_it_to_review(api, make_memory):
    source, plan = rests_on(api, make_memory)
    assert api.delete(f"/memories/{source['id']}", user_id="alice").status_code == 204
    assert api.get(f"/memories/{plan['id']}", user_id="alice").json()["status"] == "pending_review"


def test_only_what_rests_on_the_memory_returns_and_only_when_active(api, make_memory):
    source = make_memory(content="The team deploys the API on Heroku.")
    related = make_memory(content="Heroku bills monthly.", related=[{"id": source["id"], "relationship": "related"}])
    gone = make_memory(content="An older plan on Heroku.", related=[{"id": source["id"], "relationship": "depends_on"}])
    lifecycle.memory_archive(memory=Memory.objects.get(pk=gone["id"]), actor="user:someone")
    # The source rests on nothing of theirs: a link from it is no dependency of it.
    target = make_memory(content="The API is written in Go.")
    edges.edge_link(
        source=Memory.objects.get(pk=source["id"]),
        target=Memory.objects.get(pk=target["id"]),
        relationship="depends_on",
        actor="user:someone",
    )
    lifecycle.memory_delete(memory=Memory.objects.get(pk=source["id"]), actor="user:someone")
    assert Memory.objects.get(pk=related["id"]).status == Status.ACTIVE
    assert Memory.objects.get(pk=gone["id"]).status == Status.ARCHIVED
    assert Memory.objects.get(pk=target["id"]).status == Status.ACTIVE


def test_a_dependent_returns_to_review_when_consolidation_merges_its_source_and_back_on_undo(project):
    first = remember(project, "The user has a dog named Pixel.")
    second = remember(project, "The user's dog is called Pixel.")
    plan_a = remember(project, "The user walks Pixel every morning.", related=[(str(first.pk), "depends_on")])
    plan_b = remember(project, "Pixel's vet is in Alfama.", related=[(str(second.pk), "derived_from")])
    run = consolidate(project)
    action = ConsolidationAction.objects.get(run=run)
    waiting = plan_a if action.retired_id == first.pk else plan_b
    staying = plan_b if waiting is plan_a else plan_a
    assert fresh(waiting).status == Status.PENDING_REVIEW and fresh(staying).status == Status.ACTIVE
    assert last_revision(str(waiting.pk)).reason == f"what it rests on changed: {action.retired_id} was merged"
    consolidation_services.action_undo(action=action, actor="user:reviewer")
    assert fresh(waiting).status == Status.ACTIVE and last_revision(str(waiting.pk)).action == "restore"


def test_a_dependent_returns_to_review_when_consolidation_supersedes_its_source(project):
    old = remember(project, "Uses black to format Python.")
    check = remember(project, "The pre-commit hook runs black on every commit.", related=[(str(old.pk), "depends_on")])
    remember(project, "Formats Python with ruff now.")
    assert consolidate(project).counts["superseded"] == 1
    assert fresh(check).status == Status.PENDING_REVIEW
    assert last_revision(str(check.pk)).reason == f"what it rests on changed: {old.pk} was superseded"
