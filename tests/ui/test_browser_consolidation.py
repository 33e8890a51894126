"""Reviewing consolidation proposals in Chromium, on a laptop and on a 390 px phone: the
proposal's diff, approve (the memories change only then), undo, bulk reject; and starting a
run from the memory list."""

from __future__ import annotations

import pytest

from consolidation import services, vectors
from consolidation.models import ActionStatus, ConsolidationAction, ConsolidationRun
from memories.models import CapturePolicy, Project, Status
from tests.consolidation.conftest import consolidate, fresh, remember
from tests.ui.test_browser import sign_in
from tests.ui.test_browser_review import OVERFLOW_JS, _page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BLACK, RUFF = "Uses black to format Python.", "Formats Python with ruff now."
DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")


@pytest.fixture
def review_project(project: Project) -> Project:
    vectors.forget_held()
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    project.refresh_from_db()
    return project


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reviewer_approves_a_consolidation_proposal_and_undoes_it(
    browser, live_server, person, review_project, width, request
):
    old, new = remember(review_project, BLACK), remember(review_project, RUFF)
    consolidate(review_project)
    action = ConsolidationAction.objects.get()
    with _page(browser, request, width) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
        card = page.locator(f"#proposal-{action.pk}")
        card.wait_for()
        assert card.locator(".diff del").count() and card.locator(".diff ins").count()
        assert "black -> ruff" in card.inner_text() and "confidence 0.88" in card.inner_text()
        assert page.locator("#consolidation-count").inner_text() == "1"
        layout = page.evaluate(OVERFLOW_JS, f"#proposal-{action.pk} .diff")
        assert layout["page"] <= layout["view"] and layout["poking"] == 0, layout
        assert fresh(old).status == Status.ACTIVE  # nothing changes until approval
        card.locator("button", has_text="Approve").click()
        card.wait_for(state="detached")
        page.locator("#flash", has_text="Approved the supersede.").wait_for()
        assert page.locator("#consolidation-count").inner_text() == "0"
        assert fresh(old).status == Status.SUPERSEDED and fresh(new).supersedes_id == old.pk
        page.click("#undo-button")
        page.locator(f"#proposal-{action.pk}").wait_for()
        assert fresh(old).status == Status.ACTIVE and fresh(new).supersedes_id is None
        assert ConsolidationAction.objects.get().status == ActionStatus.PROPOSED


def test_a_reviewer_rejects_ticked_proposals_in_bulk(page, live_server, person, review_project):
    memories = [remember(review_project, text) for text in (*DOG, BLACK, RUFF)]
    consolidate(review_project)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{review_project.slug}/review/")
    bar = page.locator("#consolidation-bulk")
    assert not bar.is_visible()
    page.locator("[data-select-all=consolidation-bulk]").check()
    bar.wait_for(state="visible")
    assert bar.locator("[data-bulk-count]").inner_text() == "2 ticked"
    bar.locator("button", has_text="Reject ticked").click()
    page.locator("#consolidations .msg.success", has_text="Rejected 2 of 2").wait_for()
    assert page.locator(".consolidation-card").count() == 0
    assert {a.status for a in ConsolidationAction.objects.all()} == {ActionStatus.REJECTED}
    assert all(fresh(m).status == Status.ACTIVE for m in memories)


def test_a_reviewer_starts_a_consolidation_from_the_memory_list(page, live_server, person, project):
    vectors.forget_held()
    for text in DOG:
        remember(project, text)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/?user=alice")
    page.locator("#consolidate-user-form button").click()
    page.locator("#run-status", has_text="queued").wait_for()
    run = ConsolidationRun.objects.get()
    services.consolidation_run(run_id=str(run.pk))  # what the worker does
    page.locator("#run-status", has_text="done").wait_for()  # the page follows the run
    assert "1 merged" in page.locator("#run-counts").inner_text()
    page.locator("#actions button", has_text="Undo").click()
    page.locator(".msg.success", has_text="Undone").wait_for()
    assert ConsolidationAction.objects.get().status == ActionStatus.UNDONE
