"""The main curation flows end to end in Chromium, against a live server."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from memories import edges, services
from memories.models import Memory, MemoryRevision, Status
from tests.ui.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sign_in(page: Any, live_server: Any, user: Any) -> None:
    """Sign in without the form (the sign-in test covers the form): reuse a Django session."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])


def test_a_person_signs_in_and_sees_their_project(page, live_server, person, project):
    person("viewer")
    page.goto(f"{live_server.url}/p/{project.slug}/memories/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "viewer-person")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/p/{project.slug}/memories/")
    assert page.locator("h1").inner_text() == "Memories"


def test_a_reviewer_approves_from_the_queue_with_the_keyboard(page, live_server, person, project, memory_factory):
    first = memory_factory("The user prefers dark mode.", status=Status.PENDING_REVIEW)
    memory_factory("The user likes small pull requests.", status=Status.PENDING_REVIEW)
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.locator(f"#card-{first.pk}").wait_for(state="detached")
    assert page.locator("#pending-count").inner_text() == "1"
    assert Memory.objects.get(pk=first.pk).status == Status.ACTIVE
    # The reviewer keeps their place: the next card gets the focus once the swap settles.
    page.wait_for_function("document.activeElement.classList.contains('review-card')", timeout=5000)


def test_a_reviewer_edits_inline_and_sees_the_revision(page, live_server, person, project, memory_factory):
    memory = memory_factory("The user likes black tea.")
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{memory.pk}/")
    page.click("#edit-link")
    page.fill("#id_edit_content", "The user likes green tea.")
    page.fill("#id_edit_reason", "they said so")
    page.click("#detail button[type=submit]")
    page.locator("#history ins", has_text="green").wait_for()
    assert page.locator("#memory-content").inner_text() == "The user likes green tea."
    assert page.locator("#history del").first.inner_text() == "black"
    assert MemoryRevision.objects.filter(memory=memory, action="edit", reason="they said so").exists()


def test_a_reviewer_supersedes_and_sees_the_chain(page, live_server, person, project, memory_factory):
    memory = memory_factory("The user uses Neovim.")
    sign_in(page, live_server, person("reviewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{memory.pk}/")
    page.click("#supersede summary")
    page.fill("#id_supersede_content", "The user switched to Helix.")
    page.click("#supersede button[type=submit]")
    successor = _wait_for_successor(page, memory)
    page.wait_for_url(f"**/memories/{successor.pk}/")
    items = page.locator("#chain li")
    assert items.count() == 2
    assert "The user uses Neovim." in items.nth(0).inner_text() and "superseded" in items.nth(0).inner_text()
    assert "The user switched to Helix." in items.nth(1).inner_text()


def _wait_for_successor(page: Any, memory: Memory) -> Memory:
    page.wait_for_function("(old) => location.pathname.indexOf(old) < 0", arg=str(memory.pk))
    return Memory.objects.get(supersedes=memory)


def test_the_graph_draws_a_node_per_memory(page, live_server, person, project, memory_factory):
    made = [memory_factory(f"Graph memory {i}.", category="user-facts") for i in range(12)]
    edges.edge_link(source=made[0], target=made[1], relationship="refines", actor="t")
    services.memory_supersede(memory=made[2], draft=services.MemoryDraft(user_id="alice", content="New."), actor="t")
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    page.locator("#graph circle").nth(12).wait_for()
    assert page.locator("#graph circle").count() == 13
    assert page.locator("#graph line.edge").count() == 2
    assert page.locator("#graph .faded").count() == 1


def test_the_graph_draws_500_memories_and_their_links(page, live_server, person, project):
    categories = project.taxonomy[:5]
    drafts = [
        services.MemoryDraft(user_id="alice", content=f"Large graph memory {i}.", category=categories[i % 5])
        for i in range(500)
    ]
    made = services.memory_bulk_create(project=project, drafts=drafts, actor="t")
    for i in range(0, 500, 2):  # 250 links, a chain through every other memory
        edges.edge_link(source=made[i], target=made[(i + 7) % 500], relationship="related", actor="t")
    sign_in(page, live_server, person("viewer"))
    started = time.perf_counter()
    page.goto(f"{live_server.url}/p/{project.slug}/graph/?user=alice")
    page.locator("#graph circle").nth(499).wait_for(timeout=30_000)
    # Reported, not asserted (speed lives in figures, not in timed assertions).
    print(f"graph of 500 memories drawn in {(time.perf_counter() - started) * 1000:.0f} ms")
    assert page.locator("#graph circle").count() == 500
    assert page.locator("#graph line.edge").count() == 250
    assert page.locator("#graph text.node-label").count() == 0  # labels only for small graphs


def test_a_viewer_has_no_edit_control_and_a_direct_post_is_refused(page, live_server, person, project, memory_factory):
    memory = memory_factory("Viewers cannot change me.")
    sign_in(page, live_server, person("viewer"))
    page.goto(f"{live_server.url}/p/{project.slug}/memories/{memory.pk}/")
    assert page.locator("#edit-link").count() == 0
    assert page.locator("#memory-actions").count() == 0
    status = page.evaluate(
        """async (url) => {
            const headers = JSON.parse(document.body.getAttribute('hx-headers'));
            const body = new URLSearchParams({content: 'pwned', kind: 'fact', category: '', importance: '0.5'});
            const response = await fetch(url, {method: 'POST', headers, body});
            return response.status;
        }""",
        f"/p/{project.slug}/memories/{memory.pk}/edit/",
    )
    assert status == 403
    assert Memory.objects.get(pk=memory.pk).content == "Viewers cannot change me."


def test_the_api_docs_render_offline_under_the_content_security_policy(page, live_server):
    """Swagger from the files django-ninja ships, no CDN: the docs page works offline under the CSP."""
    messages: list[str] = []
    requested: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{live_server.url}/api/v1/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=15_000)
    assert "MemoryHub API" in page.inner_text(".swagger-ui .info .title")
    external = [url for url in requested if not url.startswith(live_server.url)]
    blocked = [text for text in messages if "Content Security Policy" in text]
    assert (external, blocked) == ([], [])
