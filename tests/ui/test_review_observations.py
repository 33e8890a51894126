"""Observations in the curation UI (docs/adr/0110-consolidation-observations.md): the review card
(statement, cited memories linked to their pages, confidence, reason), approve / reject / bulk with
undo, a stale proposal refused with a clear 409, the run page's counts and undo, and the written
observation's page showing what it was derived from. The LLM is the loopback OpenAI-compatible
server; the vectors are the real local model's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils.html import escape

from consolidation.models import ActionStatus, ConsolidationAction, ConsolidationObservation, ConsolidationRun
from memories import lifecycle
from memories.models import CapturePolicy, Kind, Memory, MemoryEdge, Project, Relationship, Status
from tests.consolidation.conftest import consolidate, fresh, remember
from tests.consolidation.test_observations import STATEMENT, WORK, observer_reply

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")


@pytest.fixture
def llm(settings: Any, fake_openai: Any) -> Any:
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.default_chat = observer_reply()
    return fake_openai


def with_policy(project: Project, policy: str) -> Project:
    Project.objects.filter(pk=project.pk).update(capture_policy=policy)
    project.refresh_from_db()
    return project


def proposed(project: Project) -> tuple[ConsolidationObservation, list[Memory]]:
    """The work memories of alice and the one observation a run under review proposes about them."""
    with_policy(project, CapturePolicy.REVIEW)
    work = [remember(project, text) for text in WORK]
    [observation] = ConsolidationObservation.objects.filter(run=consolidate(project))
    return observation, work


def card_of(body: str, observation: ConsolidationObservation) -> str:
    card = body[body.index(f'id="observation-{observation.pk}"') :]
    return card[: card.index("</ul>")]


def test_the_review_queue_shows_an_observation_with_what_it_cites(client_as, project, llm):
    observation, work = proposed(project)
    body = client_as("viewer").get(f"/p/{project.slug}/review/").content.decode()
    card = card_of(body, observation)
    assert escape(STATEMENT) in card and "confidence 0.75" in card and f"Why: {observation.reason}" in card
    for memory in work:
        if str(memory.pk) in observation.cited:
            assert f'href="/p/{project.slug}/memories/{memory.pk}/"' in card and escape(memory.content) in card
    assert 'id="consolidation-count">1<' in body  # the heading counts observations too
    # A viewer sees it but cannot decide.
    assert "review/observations/" not in body


def test_approving_writes_the_observation_and_undo_takes_it_back(client_as, project, llm):
    observation, _ = proposed(project)
    reviewer = client_as("reviewer")
    response = reviewer.post(f"/p/{project.slug}/review/observations/{observation.pk}/approve/", headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="consolidation-count" class="badge" hx-swap-oob="true">0<' in body
    assert "Approved the observation" in body
    [memory] = Memory.objects.filter(project=project, kind=Kind.OBSERVATION)
    assert memory.content == STATEMENT and memory.status == Status.ACTIVE
    links = MemoryEdge.objects.filter(from_memory=memory, relationship=Relationship.DERIVED_FROM)
    assert {str(pk) for pk in links.values_list("to_memory_id", flat=True)} == set(observation.cited)
    # Its page shows what it was derived from, each linked.
    page = reviewer.get(f"/p/{project.slug}/memories/{memory.pk}/").content.decode()
    links_section = page[page.index('id="links"') :]
    links_section = links_section[: links_section.index("</ul>")]
    assert links_section.count("derived from") == len(observation.cited)
    undone = reviewer.post(f"/p/{project.slug}/review/undo/", headers=HTMX)
    assert undone.status_code == 200 and "Undone: Approved the observation" in undone.content.decode()
    assert fresh(memory).status == Status.DELETED
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.PROPOSED
    assert f'id="observation-{observation.pk}"' in undone.content.decode()


def test_rejecting_writes_nothing_and_a_second_decision_is_a_409(client_as, project, llm):
    observation, _ = proposed(project)
    reviewer = client_as("reviewer")
    assert reviewer.post(f"/p/{project.slug}/review/observations/{observation.pk}/reject/").status_code == 302
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.REJECTED
    assert not Memory.objects.filter(project=project, kind=Kind.OBSERVATION).exists()
    again = reviewer.post(f"/p/{project.slug}/review/observations/{observation.pk}/approve/", headers=HTMX)
    assert again.status_code == 409 and "already been decided" in again.content.decode()
    assert "HX-Trigger" not in again  # not stale: the card is not marked


def test_approving_a_stale_observation_is_a_clear_409_that_marks_its_card(client_as, project, llm):
    observation, work = proposed(project)
    cited = next(m for m in work if str(m.pk) in observation.cited)
    lifecycle.memory_delete(memory=cited, actor="user:alice")
    reviewer = client_as("reviewer")
    response = reviewer.post(f"/p/{project.slug}/review/observations/{observation.pk}/approve/", headers=HTMX)
    assert response.status_code == 409 and response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert text.startswith("Not applied: the memories it cites changed since the proposal")
    assert "stale and has left the review queue" in text
    trigger = json.loads(response["HX-Trigger"])["proposal-stale"]
    assert trigger == {"card": f"observation-{observation.pk}", "message": text, "count": 0}
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.STALE
    assert not Memory.objects.filter(project=project, kind=Kind.OBSERVATION).exists()
    # Without htmx: the same words as a message, back to the queue, where the card is gone.
    again = reviewer.post(f"/p/{project.slug}/review/observations/{observation.pk}/approve/", follow=True)
    assert f'id="observation-{observation.pk}"' not in again.content.decode()


def test_a_stale_merge_marks_its_card_the_same_way(client_as, project):
    with_policy(project, CapturePolicy.REVIEW)
    first, second = (remember(project, text) for text in DOG)
    consolidate(project)
    action = ConsolidationAction.objects.get()
    lifecycle.memory_delete(memory=first, actor="user:alice")
    response = client_as("reviewer").post(f"/p/{project.slug}/review/consolidations/{action.pk}/approve/", headers=HTMX)
    assert response.status_code == 409
    assert json.loads(response["HX-Trigger"])["proposal-stale"]["card"] == f"proposal-{action.pk}"
    assert fresh(second).status == Status.ACTIVE


def test_bulk_approve_takes_merges_and_observations_together(client_as, project, llm):
    observation, _ = proposed(project)
    for text in DOG:
        remember(project, text)
    consolidate(project)
    action = ConsolidationAction.objects.get(status=ActionStatus.PROPOSED)
    response = client_as("reviewer").post(
        f"/p/{project.slug}/review/consolidations/bulk/",
        {"action": "approve", "ids": [str(action.pk), f"observation-{observation.pk}", "observation-x"]},
        headers=HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 200 and "Approved 2 of 2 consolidation proposals." in body
    assert 'id="consolidation-count">0<' in body
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.APPLIED
    assert ConsolidationAction.objects.get(pk=action.pk).status == ActionStatus.APPLIED
    assert Memory.objects.filter(project=project, kind=Kind.OBSERVATION, status=Status.ACTIVE).count() == 1


def test_a_viewer_or_another_project_cannot_decide_an_observation(client_as, project, other_project, llm):
    observation, _ = proposed(project)
    assert (
        client_as("viewer").post(f"/p/{project.slug}/review/observations/{observation.pk}/approve/").status_code == 403
    )
    other = Project.objects.get(pk=other_project.pk)
    reviewer = client_as("reviewer")
    assert reviewer.post(f"/p/{other.slug}/review/observations/{observation.pk}/approve/").status_code == 404
    assert reviewer.post(f"/p/{project.slug}/review/observations/999999/approve/").status_code == 404
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.PROPOSED


def test_the_run_page_counts_the_observations_and_undoes_an_applied_one(client_as, project, llm):
    with_policy(project, CapturePolicy.AUTO)
    for text in WORK:
        remember(project, text)
    run = consolidate(project)
    observation = ConsolidationObservation.objects.get(run=run)
    reviewer = client_as("reviewer")
    page = reviewer.get(f"/p/{project.slug}/consolidations/{run.pk}/").content.decode()
    assert "1 observation written · 0 proposed for review (from 1 group of related memories)" in page
    row = page[page.index(f'id="run-observation-{observation.pk}"') :]
    row = row[: row.index("</tr>")]
    assert escape(STATEMENT) in row and f"/memories/{observation.memory_id}/" in row and "applied" in row
    assert row.count("<li>") == len(observation.cited)
    runs = reviewer.get(f"/p/{project.slug}/consolidations/").content.decode()
    listed = runs[runs.index(f'id="run-{run.pk}"') :]
    assert '<td data-label="Observations">1 written · 0 proposed</td>' in listed[: listed.index("</tr>")]
    undo = reviewer.post(f"/p/{project.slug}/consolidations/observations/{observation.pk}/undo/")
    assert undo.status_code == 302 and undo["Location"] == f"/p/{project.slug}/consolidations/{run.pk}/"
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.UNDONE
    assert Memory.objects.get(pk=observation.memory_id).status == Status.DELETED
    again = reviewer.post(f"/p/{project.slug}/consolidations/observations/{observation.pk}/undo/", follow=True)
    assert "only an applied observation" in again.content.decode()


def test_a_run_without_an_llm_says_nothing_of_observations(client_as, project):
    for text in DOG:
        remember(project, text)
    run = consolidate(project)
    page = client_as("viewer").get(f"/p/{project.slug}/consolidations/{run.pk}/").content.decode()
    assert "1 merged" in page and "observation" not in page.lower()
    assert ConsolidationRun.objects.get(pk=run.pk).counts["observation_groups"] == 0
