"""Consolidation in the curation UI: its proposals in the review queue (diff, reason, confidence,
approve / reject / bulk, undo), the runs' pages with undo, and starting a run for an end user."""

from __future__ import annotations

import pytest

from consolidation.models import ActionStatus, ConsolidationAction, ConsolidationRun
from memories.models import CapturePolicy, Memory, Project, Status
from tests.consolidation.conftest import consolidate, fresh, remember

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")
BLACK, RUFF = "Uses black to format Python.", "Formats Python with ruff now."


@pytest.fixture
def review_project(project: Project) -> Project:
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    project.refresh_from_db()
    return project


def proposals(project: Project) -> dict[str, ConsolidationAction]:
    consolidate(project)
    return {a.kind: a for a in ConsolidationAction.objects.filter(project=project)}


def test_the_review_queue_shows_each_proposal_with_its_diff_reason_and_confidence(client_as, review_project):
    for text in (*DOG, BLACK, RUFF):
        remember(review_project, text)
    found = proposals(review_project)
    body = client_as("viewer").get(f"/p/{review_project.slug}/review/").content.decode()
    card = body[body.index(f'id="proposal-{found["supersede"].pk}"') :]
    card = card[: card.index("</ul>")]
    assert "<del>" in card and "<ins>" in card  # the word diff from the older memory to the newer
    assert BLACK in card and RUFF in card and "black -&gt; ruff" in card and "confidence 0.88" in card
    assert 'id="consolidation-count">2<' in body
    assert f'id="proposal-{found["merge"].pk}"' in body
    # A viewer sees them but cannot decide.
    assert "review/consolidations/" not in body.split('id="consolidations"', 1)[1].split("</section>", 1)[0]


def test_approving_applies_the_change_and_undo_takes_it_back(client_as, review_project):
    old, new = remember(review_project, BLACK), remember(review_project, RUFF)
    action = proposals(review_project)["supersede"]
    reviewer = client_as("reviewer")
    assert fresh(old).status == Status.ACTIVE  # nothing changed before approval
    response = reviewer.post(f"/p/{review_project.slug}/review/consolidations/{action.pk}/approve/", headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="consolidation-count" class="badge" hx-swap-oob="true">0<' in body and "Approved the supersede." in body
    assert fresh(old).status == Status.SUPERSEDED and fresh(new).supersedes_id == old.pk
    undone = reviewer.post(f"/p/{review_project.slug}/review/undo/", headers=HTMX)
    assert undone.status_code == 200 and "Undone: Approved the supersede." in undone.content.decode()
    assert fresh(old).status == Status.ACTIVE and fresh(new).supersedes_id is None
    assert ConsolidationAction.objects.get(pk=action.pk).status == ActionStatus.PROPOSED
    assert f'id="proposal-{action.pk}"' in undone.content.decode()


def test_rejecting_changes_nothing_and_the_pair_is_not_proposed_again(client_as, review_project):
    first, second = (remember(review_project, text) for text in DOG)
    action = proposals(review_project)["merge"]
    reviewer = client_as("reviewer")
    assert reviewer.post(f"/p/{review_project.slug}/review/consolidations/{action.pk}/reject/").status_code == 302
    assert ConsolidationAction.objects.get(pk=action.pk).status == ActionStatus.REJECTED
    assert fresh(first).status == fresh(second).status == Status.ACTIVE
    assert consolidate(review_project).counts["proposed"] == 0
    again = reviewer.post(f"/p/{review_project.slug}/review/consolidations/{action.pk}/approve/", headers=HTMX)
    assert again.status_code == 409


def test_bulk_approve_applies_every_ticked_proposal(client_as, review_project):
    memories = [remember(review_project, text) for text in (*DOG, BLACK, RUFF)]
    found = proposals(review_project)
    response = client_as("reviewer").post(
        f"/p/{review_project.slug}/review/consolidations/bulk/",
        {"action": "approve", "ids": [str(a.pk) for a in found.values()]},
        headers=HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 200 and "Approved 2 of 2 consolidation proposals." in body
    assert 'id="consolidation-count">0<' in body
    assert {a.status for a in ConsolidationAction.objects.all()} == {ActionStatus.APPLIED}
    assert sum(fresh(m).status == Status.SUPERSEDED for m in memories) == 2


def test_a_viewer_cannot_decide_a_proposal(client_as, review_project):
    for text in DOG:
        remember(review_project, text)
    action = proposals(review_project)["merge"]
    response = client_as("viewer").post(f"/p/{review_project.slug}/review/consolidations/{action.pk}/approve/")
    assert response.status_code == 403
    assert ConsolidationAction.objects.get(pk=action.pk).status == ActionStatus.PROPOSED


def test_a_reviewer_starts_a_consolidation_from_the_memory_list_and_follows_it(client_as, project):
    for text in DOG:
        remember(project, text)
    reviewer = client_as("reviewer")
    listing = reviewer.get(f"/p/{project.slug}/memories/?user=alice").content.decode()
    assert 'id="consolidate-user-form"' in listing and "Consolidate alice's memories" in listing
    assert (
        'id="consolidate-user-form"'
        not in client_as("viewer").get(f"/p/{project.slug}/memories/?user=alice").content.decode()
    )
    profile_page = reviewer.get(f"/p/{project.slug}/users/alice/profile/").content.decode()
    assert 'id="consolidate-user-form"' in profile_page  # the end user's own page has it too
    started = reviewer.post(f"/p/{project.slug}/consolidations/", {"user_id": "alice"})
    run = ConsolidationRun.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/p/{project.slug}/consolidations/{run.pk}/"
    assert run.trigger == "ui" and run.created_by == "user:reviewer-person"
    page = reviewer.get(started["Location"]).content.decode()
    assert 'hx-trigger="every 2s"' in page and "queued" in page
    from consolidation import services

    services.consolidation_run(run_id=str(run.pk))
    page = reviewer.get(started["Location"]).content.decode()
    assert 'hx-trigger="every 2s"' not in page and "1 merged" in page
    action = ConsolidationAction.objects.get()
    undo = reviewer.post(f"/p/{project.slug}/consolidations/actions/{action.pk}/undo/")
    assert undo.status_code == 302
    assert all(m.status == Status.ACTIVE for m in Memory.objects.all())
    runs = reviewer.get(f"/p/{project.slug}/consolidations/").content.decode()
    assert f'id="run-{run.pk}"' in runs


def test_another_projects_runs_and_proposals_are_not_found(client_as, project, other_project):
    Project.objects.filter(pk=other_project.pk).update(capture_policy=CapturePolicy.REVIEW)
    other_project.refresh_from_db()
    for text in DOG:
        remember(other_project, text)
    consolidate(other_project)
    action, run = ConsolidationAction.objects.get(), ConsolidationRun.objects.get()
    reviewer = client_as("reviewer")
    assert reviewer.post(f"/p/{project.slug}/review/consolidations/{action.pk}/approve/").status_code == 404
    assert reviewer.get(f"/p/{project.slug}/consolidations/{run.pk}/").status_code == 404
    assert f"proposal-{action.pk}" not in reviewer.get(f"/p/{project.slug}/review/").content.decode()


def test_a_memory_back_in_review_because_what_it_rests_on_changed_says_so_on_its_card(client_as, project):
    from memories import lifecycle

    source = remember(project, "The team deploys the API on Heroku.")
    plan = remember(
        project, "The deploy checklist starts with the Heroku release phase.", related=[(str(source.pk), "depends_on")]
    )
    lifecycle.memory_delete(memory=source, actor="user:someone")
    body = client_as("reviewer").get(f"/p/{project.slug}/review/").content.decode()
    card = body[body.index(f'id="card-{plan.pk}"') :]
    assert f"Why: what it rests on changed: {source.pk} was deleted" in card[: card.index("</li>")]
