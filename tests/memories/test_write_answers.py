"""What a write answers: a new version keeps what the request leaves out, an exact duplicate
is not stored twice, and every write says what is searchable now."""

from __future__ import annotations

from integrations.mcp.tools import Principal, call_tool
from memories.models import Memory


def test_supersede_with_only_content_keeps_kind_category_scope_and_importance(api, make_memory, alice):
    old = make_memory(content="Alice uses vim.", kind="preference", category="coding-preferences", importance=0.8)
    answer = api.post(f"/memories/{old['id']}/supersede", {"user_id": alice, "content": "Alice uses Helix now."})
    assert answer.status_code == 201
    new = answer.json()
    assert (new["kind"], new["category"], new["scope"], new["importance"]) == (
        "preference",
        "coding-preferences",
        "user",
        0.8,
    )


def test_supersede_changes_only_the_fields_the_request_names(api, make_memory, alice):
    old = make_memory(content="Alice uses vim.", kind="preference", category="coding-preferences", importance=0.8)
    body = {"user_id": alice, "content": "Team rule: Helix.", "kind": "decision", "importance": 0.3}
    new = api.post(f"/memories/{old['id']}/supersede", body).json()
    assert (new["kind"], new["category"], new["importance"]) == ("decision", "coding-preferences", 0.3)


def test_create_with_supersedes_keeps_the_old_labels_too(api, make_memory, alice):
    old = make_memory(content="Alice uses vim.", kind="preference", category="coding-preferences")
    new = api.post("/memories", {"user_id": alice, "content": "Alice uses Helix.", "supersedes": old["id"]}).json()
    assert (new["kind"], new["category"], new["supersedes"]) == ("preference", "coding-preferences", old["id"])


def test_the_same_content_posted_twice_answers_the_existing_memory(api, make_memory, alice):
    first = make_memory(content="Alice is allergic to peanuts.")
    again = api.post("/memories", {"user_id": alice, "content": "  alice is ALLERGIC to peanuts. "})
    assert again.status_code == 200
    body = again.json()
    assert (body["id"], body["created"], body["duplicate_of"]) == (first["id"], False, first["id"])
    assert first["created"] is True and first["duplicate_of"] is None
    assert Memory.objects.filter(user_id=alice).count() == 1


def test_a_duplicate_of_another_users_memory_is_stored(api, make_memory, alice, mallory):
    make_memory(user_id=alice, content="Likes green tea.")
    other = api.post("/memories", {"user_id": mallory, "content": "Likes green tea."})
    assert (other.status_code, other.json()["created"]) == (201, True)


def test_a_superseded_memorys_content_may_be_stored_again(api, make_memory, alice):
    old = make_memory(content="Alice is vegetarian.")
    api.post(f"/memories/{old['id']}/supersede", {"user_id": alice, "content": "Alice is pescatarian now."})
    back = api.post("/memories", {"user_id": alice, "content": "Alice is vegetarian."})
    assert (back.status_code, back.json()["created"]) == (201, True)


def test_mcp_add_memory_does_not_store_a_duplicate(api, alice):
    principal = Principal(project=api.project, actor="api_key:test")
    first = call_tool(principal, "add_memory", {"user_id": alice, "content": "Works as a nurse."})
    second = call_tool(principal, "add_memory", {"user_id": alice, "content": "works as a nurse."})
    assert (second["id"], second["created"], second["duplicate_of"]) == (first["id"], False, first["id"])
    assert Memory.objects.filter(user_id=alice).count() == 1


def test_a_create_says_it_is_searchable_by_words_and_meaning_now(make_memory):
    memory = make_memory(content="Alice keeps bees on the roof.")
    assert memory["embedding_status"] == "ready"
    assert memory["indexing"] == {"keyword": True, "vector": True, "pending": ["profile"]}


def test_a_bulk_create_says_the_vectors_are_still_coming(api, alice):
    answer = api.post("/memories/bulk", {"memories": [{"user_id": alice, "content": "Alice runs marathons."}]})
    assert answer.status_code == 201
    assert answer.json()["indexing"] == {"keyword": True, "vector": False, "pending": ["embedding", "profile"]}
