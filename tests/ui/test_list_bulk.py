"""The memory list's bulk actions never lose data by default."""

from __future__ import annotations

import pytest

from memories.models import Memory, MemoryRevision

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def test_change_category_without_a_target_is_refused_and_clears_nothing(client_as, memory_factory, project):
    tagged = [memory_factory(f"Tagged {i}.", category="user-facts") for i in range(2)]
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/bulk/",
        {
            "action": "category",
            "category": "",
            "ids": [str(m.pk) for m in tagged],
            "next": f"/p/{project.slug}/memories/",
        },
        headers=HTMX,
    )
    assert response.status_code == 422
    body = response.content.decode()
    assert "Choose the new category." in body
    assert [Memory.objects.get(pk=m.pk).category for m in tagged] == ["user-facts", "user-facts"]
    assert not MemoryRevision.objects.filter(memory__in=tagged, action="edit").exists()


def test_change_category_without_a_target_is_refused_without_htmx_too(client_as, memory_factory, project):
    tagged = memory_factory("Tagged.", category="user-facts")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/bulk/", {"action": "category", "ids": [str(tagged.pk)]}
    )
    assert response.status_code == 302
    assert Memory.objects.get(pk=tagged.pk).category == "user-facts"


def test_the_bulk_category_select_offers_no_silent_none(client_as, project):
    body = client_as("reviewer").get(f"/p/{project.slug}/memories/").content.decode()
    select = body[body.index('id="id_bulk_category"') : body.index("</select>", body.index('id="id_bulk_category"'))]
    assert "(none)" not in select
    assert "Choose a category" in select


def test_apply_with_nothing_ticked_answers_the_rows_region_with_a_message(client_as, memory_factory, project):
    memory_factory("Still listed.")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/bulk/",
        {"action": "archive", "next": f"/p/{project.slug}/memories/?q=listed"},
        headers=HTMX,
    )
    assert response.status_code == 422
    body = response.content.decode().strip()
    # The swap target of filters and pages survives the swap: the answer is #rows itself.
    assert body.startswith('<div id="rows"')
    assert "Tick at least one memory." in body and "Still listed." in body


def test_a_category_change_with_a_target_still_works(client_as, memory_factory, project):
    memory = memory_factory("Recategorise me.", category="user-facts")
    response = client_as("reviewer").post(
        f"/p/{project.slug}/memories/bulk/",
        {"action": "category", "category": project.taxonomy[1], "ids": [str(memory.pk)]},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert Memory.objects.get(pk=memory.pk).category == project.taxonomy[1]
