"""A newcomer's first hour in Chromium, at a laptop's width and a phone's: notices, the graph's
first view, the review header, the navigation and the settings page say what is true."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from capture.models import CaptureJob
from memories import edges
from memories.models import Status
from tests.ui.conftest import open_page
from tests.ui.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = {"laptop": 1400, "phone": 390}


@pytest.fixture(params=list(WIDTHS))
def sized_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page 1,400 or 390 px wide; a failed test leaves its screenshot in test-artifacts/."""
    width = WIDTHS[request.param]
    yield from open_page(browser, request, width=width, height=900 if width > 800 else 844)


def test_the_capture_job_page_shows_no_conversation_in_the_notice_banner(sized_page, live_server, person, project):
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        window=[{"role": "user", "content": "Quick heads-up: I moved to Lisbon."}],
    )
    sign_in(sized_page, live_server, person("viewer"))
    sized_page.goto(f"{live_server.url}/p/{project.slug}/captures/{job.pk}/")
    assert sized_page.locator("#flash .msg").count() == 0
    assert "Lisbon" in sized_page.locator(".job-messages").inner_text()


def test_the_graph_opens_on_the_busiest_end_user_then_the_last_one_viewed(
    sized_page, live_server, person, project, memory_factory
):
    memory_factory("Alice drinks tea.", user_id="alice")
    made = [memory_factory(f"Bob note {i}.", user_id="bob") for i in range(3)]
    edges.edge_link(source=made[0], target=made[1], relationship="refines", actor="t")
    sign_in(sized_page, live_server, person("viewer"))
    sized_page.goto(f"{live_server.url}/p/{project.slug}/graph/")
    assert sized_page.locator("#graph-user").input_value() == "bob"
    sized_page.locator("#graph circle").nth(2).wait_for()
    assert sized_page.locator("#graph-status").inner_text() == "3 memories, 1 link."
    sized_page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    sized_page.locator("#graph circle").first.wait_for()
    assert sized_page.locator("#graph-status").inner_text() == "1 memory, 0 links."
    sized_page.goto(f"{live_server.url}/p/{project.slug}/graph/")
    assert sized_page.locator("#graph-user").input_value() == "alice"


def test_after_approving_one_of_three_cards_the_header_counts_two(
    sized_page, live_server, person, project, memory_factory
):
    cards = [memory_factory(f"Pending note {i}.", status=Status.PENDING_REVIEW) for i in range(3)]
    sign_in(sized_page, live_server, person("reviewer"))
    sized_page.goto(f"{live_server.url}/p/{project.slug}/review/")
    assert sized_page.locator(".select-all").inner_text() == "Select all 3 shown"
    sized_page.locator(f"#card-{cards[0].pk} .rc-actions button[data-key=a]").click()
    sized_page.locator(f"#card-{cards[0].pk}").wait_for(state="detached")
    # The count follows once htmx has settled the swap.
    sized_page.locator(".select-all", has_text="Select all 2 shown").wait_for(timeout=3000)
    sized_page.check("[data-select-all=review-bulk]")
    assert sized_page.locator("[data-bulk-count]").inner_text() == "2 ticked"


def test_without_an_llm_the_hyde_box_is_not_ticked_and_saving_keeps_the_setting(
    sized_page, live_server, person, project
):
    assert project.hyde_enabled  # the default, which runs once an LLM is configured
    sign_in(sized_page, live_server, person("admin"))
    sized_page.goto(f"{live_server.url}/p/{project.slug}/settings/")
    box = sized_page.locator("#id_hyde_enabled")
    assert not box.is_checked() and box.is_disabled()
    assert "No LLM is configured" in sized_page.locator("#settings-form").inner_text()
    sized_page.click("#settings-form button[type=submit]")
    sized_page.locator("#flash .msg", has_text="Settings saved.").wait_for()
    project.refresh_from_db()
    assert project.hyde_enabled


NAV_ROWS = """() => new Set([...document.querySelectorAll('nav[aria-label=Project] a')]
  .filter(a => a.offsetParent !== null).map(a => Math.round(a.getBoundingClientRect().top))).size"""


def test_the_navigation_takes_one_row_and_folds_behind_a_menu_on_a_phone(sized_page, live_server, person, project):
    sign_in(sized_page, live_server, person("admin"))
    sized_page.goto(f"{live_server.url}/p/{project.slug}/memories/")
    links = sized_page.locator("nav[aria-label=Project] a")
    assert links.count() == 12
    header = sized_page.locator("header.top").bounding_box()
    assert header is not None and header["height"] < 64  # one row of a 16 px font
    assert sized_page.locator("h1").bounding_box()["y"] < 120
    menu = sized_page.get_by_text("Menu", exact=True)
    if sized_page.viewport_size["width"] > 1000:
        assert not menu.is_visible()
        assert sized_page.evaluate(NAV_ROWS) == 1
        sized_page.set_viewport_size({"width": 1280, "height": 800})  # the smallest laptop without the menu
        assert sized_page.evaluate(NAV_ROWS) == 1 and sized_page.locator("header.top").bounding_box()["height"] < 64
        return
    assert not links.first.is_visible()
    menu.click()
    assert all(links.nth(i).is_visible() for i in range(12))
    sized_page.get_by_role("link", name="Review").click()
    sized_page.wait_for_url(f"**/p/{project.slug}/review/")
