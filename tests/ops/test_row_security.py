"""Postgres row-level security behind the selectors (common/row_security.py, docs/adr/0014-row-level-security.md)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from capture.models import CaptureJob
from common import row_security
from conversations.models import Conversation, Message
from memories import selectors
from memories.models import Embedding, Memory, MemoryRevision
from retrieval.models import RetrievalLog


@pytest.fixture
def two_projects(api, other_api, make_memory):
    """A memory (with revision, embedding, conversation, job and log) in each of two projects."""
    for client, who in ((api, "alice"), (other_api, "bob")):
        memory = client.post("/memories", {"user_id": who, "content": f"{who} keeps bees.", "scope": "project"})
        assert memory.status_code == 201
        client.patch(f"/memories/{memory.json()['id']}", {"user_id": who, "content": f"{who} keeps two hives."})
        conversation = client.post("/conversations", {"user_id": who}).json()["id"]
        said = [{"role": "user", "content": f"hi from {who}"}]
        client.post(f"/conversations/{conversation}/messages", {"user_id": who, "messages": said})
        assert client.post("/retrieve", {"user_id": who, "query": "bees"}).status_code == 200
        turn = {"user_id": who, "trigger": "turn", "messages": [{"role": "user", "content": f"{who} likes tea."}]}
        assert client.post("/capture", turn).status_code == 202
    return api.project, other_api.project


def _current_role() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('role')")
        return str(cursor.fetchone()[0])


def test_a_query_without_a_project_filter_sees_only_the_requests_project(two_projects):
    mine, theirs = two_projects
    everywhere = {
        model: set(model.objects.values_list("pk", flat=True))
        for model in (Memory, MemoryRevision, Embedding, Conversation, Message, CaptureJob, RetrievalLog)
    }
    assert all(len(ids) >= 2 for ids in everywhere.values()), everywhere  # both projects wrote each kind
    assert row_security.enter(mine.pk)
    try:
        assert set(Memory.objects.values_list("project_id", flat=True)) == {mine.pk}
        assert set(Embedding.objects.values_list("project_id", flat=True)) == {mine.pk}
        assert set(Conversation.objects.values_list("project_id", flat=True)) == {mine.pk}
        assert set(CaptureJob.objects.values_list("project_id", flat=True)) == {mine.pk}
        assert set(RetrievalLog.objects.values_list("project_id", flat=True)) == {mine.pk}
        assert set(MemoryRevision.objects.values_list("memory__project_id", flat=True)) == {mine.pk}
        assert set(Message.objects.values_list("conversation__project_id", flat=True)) == {mine.pk}
    finally:
        row_security.leave()
    assert set(Memory.objects.values_list("pk", flat=True)) == everywhere[Memory]


def test_a_write_into_another_project_is_refused_by_the_database(two_projects):
    mine, theirs = two_projects
    theirs_memory = Memory.objects.filter(project=theirs).first()
    assert row_security.enter(mine.pk)
    try:
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            Memory.objects.create(project=theirs, user_id="mallory", content="planted", content_hash="x")
        assert Memory.objects.filter(pk=theirs_memory.pk).update(content="pwned") == 0
    finally:
        row_security.leave()
    theirs_memory.refresh_from_db()
    assert "pwned" not in theirs_memory.content


def test_a_forgotten_filter_in_an_endpoint_returns_nothing_from_another_project(api, other_api, monkeypatch):
    theirs = other_api.post("/memories", {"user_id": "alice", "content": "Rival secret.", "scope": "project"}).json()

    def visible_without_project(*, project, user_id):  # the bug a new query could have
        return Memory.objects.filter(status__in=selectors.LIVE_STATUSES)

    monkeypatch.setattr(selectors, "memories_visible", visible_without_project)
    response = api.get(f"/memories/{theirs['id']}", user_id="alice")
    assert response.status_code == 404
    with override_settings(MEMORYHUB_ROW_SECURITY=False):  # the same bug without the second wall
        assert api.get(f"/memories/{theirs['id']}", user_id="alice").status_code == 200


def test_every_request_leaves_the_tenant_role(api, make_memory):
    make_memory()
    assert _current_role() == "none"
    api.get("/memories/not-a-uuid", user_id="alice")  # an error response leaves it too
    assert _current_role() == "none"
    assert not getattr(connection, "memoryhub_tenant", None)


def _tenant_project() -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT current_setting('{row_security.SETTING}', true)")
        return str(cursor.fetchone()[0] or "")


def test_a_key_lookup_enters_the_keys_project_in_the_same_statement(api, django_assert_num_queries):
    from memories import tenancy  # noqa: PLC0415

    assert row_security.available()  # known per alias once: not part of what is counted below
    tenancy.api_key_authenticate(token=api.key)  # marks the key used, so the next call only reads
    row_security.leave()
    with django_assert_num_queries(1):
        assert tenancy.api_key_authenticate(token=api.key) is not None
    try:
        assert (_current_role(), _tenant_project()) == (row_security.ROLE, str(api.project.pk))
        assert connection.memoryhub_tenant == api.project.pk  # type: ignore[attr-defined]
    finally:
        row_security.leave()
    assert (_current_role(), _tenant_project()) == ("none", "")


def test_an_unknown_key_enters_no_project(api):
    from memories import tenancy  # noqa: PLC0415

    assert tenancy.api_key_authenticate(token="mh_not_a_key") is None
    assert (_current_role(), _tenant_project()) == ("none", "")
    assert getattr(connection, "memoryhub_tenant", None) is None
