"""Every id-taking endpoint, attacked with another user's and another project's ids."""

from __future__ import annotations

import pytest

from memories import edges
from memories.models import Memory


@pytest.fixture
def victims(api, other_api, make_memory):
    """alice's private memory in our project, and a memory in another project."""
    private = make_memory(user_id="alice", content="Alice's bank is Northwind.")
    response = other_api.post("/memories", {"user_id": "alice", "content": "Rival project secret.", "scope": "project"})
    return {"other_user": private["id"], "other_project": response.json()["id"]}


def attacks(api, memory_id):
    """Every way the API takes an id, as mallory."""
    attacker = "mallory"
    return {
        "get": api.get(f"/memories/{memory_id}", user_id=attacker),
        "history": api.get(f"/memories/{memory_id}/history", user_id=attacker),
        "patch": api.patch(f"/memories/{memory_id}", {"user_id": attacker, "content": "pwned"}),
        "supersede": api.post(f"/memories/{memory_id}/supersede", {"user_id": attacker, "content": "pwned"}),
        "create_supersedes": api.post("/memories", {"user_id": attacker, "content": "pwned", "supersedes": memory_id}),
        "create_related": api.post(
            "/memories", {"user_id": attacker, "content": "pwned", "related": [{"id": memory_id}]}
        ),
        "delete": api.delete(f"/memories/{memory_id}", user_id=attacker),
    }


@pytest.mark.parametrize("target", ["other_user", "other_project"])
def test_every_id_taking_endpoint_answers_404_and_changes_nothing(api, victims, target):
    memory_id = victims[target]
    before = Memory.objects.get(pk=memory_id)
    for name, response in attacks(api, memory_id).items():
        assert response.status_code == 404, name
        assert response.json()["error"]["code"] == "not_found", name
    after = Memory.objects.get(pk=memory_id)
    assert (after.content, after.status, after.updated_at) == (before.content, before.status, before.updated_at)
    assert not Memory.objects.filter(content="pwned").exists()


def test_listing_never_shows_another_users_memories(api, victims):
    items = api.get("/memories", user_id="mallory").json()["items"]
    assert items == []


def test_another_projects_key_cannot_list_our_memories(other_api, victims):
    items = other_api.get("/memories", user_id="alice").json()["items"]
    assert [m["content"] for m in items] == ["Rival project secret."]


def test_history_chain_hides_versions_the_caller_cannot_see(api, make_memory):
    shared = make_memory(user_id="alice", content="The team uses Postgres 15.", scope="project")
    successor = api.post(
        f"/memories/{shared['id']}/supersede", {"user_id": "mallory", "content": "The team uses Postgres 18."}
    )
    assert successor.json()["scope"] == "project"
    third = api.post(f"/memories/{successor.json()['id']}/supersede", {"user_id": "alice", "content": "Postgres 19."})
    # A deleted middle version and a private link on a shared version stay hidden from others.
    api.delete(f"/memories/{successor.json()['id']}", user_id="alice")
    private = make_memory(user_id="alice", content="Alice's private note about Postgres.")
    edges.edge_link(
        source=Memory.objects.get(pk=shared["id"]),
        target=Memory.objects.get(pk=private["id"]),
        relationship="related",
        actor="test",
    )
    chain = api.get(f"/memories/{third.json()['id']}/history", user_id="mallory").json()["chain"]
    assert [m["version"] for m in chain] == [1, 3]
    assert chain[0]["related"] == []
    mine = api.get(f"/memories/{third.json()['id']}/history", user_id="alice").json()["chain"]
    assert [r["id"] for r in mine[0]["related"]] == [private["id"]]
    # The shared version's own history names the link without the private memory's id.
    revisions = api.get(f"/memories/{shared['id']}/history", user_id="mallory").json()["revisions"]
    assert "link" in [r["action"] for r in revisions]
    assert private["id"] not in str(revisions)


def test_superseding_through_post_memories_keeps_a_shared_memorys_scope(api, make_memory):
    shared = make_memory(user_id="alice", content="Deploys happen on Fridays.", scope="project")
    new = api.post(
        "/memories", {"user_id": "alice", "content": "Deploys happen on Tuesdays.", "supersedes": shared["id"]}
    )
    assert new.status_code == 201, new.content
    assert (new.json()["scope"], new.json()["version"]) == ("project", 2)
