"""The agent's path through the memory API, over real HTTP handling and a real database."""

from __future__ import annotations

from memories.models import Memory, MemoryRevision


def test_agent_walks_create_get_patch_history_supersede_delete(api, alice):
    created = api.post(
        "/memories",
        {"user_id": alice, "content": "Alice uses vim.", "kind": "preference", "category": "coding-preferences"},
    )
    assert created.status_code == 201
    memory_id = created.json()["id"]
    assert api.get(f"/memories/{memory_id}", user_id=alice).json()["content"] == "Alice uses vim."

    patched = api.patch(f"/memories/{memory_id}", {"user_id": alice, "content": "Alice uses neovim."})
    assert patched.json()["content"] == "Alice uses neovim."
    history = api.get(f"/memories/{memory_id}/history", user_id=alice).json()
    assert [r["action"] for r in history["revisions"]] == ["create", "edit"]
    assert history["revisions"][1]["before"]["content"] == "Alice uses vim."

    successor = api.post(f"/memories/{memory_id}/supersede", {"user_id": alice, "content": "Alice uses Helix now."})
    assert successor.status_code == 201
    new = successor.json()
    assert (new["version"], new["supersedes"]) == (2, memory_id)
    chain = api.get(f"/memories/{new['id']}/history", user_id=alice).json()["chain"]
    assert [(m["version"], m["status"]) for m in chain] == [(1, "superseded"), (2, "active")]

    assert api.delete(f"/memories/{new['id']}", user_id=alice).status_code == 204
    assert api.get(f"/memories/{new['id']}", user_id=alice).status_code == 404


def test_created_memory_has_the_documented_shape(make_memory):
    memory = make_memory(kind="decision", category="architectural-decisions", importance=0.9, metadata={"a": 1})
    assert set(memory) == {
        "id",
        "user_id",
        "scope",
        "kind",
        "category",
        "content",
        "importance",
        "metadata",
        "status",
        "version",
        "supersedes",
        "superseded_by",
        "related",
        "source",
        "embedding_status",
        "created_at",
        "updated_at",
        "expires_at",
        "created",
        "duplicate_of",
        "indexing",
    }
    assert (memory["kind"], memory["status"], memory["version"], memory["importance"]) == ("decision", "active", 1, 0.9)


def test_superseding_an_already_superseded_memory_is_a_conflict(api, make_memory, alice):
    old = make_memory()
    api.post(f"/memories/{old['id']}/supersede", {"user_id": alice, "content": "Alice prefers spaces now."})
    again = api.post(f"/memories/{old['id']}/supersede", {"user_id": alice, "content": "Alice prefers tabs again."})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_superseded"
    assert Memory.objects.count() == 2


def test_old_version_shows_its_successor(api, make_memory, alice):
    old = make_memory()
    new = api.post(f"/memories/{old['id']}/supersede", {"user_id": alice, "content": "Alice prefers spaces."}).json()
    refreshed = api.get(f"/memories/{old['id']}", user_id=alice).json()
    assert (refreshed["status"], refreshed["superseded_by"]) == ("superseded", new["id"])


def test_create_with_related_links_both_memories(api, make_memory, alice):
    first = make_memory(content="The team deploys on Fridays.")
    second = make_memory(
        content="Deploys need a rollback plan.", related=[{"id": first["id"], "relationship": "refines"}]
    )
    assert second["related"] == [{"id": first["id"], "relationship": "refines"}]


def test_list_filters_and_paginates_with_a_cursor(api, make_memory, alice):
    for n in range(5):
        make_memory(content=f"Fact number {n} about deployment.", kind="fact")
    make_memory(content="Alice likes dark mode.", kind="preference")
    page1 = api.get("/memories", user_id=alice, kind="fact", limit=3).json()
    page2 = api.get("/memories", user_id=alice, kind="fact", limit=3, cursor=page1["next_cursor"]).json()
    contents = [m["content"] for m in page1["items"] + page2["items"]]
    assert contents == [f"Fact number {n} about deployment." for n in (4, 3, 2, 1, 0)]
    assert page2["next_cursor"] is None


def test_list_full_text_filter_finds_stemmed_words(api, make_memory, alice):
    make_memory(content="Alice deploys with Kubernetes.")
    make_memory(content="Alice drinks coffee.")
    items = api.get("/memories", user_id=alice, q="deploying kubernetes").json()["items"]
    assert [m["content"] for m in items] == ["Alice deploys with Kubernetes."]


def test_bulk_create_returns_ids_in_order(api, alice):
    body = {"memories": [{"user_id": alice, "content": f"Bulk fact {n}."} for n in range(3)]}
    response = api.post("/memories/bulk", body)
    assert response.status_code == 201
    ids = response.json()["ids"]
    assert [Memory.objects.get(pk=i).content for i in ids] == ["Bulk fact 0.", "Bulk fact 1.", "Bulk fact 2."]
    assert MemoryRevision.objects.filter(memory_id__in=ids, action="create").count() == 3


def test_every_change_names_its_actor(api, make_memory, alice):
    memory = make_memory()
    api.patch(f"/memories/{memory['id']}", {"user_id": alice, "importance": 0.8})
    actors = set(MemoryRevision.objects.filter(memory_id=memory["id"]).values_list("actor", flat=True))
    assert actors == {f"api_key:{api.key.split('_')[1]}"}


def test_project_scope_memories_are_shared_by_every_user_of_the_project(api, make_memory, mallory):
    shared = make_memory(content="The team uses black for formatting.", scope="project")
    assert api.get(f"/memories/{shared['id']}", user_id=mallory).status_code == 200
    listed = api.get("/memories", user_id=mallory).json()["items"]
    assert [m["id"] for m in listed] == [shared["id"]]
