"""Issue 16 (part A) in Chromium: the list's bulk bar, the review queue (collisions,
supersede-instead, merge, undo, filters, compact layout), capture job pages, and the
list and review pages on a 390 px phone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memories.models import Memory, Status
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
    print(f"review page with 18 proposals at 1280x800: {height} px high")
    assert page.locator(".review-card").count() == 18


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
    from memories import services

    long = "Alice deploys billing with https://example.com/deploy/pipelines/kubernetes-billing-service-config.yaml"
    made = [
        services.memory_create(project=project, draft=services.MemoryDraft(user_id="alice", content=text), actor="t")
        for text in (long, "Alice prefers tabs over spaces in Go code.")
    ]
    services.edge_link(source=made[0], target=made[1], relationship="related", actor="t")
    with _page(browser, request, width) as page:
        sign_in(page, live_server, person("viewer"))
        page.goto(f"{live_server.url}/p/{project.slug}/playground/?user=alice&text=How+does+Alice+deploy+billing")
        page.locator("#candidates tbody tr").first.wait_for()
        found = page.evaluate(OVERFLOW_JS, "#candidates")
        assert found["page"] <= found["view"], found
        assert found["scroller"] and found["poking"] == 0, found
        # Every column is in view: the table needs no sideways scrolling to show the outcome.
        assert page.evaluate("(() => { const s = document.querySelector('.table-scroll'); "
                             "return s.scrollWidth <= s.clientWidth; })()")
