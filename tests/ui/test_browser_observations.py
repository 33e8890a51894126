"""Reviewing consolidation's observations in Chromium, on a laptop and on a 390 px phone: the card
(statement, cited memories, confidence, reason) inside its width, approve (the memory is written only
then) and the written observation's page with what it was derived from, undo; a stale proposal
marked in place; bulk reject of an observation with a merge."""

from __future__ import annotations

from typing import Any

import pytest

from consolidation import vectors
from consolidation.models import ActionStatus, ConsolidationAction, ConsolidationObservation
from memories import lifecycle
from memories.models import CapturePolicy, Kind, Memory, Project, Status
from tests.consolidation.conftest import consolidate, fresh, remember
from tests.consolidation.test_observations import STATEMENT, WORK, observer_reply
from tests.ui.test_browser import sign_in
from tests.ui.test_browser_review import OVERFLOW_JS, _page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")


@pytest.fixture
def review_project(project: Project, settings: Any, fake_openai: Any) -> Project:
    """A project under review, with the loopback LLM writing one observation per run."""
    vectors.forget_held()
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.default_chat = observer_reply()
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    project.refresh_from_db()
    return project


def proposed(project: Project) -> tuple[ConsolidationObservation, list[Memory]]:
    work = [remember(project, text) for text in WORK]
    consolidate(project)
    return ConsolidationObservation.objects.get(status=ActionStatus.PROPOSED), work


def observation_memories(project: Project) -> list[Memory]:
    return list(Memory.objects.filter(project=project, kind=Kind.OBSERVATION, status=Status.ACTIVE))


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reviewer_approves_an_observation_sees_its_sources_and_undoes_it(
    browser, live_server, person, review_project, width, request
):
    observation, work = proposed(review_project)
    cited = [m for m in work if str(m.pk) in observation.cited]
    with _page(browser, request, width) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
        card = page.locator(f"#observation-{observation.pk}")
        card.wait_for()
        assert card.locator(".statement").inner_text() == STATEMENT
        assert "confidence 0.75" in card.inner_text() and observation.reason in card.inner_text()
        sources = card.locator(".cites a")
        assert sorted(sources.all_inner_texts()) == sorted(m.content for m in cited)
        assert page.locator("#consolidation-count").inner_text() == "1"
        layout = page.evaluate(OVERFLOW_JS, f"#observation-{observation.pk} .cites")
        assert layout["page"] <= layout["view"] and layout["poking"] == 0, layout
        assert not observation_memories(review_project)  # nothing is written until approval
        card.locator("button", has_text="Approve").click()
        card.wait_for(state="detached")
        page.locator("#flash", has_text="Approved the observation").wait_for()
        assert page.locator("#consolidation-count").inner_text() == "0"
        [memory] = observation_memories(review_project)
        assert memory.content == STATEMENT

        # The written observation's page lists what it was derived from, each a link to it.
        page.goto(f"{live_server.url}/p/{review_project.slug}/memories/{memory.pk}/")
        links = page.locator("#links li", has=page.locator(".r-derived_from"))
        assert links.count() == len(cited)
        assert sorted(links.locator("a").all_inner_texts()) == sorted(m.content for m in cited)
        layout = page.evaluate(OVERFLOW_JS, "#links")
        assert layout["page"] <= layout["view"] and layout["poking"] == 0, layout
        links.locator("a").first.click()
        page.wait_for_url(f"**/memories/{cited[0].pk}/")

        page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
        page.click("#undo-button")
        page.locator(f"#observation-{observation.pk}").wait_for()
        assert fresh(memory).status == Status.DELETED
        assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.PROPOSED


def test_a_stale_observation_is_marked_on_its_card_on_a_phone(browser, live_server, person, review_project, request):
    observation, work = proposed(review_project)
    gone = next(m for m in work if str(m.pk) in observation.cited)
    with _page(browser, request, 390) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
        card = page.locator(f"#observation-{observation.pk}")
        card.wait_for()
        # Someone deletes a memory it cites while the page is open.
        lifecycle.memory_delete(memory=gone, actor="user:alice")
        card.locator("button", has_text="Approve").click()
        note = card.locator(".stale-note")
        note.wait_for()
        assert note.inner_text().startswith("Not applied: the memories it cites changed since the proposal")
        assert "has left the review queue" in note.inner_text()
        page.locator("#flash .msg.error", has_text="Not applied").wait_for()
        card.locator("button").first.wait_for(state="detached")
        assert card.locator("button").count() == 0 and "stale" in (card.get_attribute("class") or "")
        assert page.locator("#consolidation-count").inner_text() == "0"
        layout = page.evaluate(OVERFLOW_JS, f"#observation-{observation.pk} .stale-note")
        assert layout["page"] <= layout["view"] and layout["poking"] == 0, layout
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.STALE
    assert not observation_memories(review_project)


def test_a_reviewer_rejects_an_observation_and_a_merge_in_bulk(page, live_server, person, review_project):
    observation, work = proposed(review_project)
    dogs = [remember(review_project, text) for text in DOG]
    consolidate(review_project)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
    bar = page.locator("#consolidation-bulk")
    page.locator("[data-select-all=consolidation-bulk]").check()
    bar.wait_for(state="visible")
    assert bar.locator("[data-bulk-count]").inner_text() == "2 ticked"
    bar.locator("button", has_text="Reject ticked").click()
    page.locator("#consolidations .msg.success", has_text="Rejected 2 of 2").wait_for()
    assert page.locator(".consolidation-card").count() == 0
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.REJECTED
    assert ConsolidationAction.objects.get().status == ActionStatus.REJECTED
    assert all(fresh(m).status == Status.ACTIVE for m in (*work, *dogs)) and not observation_memories(review_project)


def test_a_runs_observations_fit_a_phone_and_an_applied_one_is_undone(
    browser, live_server, person, review_project, request
):
    Project.objects.filter(pk=review_project.pk).update(capture_policy=CapturePolicy.AUTO)
    for text in WORK:
        remember(review_project, text)
    run = consolidate(review_project)
    observation = ConsolidationObservation.objects.get(run=run)
    with _page(browser, request, 390) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{review_project.slug}/consolidations/")
        cell = page.locator(f"#run-{run.pk} [data-label=Observations]")
        assert cell.inner_text() == "1 written · 0 proposed"
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        page.goto(f"{live_server.url}/p/{review_project.slug}/consolidations/{run.pk}/")
        assert "1 observation written" in page.locator("#run-counts").inner_text()
        row = page.locator(f"#run-observation-{observation.pk}")
        assert row.locator("[data-label=Cites] a").count() == len(observation.cited)
        layout = page.evaluate(OVERFLOW_JS, f"#run-observation-{observation.pk}")
        assert layout["page"] <= layout["view"] and layout["poking"] == 0, layout
        row.locator("button", has_text="Undo").click()
        page.locator(".msg.success", has_text="Undone: the observation").wait_for()
        assert page.locator(f"#run-observation-{observation.pk} .badge", has_text="undone").count() == 1
    assert not observation_memories(review_project)
