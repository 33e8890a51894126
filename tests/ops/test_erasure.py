"""Erasing one end user (memoryhub/erasure.py): everything of theirs goes, nobody else's."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from capture.models import CaptureJob
from common.redis import redis_client
from conversations.models import Conversation, Message
from memories.models import Embedding, Memory, MemoryEdge, ScratchpadEntry
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.embedding.vector_cache import cache_key, cache_name
from retrieval.models import RetrievalLog


def leave_traces(api, user_id: str) -> dict[str, str]:
    """Every kind of row a user can leave, through the API."""
    first = api.post("/memories", {"user_id": user_id, "content": f"{user_id} keeps bees in the garden."}).json()
    second = api.post(
        "/memories", {"user_id": user_id, "content": f"{user_id} sells honey.", "related": [{"id": first["id"]}]}
    ).json()
    api.patch(f"/memories/{first['id']}", {"user_id": user_id, "content": f"{user_id} keeps two hives."})
    api.post(f"/memories/{second['id']}/supersede", {"user_id": user_id, "content": f"{user_id} sells honey online."})
    conversation = api.post("/conversations", {"user_id": user_id}).json()["id"]
    said = [{"role": "user", "content": f"{user_id} says hello"}]
    api.post(f"/conversations/{conversation}/messages", {"user_id": user_id, "messages": said})
    turn = {"user_id": user_id, "trigger": "turn", "messages": [{"role": "user", "content": "I like tea."}]}
    assert api.post("/capture", turn).status_code == 202
    assert api.post("/retrieve", {"user_id": user_id, "query": "bees"}).status_code == 200
    assert api.put("/scratchpad/plan", {"user_id": user_id, "value": "buy a smoker"}).status_code == 200
    return {"memory": first["id"], "conversation": conversation}


def rows(project, user_id: str) -> dict[str, int]:
    memories = Memory.objects.filter(project=project, user_id=user_id)
    return {
        "memories": memories.count(),
        "embeddings": Embedding.objects.filter(memory__in=memories).count(),
        "links": MemoryEdge.objects.filter(from_memory__in=memories).count(),
        "conversations": Conversation.objects.filter(project=project, user_id=user_id).count(),
        "messages": Message.objects.filter(conversation__project=project, conversation__user_id=user_id).count(),
        "capture_jobs": CaptureJob.objects.filter(project=project, user_id=user_id).count(),
        "retrieval_logs": RetrievalLog.objects.filter(project=project, user_id=user_id).count(),
        "scratchpad_entries": ScratchpadEntry.objects.filter(project=project, user_id=user_id).count(),
    }


def test_delete_user_erases_every_row_of_theirs_and_reports_counts(api, other_api):
    leave_traces(api, "alice")
    leave_traces(api, "bob")
    leave_traces(other_api, "alice")  # the same id in another project is another person
    before = rows(api.project, "alice")
    assert all(before.values()), before
    bob, alice_elsewhere = rows(api.project, "bob"), rows(other_api.project, "alice")
    key = cache_key(cache_name(embedder_for_model(LOCAL_MODEL_NAME)), "alice keeps two hives.")
    assert redis_client().exists(key)

    response = api.delete("/users/alice")

    assert response.status_code == 200, response.content
    erased = response.json()["erased"]
    assert {k: erased[k] for k in before} == before
    assert erased["revisions"] >= 3 and erased["cache_entries"] >= 1
    assert not any(rows(api.project, "alice").values())
    assert rows(api.project, "bob") == bob and rows(other_api.project, "alice") == alice_elsewhere
    assert not redis_client().exists(key)
    assert api.post("/retrieve", {"user_id": "alice", "query": "bees"}).json()["memories"] == []


def test_a_shared_memory_that_superseded_the_users_stays(api):
    shared = api.post("/memories", {"user_id": "alice", "content": "The team uses Postgres 15.", "scope": "project"})
    successor = api.post(
        f"/memories/{shared.json()['id']}/supersede", {"user_id": "bob", "content": "The team uses Postgres 18."}
    )
    assert successor.status_code == 201
    assert api.delete("/users/alice").json()["erased"]["memories"] == 1
    kept = Memory.objects.get(pk=successor.json()["id"])
    assert (kept.content, kept.supersedes_id) == ("The team uses Postgres 18.", None)


def test_erase_user_command_prints_the_counts(api, capsys: pytest.CaptureFixture[str]):
    leave_traces(api, "carol")
    call_command("erase_user", "--project", api.project.slug, "--user", "carol", "--yes")
    printed = json.loads(capsys.readouterr().out)
    # Two conversations: the one posted, and the capture's session, kept as episodes.
    assert printed["erased"]["memories"] == 3 and printed["erased"]["conversations"] == 2
    assert not any(rows(api.project, "carol").values())


def test_an_empty_user_id_is_refused(api):
    assert api.delete("/users/%20").json()["error"]["code"] == "invalid_user_id"
