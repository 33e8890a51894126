"""The review flows in Chromium: the list's bulk bar, the review queue (collisions,
supersede-instead, merge, undo, filters, compact layout), capture job pages, and the
list and review pages on a 390 px phone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from capture.models import CaptureJob, JobStatus
from memories import edges, services
from memories.models import Memory, MemoryRevision, Status
from tests.ui.conftest import ARTIFACTS
from tests.ui.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@contextmanager
def _page(browser: Any, request: pytest.FixtureRequest, width: int) -> Iterator[Any]:
    """A page ``width`` px wide (390: a phone, with touch); screenshots a failed test like conftest's."""
    phone = width <= PHONE["width"]
    viewport = PHONE if phone else {"width": width, "height": 800}
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        raise
    finally:
        context.close()


def test_eighteen_proposals_make_a_compact_review_page(page, live_server, person, project, memory_factory):
    for i in range(18):
        memory_factory(
            f"Proposal number {i}: the user prefers a long description of their editor settings, number {i}.",
            status=Status.PENDING_REVIEW,
            category="user-facts",
            metadata={"confidence": 0.6, "reason": "said so in the conversation"},
        )
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    height = page.evaluate("document.documentElement.scrollHeight")
    # A reference figure: 5,034 px for these 18 proposals when this test was written.
    print(f"review page with 18 proposals at 1280x800: {height} px high")
    assert page.locator(".review-card").count() == 18
    assert height < 2_800


OVERFLOW_JS = """(selector) => {
    const card = document.querySelector(selector).closest('.card');
    const box = card.getBoundingClientRect();
    const inside = Array.from(card.querySelectorAll('*')).filter((el) => {
        const r = el.getBoundingClientRect();
        // What is drawn beyond the card's right edge and not inside a scrolling box.
        return r.right > box.right + 1 && !el.closest('.table-scroll');
    });
    return {page: document.documentElement.scrollWidth, view: innerWidth, poking: inside.length,
            scroller: card.querySelector('.table-scroll') ?
                card.querySelector('.table-scroll').getBoundingClientRect().right <= box.right + 1 : false};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_playground_candidate_table_stays_inside_its_card(browser, live_server, person, project, width, request):
    long = "Alice deploys billing with https://example.com/deploy/pipelines/kubernetes-billing-service-config.yaml"
    made = [
        services.memory_create(project=project, draft=services.MemoryDraft(user_id="alice", content=text), actor="t")
        for text in (long, "Alice prefers tabs over spaces in Go code.")
    ]
    edges.edge_link(source=made[0], target=made[1], relationship="related", actor="t")
    with _page(browser, request, width) as page:
        sign_in(page, live_server, person("viewer"))
        page.goto(f"{live_server.url}/p/{project.slug}/playground/?user=alice&text=How+does+Alice+deploy+billing")
        page.locator("#candidates tbody tr").first.wait_for()
        found = page.evaluate(OVERFLOW_JS, "#candidates")
        assert found["page"] <= found["view"], found
        assert found["scroller"] and found["poking"] == 0, found
        # Every column is in view: the table needs no sideways scrolling to show the outcome.
        assert page.evaluate(
            "(() => { const s = document.querySelector('.table-scroll'); return s.scrollWidth <= s.clientWidth; })()"
        )


# --- The memory list's bulk bar -----------------------------------------------------


def test_the_bulk_bar_appears_when_ticked_and_needs_a_target_category(
    page, live_server, person, project, memory_factory
):
    made = [memory_factory(f"Bulk memory {i}.", category="user-facts") for i in range(3)]
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/")
    bar = page.locator("#bulk")
    assert not bar.is_visible()
    page.locator(f"#row-{made[0].pk} input[name=ids]").check()
    bar.wait_for(state="visible")
    assert bar.locator("[data-bulk-count]").inner_text() == "1 ticked"
    page.locator("[data-select-all=bulk]").check()
    assert bar.locator("[data-bulk-count]").inner_text() == "3 ticked"
    page.select_option("#id_action", "category")
    # No category chosen: the browser refuses to send the form, nothing changes.
    page.click("#bulk button[type=submit]")
    assert page.evaluate("document.querySelector('#id_bulk_category').validity.valueMissing")
    assert set(Memory.objects.filter(pk__in=[m.pk for m in made]).values_list("category", flat=True)) == {"user-facts"}
    page.select_option("#id_bulk_category", "corrections")
    page.click("#bulk button[type=submit]")
    page.locator("#rows .msg.success").wait_for()
    assert set(Memory.objects.filter(pk__in=[m.pk for m in made]).values_list("category", flat=True)) == {"corrections"}
    bar.wait_for(state="hidden")  # the new rows come unticked (after htmx's swap settles)


def test_a_refused_bulk_action_keeps_the_table_and_the_filters_working(
    page, live_server, person, project, memory_factory
):
    memory_factory("Alpha memory.")
    memory_factory("Beta memory.")
    errors: list[str] = []
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/")
    page.evaluate(
        "document.body.addEventListener('htmx:targetError', () => window.targetErrors = (window.targetErrors || 0) + 1)"
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    box = page.locator("#rows input[name=ids]").first
    box.check()
    # Another reviewer's action made the ticked id unknown by the time Apply is pressed.
    box.evaluate("el => { el.value = '00000000-0000-0000-0000-000000000000'; }")
    page.click("#bulk button[type=submit]")
    page.locator("#rows .msg.error", has_text="Tick at least one memory.").wait_for()
    assert page.locator("#rows table.memories tbody tr").count() == 2
    page.fill("#id_q", "Beta")
    page.locator("#rows tbody tr").nth(1).wait_for(state="detached")
    assert "Beta memory." in page.locator("#rows").inner_text()
    assert page.evaluate("window.targetErrors || 0") == 0 and errors == []


# --- The review queue ------------------------------------------------------------------


def _remember(project: Any, content: str, *, status: str = Status.ACTIVE) -> Memory:
    """Written and embedded inline with the local model, so the review page finds collisions."""
    draft = services.MemoryDraft(user_id="alice", content=content, category="user-facts")
    return services.memory_create(project=project, draft=draft, actor="system:test", status=status)


def _collision_on_the_review_page(page: Any, live_server: Any, person: Any, project: Any) -> tuple[Memory, Memory, Any]:
    """An active memory, a proposal that collides with it, and the review card's line for it."""
    existing = _remember(project, "The user drinks black coffee every morning.")
    proposal = _remember(project, "The user drinks black coffee every morning, no sugar.", status=Status.PENDING_REVIEW)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    return existing, proposal, page.locator(f"#card-{proposal.pk} [data-similar='{existing.pk}']")


def test_a_reviewer_supersedes_the_colliding_memory_instead_and_undoes_it(page, live_server, person, project):
    existing, proposal, collision = _collision_on_the_review_page(page, live_server, person, project)
    assert "black coffee every morning." in collision.inner_text()
    collision.locator("button.supersede-instead").click()
    page.locator(f"#card-{proposal.pk}").wait_for(state="detached")
    assert page.locator("#pending-count").inner_text() == "0"
    assert Memory.objects.get(pk=proposal.pk).supersedes_id == existing.pk
    assert Memory.objects.get(pk=existing.pk).status == Status.SUPERSEDED
    page.click("#undo-button")
    page.locator(f"#card-{proposal.pk}").wait_for()
    assert Memory.objects.get(pk=proposal.pk).status == Status.PENDING_REVIEW
    assert Memory.objects.get(pk=existing.pk).status == Status.ACTIVE
    assert MemoryRevision.objects.filter(memory=proposal, action="unapprove").exists()


def test_a_reviewer_merges_a_proposal_into_the_existing_memory(page, live_server, person, project):
    existing, proposal, collision = _collision_on_the_review_page(page, live_server, person, project)
    collision.locator("details.merge summary").click()
    collision.locator("textarea").fill("The user drinks black coffee, no sugar, every morning.")
    collision.locator("button[type=submit].primary").click()
    page.locator(f"#card-{proposal.pk}").wait_for(state="detached")
    assert Memory.objects.get(pk=existing.pk).content == "The user drinks black coffee, no sugar, every morning."
    assert Memory.objects.get(pk=proposal.pk).status == Status.DELETED


def test_escape_closes_the_editor_and_j_moves_on_instead_of_typing(page, live_server, person, project, memory_factory):
    first = memory_factory("First proposal.", status=Status.PENDING_REVIEW)
    second = memory_factory("Second proposal.", status=Status.PENDING_REVIEW)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    page.keyboard.press("j")
    page.keyboard.press("e")
    textarea = page.locator(f"#card-{first.pk} .edit-approve textarea")
    assert page.evaluate("document.activeElement.tagName") == "TEXTAREA"
    page.keyboard.press("Escape")
    assert not page.locator(f"#card-{first.pk} .edit-approve").evaluate("d => d.open")
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == f"card-{second.pk}"
    assert textarea.input_value() == "First proposal."


def test_review_filters_and_select_all_tick_only_what_is_shown(page, live_server, person, project, memory_factory):
    memory_factory("Alice's low one.", status=Status.PENDING_REVIEW, metadata={"confidence": 0.3})
    memory_factory("Alice's high one.", status=Status.PENDING_REVIEW, metadata={"confidence": 0.9})
    memory_factory("Bob's one.", status=Status.PENDING_REVIEW, user_id="bob", metadata={"confidence": 0.3})
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    page.select_option("#id_confidence", "low")
    page.locator(".review-card").nth(2).wait_for(state="detached")
    page.fill("#review-user", "bob")
    page.locator(".review-card").nth(1).wait_for(state="detached")
    page.locator("[data-select-all=review-bulk]").check()
    assert page.locator("#review-bulk [data-bulk-count]").inner_text() == "1 ticked"
    page.click("#review-bulk button[value=reject]")
    page.locator("#queue .msg.success", has_text="Rejected 1 of 1").wait_for()
    assert Memory.objects.get(content="Bob's one.").status == Status.DELETED
    assert Memory.objects.filter(status=Status.PENDING_REVIEW).count() == 2


# --- Capture jobs -----------------------------------------------------------------------


def test_a_capture_job_opens_from_the_list_and_links_to_its_memory(page, live_server, person, project, memory_factory):
    written = memory_factory("The user uses Helix.", status=Status.PENDING_REVIEW)
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        status=JobStatus.DONE,
        window=[{"role": "user", "content": "I moved to Helix."}],
        proposals=[
            {
                "content": "The user uses Helix.",
                "category": "user-facts",
                "outcome": "created",
                "memory_id": str(written.pk),
                "detail": "",
            },
            {
                "content": "The user likes editors.",
                "category": "user-facts",
                "outcome": "duplicate",
                "memory_id": None,
                "detail": "same content as an existing memory",
            },
        ],
        memory_ids=[str(written.pk)],
    )
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/captures/")
    page.click(f"#job-{job.pk} a")
    page.wait_for_url(f"**/captures/{job.pk}/")
    assert "I moved to Helix." in page.locator(".job-messages").inner_text()
    assert "same content as an existing memory" in page.locator("#proposals").inner_text()
    page.click("#proposals a:has-text('written memory')")
    page.wait_for_url(f"**/memories/{written.pk}/")


# --- A 390 px phone -------------------------------------------------------------------


def test_the_list_fits_a_phone_and_its_bulk_bar_works(browser, live_server, person, project, memory_factory, request):
    made = [
        memory_factory(
            f"Phone memory {i} with a long address https://example.com/a/very/long/path/{i}", category="user-facts"
        )
        for i in range(4)
    ]
    with _page(browser, request, PHONE["width"]) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{project.slug}/memories/")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.locator(f"#row-{made[0].pk} input[name=ids]").tap()
        page.select_option("#id_action", "archive")
        page.locator("#bulk button[type=submit]").tap()
        page.locator("#rows .msg.success").wait_for()
        assert Memory.objects.get(pk=made[0].pk).status == Status.ARCHIVED
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_review_queue_fits_a_phone_and_its_buttons_work(browser, live_server, person, project, request):
    existing = _remember(project, "The user drinks black coffee every morning.")
    proposal = _remember(project, "The user drinks black coffee every morning, no sugar.", status=Status.PENDING_REVIEW)
    with _page(browser, request, PHONE["width"]) as page:
        sign_in(page, live_server, person("reviewer"))
        page.goto(f"{live_server.url}/p/{project.slug}/review/")
        page.locator(f"#card-{proposal.pk} [data-similar='{existing.pk}']").wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        approve = page.locator(f"#card-{proposal.pk} button[data-key=a]")
        assert approve.bounding_box()["height"] >= 44  # a thumb-sized target
        approve.tap()
        page.locator(f"#card-{proposal.pk}").wait_for(state="detached")
        assert Memory.objects.get(pk=proposal.pk).status == Status.ACTIVE
