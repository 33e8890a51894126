"""The scratchpad: per-user key-value working memory, isolated by project and user."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

import pytest

from memories.models import ScratchpadEntry
from memories.scratchpad import scratchpad_list


def put(api, key, value, user_id="alice"):
    return api.put(f"/scratchpad/{quote(key)}", {"user_id": user_id, "value": value})


def keys(response):
    return [item["key"] for item in response.json()["items"]]


def error_code(response):
    return response.json()["error"]["code"]


def test_put_then_get_returns_the_value(api):
    response = put(api, "task/42/plan", {"steps": ["read", "write"], "done": False})
    assert response.status_code == 200
    assert response.json()["key"] == "task/42/plan"
    assert response.json()["expires_at"] is None
    got = api.get("/scratchpad/task/42/plan", user_id="alice")
    assert got.status_code == 200
    assert got.json()["value"] == {"steps": ["read", "write"], "done": False}


@pytest.mark.parametrize("value", ["text", 7, 1.5, True, None, [], {}, ["a", {"b": [1]}]])
def test_any_json_value_round_trips(api, value):
    assert put(api, "k", value).status_code == 200
    assert api.get("/scratchpad/k", user_id="alice").json()["value"] == value


def test_put_overwrites_and_moves_updated_at(api):
    first = put(api, "current_task", "implement-api").json()
    second = put(api, "current_task", "write-tests").json()
    assert second["value"] == "write-tests"
    assert datetime.fromisoformat(second["updated_at"]) > datetime.fromisoformat(first["updated_at"])
    assert ScratchpadEntry.objects.filter(key="current_task").count() == 1


def test_delete_removes_the_key_and_a_second_delete_is_404(api):
    put(api, "api.endpoint", "https://api.example.com")
    assert api.delete("/scratchpad/api.endpoint", user_id="alice").status_code == 204
    assert api.get("/scratchpad/api.endpoint", user_id="alice").status_code == 404
    response = api.delete("/scratchpad/api.endpoint", user_id="alice")
    assert response.status_code == 404
    assert error_code(response) == "not_found"


def test_get_of_a_missing_key_is_404(api):
    assert api.get("/scratchpad/nothing", user_id="alice").status_code == 404


def test_list_by_prefix_is_sorted_by_key(api):
    for key in ["task/2", "task/10", "task/1/plan", "notes", "tasks"]:
        put(api, key, 1)
    assert keys(api.get("/scratchpad", user_id="alice", prefix="task/")) == ["task/1/plan", "task/10", "task/2"]
    assert keys(api.get("/scratchpad", user_id="alice")) == ["notes", "task/1/plan", "task/10", "task/2", "tasks"]


def test_list_prefix_with_like_wildcards_matches_them_literally(api):
    for key in ["100%_done", "100%x", "1000_done", "100_done", "100\\x"]:
        put(api, key, 1)
    assert keys(api.get("/scratchpad", user_id="alice", prefix="100%_")) == ["100%_done"]
    assert keys(api.get("/scratchpad", user_id="alice", prefix="100_")) == ["100_done"]
    assert keys(api.get("/scratchpad", user_id="alice", prefix="100\\")) == ["100\\x"]


def test_list_respects_limit(api):
    for key in ["a", "b", "c"]:
        put(api, key, 1)
    assert keys(api.get("/scratchpad", user_id="alice", limit=2)) == ["a", "b"]


def test_list_is_one_query(api, django_assert_num_queries):
    for key in ["a", "b", "c"]:
        put(api, key, 1)
    with django_assert_num_queries(1):
        assert len(scratchpad_list(project=api.project, user_id="alice")) == 3


def test_search_matches_every_word_in_key_or_value_case_insensitively(api):
    put(api, "api.endpoint", "https://API.example.com/v2")
    put(api, "deploy", {"target": "staging", "url": "https://example.com"})
    put(api, "example/notes", "unrelated")
    response = api.get("/scratchpad/search", user_id="alice", q="EXAMPLE api")
    assert keys(response) == ["api.endpoint"]
    assert keys(api.get("/scratchpad/search", user_id="alice", q="staging")) == ["deploy"]


def test_search_ranks_key_matches_before_value_matches(api):
    put(api, "plan", "the deploy happens friday")
    put(api, "deploy/plan", "friday")
    put(api, "misc", "deploy notes")
    assert keys(api.get("/scratchpad/search", user_id="alice", q="deploy")) == ["deploy/plan", "misc", "plan"]


def test_search_treats_like_wildcards_literally(api):
    put(api, "a", "50% off")
    put(api, "b", "500 off")
    assert keys(api.get("/scratchpad/search", user_id="alice", q="0%")) == ["a"]


def test_search_with_nothing_matching_is_empty(api):
    put(api, "a", "hello")
    assert keys(api.get("/scratchpad/search", user_id="alice", q="goodbye")) == []


def test_another_user_in_the_project_cannot_see_or_touch_a_key(api):
    put(api, "secret", "alice's")
    assert api.get("/scratchpad/secret", user_id="mallory").status_code == 404
    assert api.delete("/scratchpad/secret", user_id="mallory").status_code == 404
    assert keys(api.get("/scratchpad", user_id="mallory")) == []
    assert keys(api.get("/scratchpad/search", user_id="mallory", q="secret")) == []
    put(api, "secret", "mallory's", user_id="mallory")
    assert api.get("/scratchpad/secret", user_id="alice").json()["value"] == "alice's"


def test_another_project_cannot_see_or_touch_a_key(api, other_api):
    put(api, "secret", "acme's")
    assert other_api.get("/scratchpad/secret", user_id="alice").status_code == 404
    assert other_api.delete("/scratchpad/secret", user_id="alice").status_code == 404
    assert keys(other_api.get("/scratchpad", user_id="alice")) == []
    assert keys(other_api.get("/scratchpad/search", user_id="alice", q="secret")) == []
    put(other_api, "secret", "rival's")
    assert api.get("/scratchpad/secret", user_id="alice").json()["value"] == "acme's"
    assert ScratchpadEntry.objects.filter(key="secret").count() == 2


@pytest.mark.parametrize("key", ["a" * 256, "tab\there", "nul\x00", "bell\x07", "del\x7f", "c1\x85"])
def test_bad_keys_are_422_and_store_nothing(api, key):
    response = put(api, key, 1)
    assert response.status_code == 422, response.content
    assert error_code(response) == "invalid_key"
    assert ScratchpadEntry.objects.count() == 0


def test_the_key_search_is_reserved_for_the_search_endpoint(api):
    assert error_code(put(api, "search", 1)) == "invalid_key"
    assert error_code(api.delete("/scratchpad/search", user_id="alice")) == "invalid_key"
    assert put(api, "search/history", 1).status_code == 200


def test_a_key_of_255_characters_with_spaces_and_unicode_is_fine(api):
    key = "ünï cødé/" + "k" * 246
    assert put(api, key, 1).status_code == 200
    assert api.get(f"/scratchpad/{quote(key)}", user_id="alice").json()["key"] == key


def test_bad_key_on_get_is_422(api):
    response = api.get(f"/scratchpad/{quote('a' * 256)}", user_id="alice")
    assert response.status_code == 422


def test_oversize_value_is_413_and_keeps_the_old_value(api):
    put(api, "big", "small")
    response = put(api, "big", "x" * (64 * 1024))
    assert response.status_code == 413
    assert error_code(response) == "value_too_large"
    assert api.get("/scratchpad/big", user_id="alice").json()["value"] == "small"


def test_value_of_exactly_64_kib_serialized_is_accepted(api):
    # The JSON string's two quotes count toward the limit.
    assert put(api, "big", "x" * (64 * 1024 - 2)).status_code == 200


def test_nul_inside_a_value_is_422_not_a_database_error(api):
    response = put(api, "k", {"note": "a\x00b"})
    assert response.status_code == 422
    assert error_code(response) == "invalid_value"


@pytest.mark.parametrize(
    "body",
    [
        {"user_id": "alice", "value": 1, "ttl_seconds": 60},
        {"value": 1},
        {"user_id": "alice"},
        {"user_id": "", "value": 1},
    ],
)
def test_invalid_bodies_are_422_and_store_nothing(api, body):
    response = api.put("/scratchpad/k", body)
    assert response.status_code == 422, response.content
    assert error_code(response) == "validation_error"
    assert ScratchpadEntry.objects.count() == 0


@pytest.mark.parametrize("path", ["/scratchpad/k", "/scratchpad", "/scratchpad/search"])
def test_reads_without_user_id_are_422(api, path):
    assert api.get(path, q="k").status_code == 422


def test_search_without_words_is_422(api):
    response = api.get("/scratchpad/search", user_id="alice", q="   ")
    assert response.status_code == 422
    assert error_code(response) == "invalid_query"
