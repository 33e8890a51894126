"""The profile page in Chromium, on a laptop and a 390 px phone: the facts with the memories
they rest on, a pinned fact and a memory left out saved as a new version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from profiles import services
from profiles.models import Profile
from tests.ui.conftest import open_page
from tests.ui.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=[1280, 390], ids=["laptop", "phone"])
def sized_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from open_page(browser, request, width=request.param, height=844)


def test_a_reviewer_reads_and_edits_a_profile(sized_page, live_server, person, project, memory_factory):
    page = sized_page
    allergy = memory_factory("Alice is allergic to peanuts.")
    city = memory_factory("Alice lives in Lyon.")
    services.profile_rebuild(project=project, user_id="alice")
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{allergy.pk}/")
    page.click("#profile-link")
    assert "Version 1" in page.locator("#profile-version").inner_text()
    assert page.locator("#profile-facts a", has_text="allergic to peanuts").count() == 1
    page.fill("#profile-pinned", "Prefers to be called Ali.")
    page.check(f"#hide-{city.pk}")
    page.click("#profile-save")
    page.locator("#profile-version", has_text="Version 2").wait_for()
    facts = page.locator("#profile-facts .fact-text").all_inner_texts()
    assert facts == ["Prefers to be called Ali.", "Alice is allergic to peanuts."]
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    profile = Profile.objects.get(project=project, user_id="alice")
    assert profile.hidden_memory_ids == [str(city.pk)] and profile.versions.count() == 2
