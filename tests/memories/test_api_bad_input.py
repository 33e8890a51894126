"""Bad input gets a clear 4xx in the error envelope, and nothing stored is lost."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings

from common.errors import Invalid
from memories import edges, tenancy
from memories.models import ApiKey, Memory, MemoryEdge


def error_code(response):
    return response.json()["error"]["code"]


def test_malformed_json_is_a_400_in_the_envelope(api):
    response = api.client.post(
        "/api/v1/memories", "{not json", content_type="application/json", headers={"Authorization": f"Bearer {api.key}"}
    )
    assert response.status_code == 400
    assert error_code(response) == "malformed_request"


@pytest.mark.parametrize(
    "body",
    [
        {"user_id": "alice"},
        {"user_id": "alice", "content": 42},
        {"user_id": "alice", "content": "x", "kind": "opinion"},
        {"user_id": "alice", "content": "x", "scope": "global"},
        {"user_id": "alice", "content": "x", "importance": 3},
        {"user_id": "alice", "content": "x", "contnet": "typo"},
        {"user_id": "", "content": "x"},
        {"user_id": "a" * 256, "content": "x"},
        {"user_id": "alice", "content": "x", "expires_at": "2030-01-01T00:00:00"},
        {"user_id": "alice", "content": "x", "metadata": "not an object"},
        {"user_id": "alice", "content": "   "},
        {"user_id": "alice", "content": "x", "category": "made-up"},
        [1, 2, 3],
    ],
)
def test_invalid_memory_bodies_are_422_and_store_nothing(api, body):
    response = api.post("/memories", body)
    assert response.status_code == 422, response.content
    assert set(response.json()["error"]) == {"code", "message", "details"}
    assert Memory.objects.count() == 0


def test_unknown_category_names_the_allowed_ones(api):
    response = api.post("/memories", {"user_id": "alice", "content": "x", "category": "made-up"})
    assert error_code(response) == "unknown_category"
    assert "coding-preferences" in response.json()["error"]["details"]["allowed"]


@override_settings(MEMORYHUB_MAX_CONTENT_CHARS=100)
def test_oversize_content_is_413(api):
    response = api.post("/memories", {"user_id": "alice", "content": "x" * 101})
    assert response.status_code == 413
    assert error_code(response) == "content_too_large"


@override_settings(MEMORYHUB_MAX_BULK=3)
def test_bulk_over_the_limit_is_413_and_stores_nothing(api):
    response = api.post("/memories/bulk", {"memories": [{"user_id": "alice", "content": "x"}] * 4})
    assert (response.status_code, error_code(response)) == (413, "bulk_too_large")
    assert Memory.objects.count() == 0


def test_bulk_with_one_bad_item_stores_none_and_names_it(api):
    items = [{"user_id": "alice", "content": "fine"}, {"user_id": "alice", "content": "  "}]
    response = api.post("/memories/bulk", {"memories": items})
    assert response.status_code == 422
    assert "memories[1]" in response.json()["error"]["message"]
    assert Memory.objects.count() == 0


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_request_body_over_the_limit_is_413(api):
    response = api.post("/memories", {"user_id": "alice", "content": "x" * 2000})
    assert (response.status_code, error_code(response)) == (413, "payload_too_large")


@pytest.mark.parametrize("memory_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "1; DROP TABLE"])
def test_invalid_or_unknown_ids_are_404(api, memory_id):
    response = api.get(f"/memories/{memory_id}", user_id="alice")
    assert (response.status_code, error_code(response)) == (404, "not_found")


def test_missing_or_revoked_key_is_401(api, make_memory):
    assert Client().get("/api/v1/memories", {"user_id": "alice"}).status_code == 401
    wrong = Client().get("/api/v1/memories", {"user_id": "alice"}, headers={"Authorization": "Bearer mh_nope"})
    assert (wrong.status_code, error_code(wrong)) == (401, "unauthorized")
    assert api.get("/memories", user_id="alice").status_code == 200
    tenancy.api_key_revoke(key=ApiKey.objects.get(project=api.project))
    revoked = api.get("/memories", user_id="alice")
    assert (revoked.status_code, error_code(revoked)) == (401, "unauthorized")


@pytest.mark.parametrize("field", ["content", "kind", "category", "importance", "metadata"])
def test_an_explicit_null_for_a_required_field_is_422_and_changes_nothing(api, make_memory, field):
    memory = make_memory(content="Alice likes tea.", category="user-facts")
    response = api.patch(f"/memories/{memory['id']}", {"user_id": "alice", field: None})
    assert (response.status_code, error_code(response)) == (422, "validation_error")
    after = api.get(f"/memories/{memory['id']}", user_id="alice").json()
    kept = ("content", "kind", "category", "importance", "metadata", "version")
    assert {k: after[k] for k in kept} == {k: memory[k] for k in kept}
    # expires_at: null is a value ("never expires").
    assert api.patch(f"/memories/{memory['id']}", {"user_id": "alice", "expires_at": None}).status_code == 200


def test_list_with_a_forged_cursor_is_422(api):
    response = api.get("/memories", user_id="alice", cursor="!!!garbage")
    assert (response.status_code, error_code(response)) == (422, "invalid_cursor")


def test_patch_with_a_bad_field_changes_nothing(api, make_memory):
    memory = make_memory()
    response = api.patch(f"/memories/{memory['id']}", {"user_id": "alice", "content": "", "importance": 0.1})
    assert response.status_code == 422
    stored = Memory.objects.get(pk=memory["id"])
    assert (stored.content, stored.importance) == (memory["content"], 0.5)


def test_supersede_with_an_unknown_related_id_writes_nothing(api, make_memory):
    memory = make_memory()
    response = api.post(
        f"/memories/{memory['id']}/supersede",
        {"user_id": "alice", "content": "new", "related": [{"id": "00000000-0000-0000-0000-000000000000"}]},
    )
    assert response.status_code == 404
    assert Memory.objects.get(pk=memory["id"]).status == "active"
    assert MemoryEdge.objects.count() == 0


def test_linking_a_memory_to_itself_is_refused(make_memory):
    stored = Memory.objects.get(pk=make_memory()["id"])
    with pytest.raises(Invalid):
        edges.edge_link(source=stored, target=stored, relationship="related", actor="system:test")
    assert MemoryEdge.objects.count() == 0


def test_a_constraint_violation_is_a_409_in_the_envelope_not_a_503():
    from django.db import IntegrityError
    from django.test import RequestFactory

    from memoryhub.api import on_stored_data_error

    response = on_stored_data_error(RequestFactory().get("/api/v1/memories"), IntegrityError("duplicate key"))
    assert (response.status_code, json.loads(response.content)["error"]["code"]) == (409, "conflict")


FAR_FUTURE = "9999-12-31T23:00:00-14:00"  # year 10000 in UTC


def test_a_timestamp_python_cannot_read_back_is_refused_and_the_project_keeps_working(api, make_memory):
    make_memory(content="Alice likes tea.")
    response = api.post("/memories", {"user_id": "alice", "content": "Poison.", "expires_at": FAR_FUTURE})
    assert (response.status_code, error_code(response)) == (422, "validation_error")
    assert not Memory.objects.filter(content="Poison.").exists()
    listed = api.get("/memories", user_id="alice")
    assert listed.status_code == 200 and [m["content"] for m in listed.json()["items"]] == ["Alice likes tea."]


def test_patching_an_unreadable_timestamp_changes_nothing(api, make_memory):
    memory = make_memory(content="Alice likes tea.")
    response = api.patch(f"/memories/{memory['id']}", {"user_id": "alice", "expires_at": FAR_FUTURE})
    assert response.status_code == 422
    assert Memory.objects.get(pk=memory["id"]).expires_at is None


def raw_post(api, path, raw):
    return api.client.post(
        f"/api/v1{path}", raw, content_type="application/json", headers={"Authorization": f"Bearer {api.key}"}
    )


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/memories", '{"user_id": "alice", "content": "bad \\ud800 text"}'),
        ("/memories", '{"user_id": "alice", "content": "nul \\u0000 text"}'),
        ("/memories", '{"user_id": "alice", "content": "ok", "metadata": {"\\udfff": 1}}'),
        ("/memories/bulk", '{"memories": [{"user_id": "alice", "content": "bad \\ud800"}]}'),
        ("/retrieve", '{"user_id": "alice", "query": "tea \\ud800"}'),
        ("/retrieve", '{"user_id": "alice", "query": "tea \\u0000"}'),
    ],
)
def test_a_lone_surrogate_or_nul_anywhere_is_a_422_not_a_500(api, path, raw):
    response = raw_post(api, path, raw)
    assert (response.status_code, error_code(response)) == (422, "invalid_value")
    assert not Memory.objects.exists()


def test_deeply_nested_json_is_a_422_not_a_500(api):
    value = "x"
    for _ in range(400):
        value = [value]
    response = api.put("/scratchpad/deep", {"user_id": "alice", "value": value})
    assert (response.status_code, error_code(response)) == (422, "invalid_value")
    assert "nested deeper" in response.json()["error"]["message"]


def test_metadata_over_the_limit_is_413_and_stores_nothing(api, make_memory):
    big = {"blob": "x" * 20_000}
    response = api.post("/memories", {"user_id": "alice", "content": "Alice likes tea.", "metadata": big})
    assert (response.status_code, error_code(response)) == (413, "metadata_too_large")
    memory = make_memory(content="Alice likes coffee.")
    patched = api.patch(f"/memories/{memory['id']}", {"user_id": "alice", "metadata": big})
    assert patched.status_code == 413
    assert Memory.objects.get(pk=memory["id"]).metadata == {}
    conversation = api.post("/conversations", {"user_id": "alice", "metadata": big})
    assert conversation.status_code == 413


def test_an_unknown_api_path_is_a_404_in_the_envelope(api):
    response = api.get("/no-such-endpoint")
    assert (response.status_code, response["Content-Type"], error_code(response)) == (
        404,
        "application/json",
        "not_found",
    )


def test_a_method_the_route_does_not_take_answers_405_in_the_envelope(api):
    response = api.client.put("/api/v1/health")
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


def test_a_validation_error_locates_the_field_in_the_body_once(api):
    missing = api.post("/memories", {"user_id": "alice"}).json()["error"]
    assert missing["details"][0]["loc"] == ["body", "content"]
    assert missing["message"] == "content: Field required"
    retrieve = api.post("/retrieve", {"user_id": "alice", "query": "tea", "limit": "many"}).json()["error"]
    assert retrieve["details"][0]["loc"] == ["body", "limit"]
    query = api.get("/memories", user_id="alice", limit="x").json()["error"]
    assert query["details"][0]["loc"] == ["query", "limit"]
