"""Every role against every page and action of the curation UI.

Viewers read; reviewers also approve, edit, supersede, link, archive, delete, restore
and retry captures; admins also manage keys, settings and members. A member whose role
is too low gets 403 and nothing changes; a person outside the team gets 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from capture.models import CaptureJob
from memories import edges, lifecycle, tenancy
from memories.models import ApiKey, Membership, Memory, MemoryEdge, Project, Status

RANK = {"viewer": 0, "reviewer": 1, "admin": 2}


@dataclass
class Case:
    method: str
    url: str
    data: dict[str, Any]
    changed: Callable[[], bool]


def _status(memory: Memory) -> str:
    return Memory.objects.get(pk=memory.pk).status


def _reads(project: Project, make: Any) -> dict[str, Case]:
    memory = make()
    base = f"/p/{project.slug}"
    pages = {
        "dashboard": "/",
        "list": "/memories/",
        "memory": f"/memories/{memory.pk}/",
        "review": "/review/",
        "graph": "/graph/",
        "graph_data": "/graph/data/?user=alice",
        "captures": "/captures/",
        "retrievals": "/retrievals/",
        "playground": "/playground/",
        "settings": "/settings/",
        "members": "/members/",
    }
    return {f"read_{name}": Case("get", base + path, {}, lambda: True) for name, path in pages.items()}


def _memory_writes(project: Project, make: Any) -> dict[str, Case]:
    base = f"/p/{project.slug}/memories"
    edited, superseded, archived, deleted, restored = (make(f"Memory number {i}.") for i in range(5))
    lifecycle.memory_archive(memory=restored, actor="system:test")
    pending = make("Waiting for a reviewer.", status=Status.PENDING_REVIEW)
    linked_a, linked_b = make("Link source."), make("Link target.")
    edge = edges.edge_link(source=linked_a, target=linked_b, relationship="related", actor="system:test")
    fields = {"content": "Edited by a person.", "kind": "fact", "category": "", "importance": "0.5", "reason": "t"}
    return {
        "edit": Case(
            "post",
            f"{base}/{edited.pk}/edit/",
            fields,
            lambda: Memory.objects.get(pk=edited.pk).content == fields["content"],
        ),
        "supersede": Case(
            "post", f"{base}/{superseded.pk}/supersede/", fields, lambda: _status(superseded) == Status.SUPERSEDED
        ),
        "archive": Case("post", f"{base}/{archived.pk}/archive/", {}, lambda: _status(archived) == Status.ARCHIVED),
        "delete": Case("post", f"{base}/{deleted.pk}/delete/", {}, lambda: _status(deleted) == Status.DELETED),
        "restore": Case("post", f"{base}/{restored.pk}/restore/", {}, lambda: _status(restored) == Status.ACTIVE),
        "approve": Case("post", f"{base}/{pending.pk}/approve/", {}, lambda: _status(pending) == Status.ACTIVE),
        "link": Case(
            "post",
            f"{base}/{linked_b.pk}/links/",
            {"target": str(edited.pk), "relationship": "refines"},
            lambda: MemoryEdge.objects.filter(from_memory=linked_b, to_memory=edited, relationship="refines").exists(),
        ),
        "unlink": Case(
            "post",
            f"{base}/{linked_a.pk}/links/{edge.pk}/remove/",
            {},
            lambda: not MemoryEdge.objects.filter(pk=edge.pk).exists(),
        ),
        "bulk_category": Case(
            "post",
            f"{base}/bulk/",
            {"action": "category", "category": "user-facts", "ids": [str(edited.pk)]},
            lambda: Memory.objects.get(pk=edited.pk).category == "user-facts",
        ),
    }


def _review_writes(project: Project, make: Any) -> dict[str, Case]:
    base = f"/p/{project.slug}/review"
    approved, rejected, bulk = (make(f"Proposed {i}.", status=Status.PENDING_REVIEW) for i in range(3))
    job = CaptureJob.objects.create(
        project=project, user_id="alice", trigger="turn", status="failed", error="boom", created_by="t"
    )
    return {
        "review_approve": Case(
            "post", f"{base}/{approved.pk}/approve/", {}, lambda: _status(approved) == Status.ACTIVE
        ),
        "review_reject": Case("post", f"{base}/{rejected.pk}/reject/", {}, lambda: _status(rejected) == Status.DELETED),
        "review_bulk": Case(
            "post",
            f"{base}/bulk/",
            {"action": "approve", "ids": [str(bulk.pk)]},
            lambda: _status(bulk) == Status.ACTIVE,
        ),
        "capture_retry": Case(
            "post",
            f"/p/{project.slug}/captures/{job.pk}/retry/",
            {},
            lambda: CaptureJob.objects.get(pk=job.pk).status == "queued",
        ),
    }


def _admin_writes(project: Project) -> dict[str, Case]:
    base = f"/p/{project.slug}"
    key, _ = tenancy.api_key_create(project=project, name="old")
    newcomer = get_user_model().objects.create_user(username="newcomer")
    leaving = Membership.objects.create(
        team=project.team, user=get_user_model().objects.create_user(username="leaving")
    )
    promoted = Membership.objects.create(
        team=project.team, user=get_user_model().objects.create_user(username="promoted")
    )
    settings = {
        "capture_policy": "review",
        "auto_approve_confidence": "0.9",
        "taxonomy": "a\nb",
        "token_budget": "777",
        "retrieval_rate_limit": "10",
    }
    return {
        "read_keys": Case("get", f"{base}/keys/", {}, lambda: True),
        "key_create": Case(
            "post", f"{base}/keys/", {"name": "new bot"}, lambda: ApiKey.objects.filter(name="new bot").exists()
        ),
        "key_revoke": Case(
            "post", f"{base}/keys/{key.pk}/revoke/", {}, lambda: ApiKey.objects.get(pk=key.pk).revoked_at is not None
        ),
        "settings_save": Case(
            "post", f"{base}/settings/", settings, lambda: Project.objects.get(pk=project.pk).token_budget == 777
        ),
        "member_add": Case(
            "post",
            f"{base}/members/",
            {"username": "newcomer", "role": "reviewer"},
            lambda: Membership.objects.filter(user=newcomer, team=project.team, role="reviewer").exists(),
        ),
        "member_role": Case(
            "post",
            f"{base}/members/{promoted.pk}/role/",
            {"role": "admin"},
            lambda: Membership.objects.get(pk=promoted.pk).role == "admin",
        ),
        "member_remove": Case(
            "post",
            f"{base}/members/{leaving.pk}/remove/",
            {},
            lambda: not Membership.objects.filter(pk=leaving.pk).exists(),
        ),
    }


MINIMUM = {
    **dict.fromkeys(
        ["read_dashboard", "read_list", "read_memory", "read_review", "read_graph", "read_graph_data"], "viewer"
    ),
    **dict.fromkeys(["read_captures", "read_retrievals", "read_playground", "read_settings", "read_members"], "viewer"),
    **dict.fromkeys(
        ["edit", "supersede", "archive", "delete", "restore", "approve", "link", "unlink", "bulk_category"], "reviewer"
    ),
    **dict.fromkeys(["review_approve", "review_reject", "review_bulk", "capture_retry"], "reviewer"),
    **dict.fromkeys(
        ["read_keys", "key_create", "key_revoke", "settings_save", "member_add", "member_role", "member_remove"],
        "admin",
    ),
}


@pytest.fixture
def cases(project: Project, memory_factory: Any) -> dict[str, Case]:
    return {
        **_reads(project, memory_factory),
        **_memory_writes(project, memory_factory),
        **_review_writes(project, memory_factory),
        **_admin_writes(project),
    }


def expected_status(role: str, action: str) -> int:
    if role == "outsider":
        return 404
    return 403 if RANK[role] < RANK[MINIMUM[action]] else 200


@pytest.mark.django_db
@pytest.mark.parametrize("action", sorted(MINIMUM))
@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin", "outsider"])
def test_each_role_may_do_exactly_what_its_role_allows(client_as, cases, role, action):
    case = cases[action]
    client = client_as(role)
    response = getattr(client, case.method)(case.url, case.data)
    expected = expected_status(role, action)
    if expected == 200:
        assert response.status_code in (200, 302), response.content[:500]
        assert case.changed(), f"{role} was allowed to {action} but nothing changed"
    else:
        assert response.status_code == expected
        assert case.method == "get" or not case.changed(), f"{role} was refused {action} but it happened anyway"


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["read_list", "edit", "key_create"])
def test_a_signed_out_visitor_is_sent_to_the_login_page(client, cases, action):
    case = cases[action]
    response = getattr(client, case.method)(case.url, case.data)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert case.method == "get" or not case.changed()


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["read_list", "edit"])
def test_a_signed_out_htmx_request_is_sent_to_the_login_page_as_a_full_navigation(client, cases, action):
    # The session expired while the page was open: htmx must leave the page, not swap the
    # login form into a fragment of it.
    case = cases[action]
    page = f"http://testserver/p/{Project.objects.get().slug}/memories/?status=active"
    headers = {"HX-Request": "true", "HX-Current-URL": page}
    response = getattr(client, case.method)(case.url, case.data, headers=headers)
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith("/accounts/login/?next=")
    assert "status%3Dactive" in response["HX-Redirect"] or "status=active" in response["HX-Redirect"]
    assert case.method == "get" or not case.changed()


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/", "/memories/", "/review/", "/playground/"])
def test_a_viewer_cannot_post_to_a_read_level_page(client_as, memory_factory, project, page):
    # Read-level views need the reviewer role for anything but GET/HEAD/OPTIONS, so a
    # viewer's POST is refused before the view runs, whatever the view does with it.
    memory = memory_factory("Untouched by a viewer.")
    pending = memory_factory("Still waiting.", status=Status.PENDING_REVIEW)
    before = list(Memory.objects.order_by("pk").values_list("pk", "status", "content", "updated_at"))
    data = {"action": "approve", "ids": [str(memory.pk), str(pending.pk)], "content": "changed"}
    response = client_as("viewer").post(f"/p/{project.slug}{page}", data)
    assert response.status_code == 403
    assert list(Memory.objects.order_by("pk").values_list("pk", "status", "content", "updated_at")) == before
