"""Issue 16, part B, end to end in Chromium: the memory page's link picker, people,
settings, the graph's controls, the retrieval log's drill-down, transfer and evaluation."""

from __future__ import annotations

import pytest

from memories.models import MemoryEdge
from tests.ui.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_links_a_memory_found_by_typing(page, live_server, person, project, memory_factory):
    memory = memory_factory("Alice deploys on Fridays.")
    target = memory_factory("Alice's team freezes deploys in December.")
    memory_factory("Bob's team freezes deploys too.", user_id="bob")
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{memory.pk}/")
    assert page.locator("#link-options input[type=radio]").count() == 0  # an empty default
    page.select_option("#id_link_relationship", "contradicts")
    page.locator("#link-search").press_sequentially("freez")
    page.locator(f"#link-options input[value='{target.pk}']").check()
    assert page.locator("#link-options input[type=radio]").count() == 1  # not Bob's
    page.click("#link-form button[type=submit]")
    page.locator("#links li", has_text="December").wait_for()
    assert page.locator("#links .rel").first.inner_text() == "contradicts"
    assert MemoryEdge.objects.filter(from_memory=memory, to_memory=target, relationship="contradicts").exists()
    page.click("#links a")
    page.locator("#links .rel", has_text="contradicted by").wait_for()


def test_an_admin_creates_a_person_and_the_link_lets_them_sign_in(page, live_server, person, project):
    sign_in(page, live_server, person("admin"))
    page.goto(f"{live_server.url}/p/{project.slug}/members/")
    page.fill("#id_new_username", "frank")
    page.select_option("#id_new_role", "reviewer")
    page.click("#person-form button[type=submit]")
    link = page.locator("#invite-url").input_value()
    page.context.clear_cookies()
    page.goto(link)
    page.fill("#id_new_password1", "frank's long passphrase 7")
    page.fill("#id_new_password2", "frank's long passphrase 7")
    page.click("#set-password-form button[type=submit]")
    page.fill("#id_username", "frank")
    page.fill("#id_password", "frank's long passphrase 7")
    page.click("button[type=submit]")
    page.locator(f"#project-{project.slug}").wait_for()
    assert page.locator(f"#project-{project.slug} .active-count").inner_text() == "0"
