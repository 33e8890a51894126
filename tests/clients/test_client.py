"""The sync client end to end against the live test server: CRUD, links, supersede, typed
retrieval, pagination, capture, scratchpad, tools, export/import, erasure and error mapping."""

from __future__ import annotations

import socket
from datetime import datetime

import pytest
from memoryhub_client import (
    Conflict,
    Link,
    MemoryHub,
    NotFound,
    RetrievedMemory,
    TransportError,
    Unauthorized,
    ValidationError,
)
from memoryhub_client.models import (
    CaptureJob,
    Consolidation,
    ConsolidationCounts,
    ImportResult,
    Memory,
    Profile,
    ProfileVersion,
    ProfileVersions,
    decode,
)

from consolidation import services as consolidation_services
from memories.models import CapturePolicy, Project
from tests.clients.conftest import key_for
from tests.consolidation.conftest import remember
from tests.consolidation.test_observations import WORK, observer_reply


def test_a_memory_goes_through_create_edit_history_supersede_and_delete(hub: MemoryHub):
    tabs = hub.create_memory(user_id="alice", content="Alice prefers tabs.", kind="preference", importance=0.8)
    assert isinstance(tabs, Memory) and isinstance(tabs.created_at, datetime)
    assert (tabs.kind, tabs.importance, tabs.version, tabs.status) == ("preference", 0.8, 1, "active")
    edited = hub.update_memory(memory_id=tabs.id, user_id="alice", content="Alice prefers tabs, width 4.")
    assert (
        hub.get_memory(memory_id=tabs.id, user_id="alice").content == edited.content == "Alice prefers tabs, width 4."
    )
    newer = hub.supersede_memory(memory_id=tabs.id, user_id="alice", content="Alice now prefers spaces.")
    assert (newer.version, newer.supersedes) == (2, tabs.id)
    assert hub.get_memory(memory_id=tabs.id, user_id="alice").status == "superseded"
    history = hub.memory_history(memory_id=newer.id, user_id="alice")
    assert [memory.id for memory in history.chain] == [tabs.id, newer.id]
    assert "edit" in {revision.action for revision in hub.memory_history(memory_id=tabs.id, user_id="alice").revisions}
    hub.delete_memory(memory_id=newer.id, user_id="alice")
    assert newer.id not in {memory.id for memory in hub.iter_memories(user_id="alice")}


def test_links_are_sent_and_read_back_as_link_objects(hub: MemoryHub):
    tabs = hub.create_memory(user_id="alice", content="Alice prefers tabs.")
    ruff = hub.create_memory(user_id="alice", content="Alice formats with ruff.", related=[Link(tabs.id, "refines")])
    assert hub.get_memory(memory_id=ruff.id, user_id="alice").related == [Link(tabs.id, "refines")]


def test_retrieve_returns_typed_memories_by_score_and_the_injection(hub: MemoryHub):
    hub.create_memory(user_id="alice", content="Alice is allergic to peanuts.", kind="fact")
    hub.create_memory(user_id="alice", content="Alice deploys billing with Kubernetes.")
    found = hub.retrieve(user_id="alice", query="Does Alice have a peanut allergy?", token_budget=200)
    assert found.memories and isinstance(found.memories[0], RetrievedMemory)
    top = found.memories[0]
    assert top.content == "Alice is allergic to peanuts." and 0 <= top.score <= 1
    assert isinstance(top.created_at, datetime) and top.matched_by
    assert "peanuts" in found.injection and found.token_count <= 200
    assert [m.score for m in found.memories] == sorted((m.score for m in found.memories), reverse=True)


def test_iter_memories_walks_every_page(hub: MemoryHub):
    ids = hub.bulk_create_memories(
        memories=[{"user_id": "alice", "content": f"Alice fact number {n}."} for n in range(7)]
    ).ids
    first = hub.list_memories(user_id="alice", limit=3)
    assert len(first.items) == 3 and first.next_cursor
    walked = [memory.id for memory in hub.iter_memories(user_id="alice", limit=3)]
    assert sorted(walked) == sorted(ids) and len(walked) == 7


def test_errors_come_back_as_the_envelopes_exceptions(hub: MemoryHub, server: str):
    with pytest.raises(NotFound) as missing:
        hub.get_memory(memory_id="00000000-0000-0000-0000-000000000000", user_id="alice")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(ValidationError) as invalid:
        hub.create_memory(user_id="alice", content="Too important.", importance=5)
    assert invalid.value.status == 422 and invalid.value.details[0]["loc"][-1] == "importance"
    with MemoryHub(base_url=server, api_key="mh_not_a_key") as stranger, pytest.raises(Unauthorized) as denied:
        stranger.list_memories(user_id="alice")
    assert (denied.value.status, denied.value.code) == (401, "unauthorized")


def test_superseding_a_superseded_memory_is_a_conflict(hub: MemoryHub):
    old = hub.create_memory(user_id="alice", content="Alice lives in Lyon.")
    hub.supersede_memory(memory_id=old.id, user_id="alice", content="Alice lives in Paris.")
    with pytest.raises(Conflict) as conflict:
        hub.supersede_memory(memory_id=old.id, user_id="alice", content="Alice lives in Rome.")
    assert conflict.value.status == 409


def test_another_users_memory_is_not_found_through_the_client(hub: MemoryHub):
    secret = hub.create_memory(user_id="alice", content="Alice's PIN is 1234.")
    with pytest.raises(NotFound):
        hub.get_memory(memory_id=secret.id, user_id="mallory")


def test_capture_answers_a_job_whose_status_the_client_reads(hub: MemoryHub):
    accepted = hub.capture(
        user_id="alice", session_id="s1", trigger="turn", messages=[{"role": "user", "content": "I moved to Oslo."}]
    )
    job = hub.wait_for_capture(job_id=accepted.job_id, user_id="alice", timeout=0)
    assert isinstance(job, CaptureJob) and job.job_id == accepted.job_id
    assert (job.status, job.trigger, job.session_id) == (accepted.status, "turn", "s1")
    with pytest.raises(NotFound):
        hub.capture_job(job_id=accepted.job_id, user_id="mallory")


def test_a_consolidation_is_queued_and_read_back_typed(hub: MemoryHub):
    accepted = hub.consolidate(user_id="alice")
    run = hub.wait_for_consolidation(job_id=accepted.job_id, user_id="alice", timeout=0)
    assert isinstance(run, Consolidation) and run.job_id == accepted.job_id and run.status == "queued"
    assert run.counts.merged == 0 and run.actions == [] and not run.finished
    with pytest.raises(NotFound):
        hub.consolidation(job_id=accepted.job_id, user_id="mallory")


def test_a_consolidations_observation_counts_are_read_back_typed(hub: MemoryHub, project, settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.default_chat = observer_reply()
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    for text in WORK:
        remember(project, text)
    accepted = hub.consolidate(user_id="alice")
    assert consolidation_services.consolidation_run(run_id=accepted.job_id) == "done"  # what the worker does
    counts = hub.wait_for_consolidation(job_id=accepted.job_id, user_id="alice", timeout=0).counts
    assert (counts.observations_proposed, counts.observed, counts.observation_groups) == (1, 0, 1)


def test_counts_from_a_server_before_observations_read_as_zero():
    answer = {"merged": 1, "superseded": 0, "kept": 2, "proposed": 0}
    counts = decode(ConsolidationCounts, answer)
    assert (counts.merged, counts.kept, counts.observed, counts.observations_proposed) == (1, 2, 0, 0)


def test_the_scratchpad_keeps_keys_with_slashes(hub: MemoryHub):
    hub.put_scratchpad(key="plan/step-1", user_id="alice", value={"todo": "book flights"})
    assert hub.get_scratchpad(key="plan/step-1", user_id="alice").value == {"todo": "book flights"}
    assert [entry.key for entry in hub.list_scratchpad(user_id="alice", prefix="plan/").items] == ["plan/step-1"]
    assert [entry.key for entry in hub.search_scratchpad(user_id="alice", q="flights").items] == ["plan/step-1"]
    hub.delete_scratchpad(key="plan/step-1", user_id="alice")
    with pytest.raises(NotFound):
        hub.get_scratchpad(key="plan/step-1", user_id="alice")


def test_tools_and_query_memory(hub: MemoryHub):
    hub.create_memory(user_id="alice", content="Alice drinks green tea every morning.")
    assert "query_memory" in {tool["function"]["name"] for tool in hub.tools()}
    answer = hub.query_memory(user_id="alice", query="What does Alice drink in the morning?")
    assert answer.metadata.count == len(answer.memories) >= 1
    assert answer.memories[0].content == "Alice drinks green tea every morning."


def test_export_then_import_into_another_project(hub: MemoryHub, server: str, other_project):
    old = hub.create_memory(user_id="alice", content="Alice lives in Lyon.")
    hub.supersede_memory(memory_id=old.id, user_id="alice", content="Alice lives in Paris.")
    text = hub.export(user_id="alice")
    with MemoryHub(base_url=server, api_key=key_for(other_project)) as other:
        result = other.import_jsonl(text=text)
        assert isinstance(result, ImportResult) and result.imported.memories == 2
        assert other.import_jsonl(text=text).skipped >= 2
        assert {m.content for m in other.iter_memories(user_id="alice", status="superseded")} == {
            "Alice lives in Lyon."
        }
        with pytest.raises(ValidationError) as rejected:
            other.import_jsonl(text='{"type": "memory"}\nnot json\n')
        assert rejected.value.code == "import_rejected" and rejected.value.details


def test_erase_user_removes_the_users_memories(hub: MemoryHub):
    hub.create_memory(user_id="alice", content="Alice prefers tabs.")
    hub.create_memory(user_id="bob", content="Bob prefers spaces.")
    erased = hub.erase_user(user_id="alice")
    assert erased.user_id == "alice" and erased.erased["memories"] == 1
    assert list(hub.iter_memories(user_id="alice")) == []
    assert [m.content for m in hub.iter_memories(user_id="bob")] == ["Bob prefers spaces."]


def test_no_server_is_a_transport_error_not_an_httpx_one():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        with MemoryHub(base_url=f"http://127.0.0.1:{port}", api_key="k") as hub, pytest.raises(TransportError) as error:
            hub.health()
    assert (error.value.status, error.value.code) == (0, "transport_error")


def test_a_profile_is_edited_and_its_versions_read_back_typed(hub: MemoryHub, project):
    paris = remember(project, "Alice lives in Paris.")
    remember(project, "Alice is vegan.")
    built = hub.rebuild_profile(user_id="alice")
    edited = hub.edit_profile(user_id="alice", pinned=["Call her Ali."], hidden_memory_ids=[str(paris.pk)])
    assert isinstance(edited, Profile) and edited.version == built.version + 1
    assert (edited.pinned, edited.hidden_memory_ids) == (["Call her Ali."], [str(paris.pk)])
    assert edited.facts[0].pinned and "Paris" not in edited.text
    # A field left out keeps its value.
    assert hub.edit_profile(user_id="alice", reason="checked").pinned == ["Call her Ali."]
    history = hub.profile_versions(user_id="alice", limit=2)
    assert isinstance(history, ProfileVersions) and history.user_id == "alice"
    assert [v.version for v in history.versions] == [edited.version + 1, edited.version]
    assert isinstance(history.versions[0], ProfileVersion) and history.versions[0].reason == "checked"
    with pytest.raises(ValidationError):
        hub.edit_profile(user_id="alice", hidden_memory_ids=["not-a-memory"])
