"""One capture job from claim to memories, in-process: the LLM path through the real loopback
chat server, the rule-based path, observations, policies, duplicates and idempotency."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection

from capture import services
from capture.models import CaptureJob
from capture.pipeline import Outcome, extract, run_job
from conversations.models import Message
from memories import lifecycle, review
from memories import services as memory_services
from memories.models import Memory, MemoryEdge, MemoryRevision, Project
from retrieval.vectors.duplicates import NearDuplicateFinder

pytestmark = pytest.mark.django_db

WINDOW = [
    {"role": "user", "content": "I always use pytest fixtures, never setUp. Also I work from Berlin."},
    {"role": "assistant", "content": "Got it."},
]


@pytest.fixture
def llm(settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    return fake_openai


@pytest.fixture
def no_llm(settings):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""


def item(content, category="coding-preferences", **fields):
    return {"content": content, "category": category, "confidence": 0.9, "reason": "stated", **fields}


def reply(*items):
    return json.dumps(list(items))


def submit(api, messages=WINDOW, trigger="turn", user_id="alice"):
    body = {"user_id": user_id, "session_id": "s1", "trigger": trigger, "messages": messages}
    return CaptureJob.objects.get(pk=api.post("/capture", body).json()["job_id"])


def run(job):
    result = run_job(job_id=str(job.pk))
    job.refresh_from_db()
    return result


def test_the_classifier_path_writes_each_valid_item_as_an_active_memory(api, llm):
    llm.script_chat(reply(item("The user prefers pytest fixtures."), item("The user works from Berlin.", "user-facts")))
    job = submit(api)
    assert run(job).outcome == Outcome.DONE
    memories = Memory.objects.filter(pk__in=job.memory_ids).order_by("created_at")
    assert [(m.content, m.category, m.status) for m in memories] == [
        ("The user prefers pytest fixtures.", "coding-preferences", "active"),
        ("The user works from Berlin.", "user-facts", "active"),
    ]
    assert (job.status, job.error, job.attempts, job.payload["extractor"]) == ("done", "", 1, "classifier")


def test_a_captured_memory_records_where_it_came_from_and_why(api, llm):
    llm.script_chat(reply(item("The user prefers pytest fixtures.", evidence="I always use pytest fixtures")))
    job = submit(api)
    run(job)
    memory = Memory.objects.get(pk=job.memory_ids[0])
    said = Message.objects.get(conversation__user_id="alice", content=WINDOW[0]["content"])
    assert memory.source == {
        "capture_job": str(job.pk),
        "conversation": None,
        "session_id": "s1",
        "trigger": "turn",
        "extractor": "classifier",
        "excerpt": "I always use pytest fixtures",
        "messages": [{"id": str(said.pk)}],
    }
    assert memory.metadata == {
        "confidence": 0.9,
        "reason": "stated",
        "evidence": "I always use pytest fixtures",
        "extractor": "classifier",
    }
    assert (memory.created_by, memory.embedding_status) == (f"classifier:{job.pk}", "pending")
    assert MemoryRevision.objects.get(memory=memory).actor == f"classifier:{job.pk}"


def test_the_classifier_sees_the_cleaned_window_and_the_users_memories_with_ids(api, llm, make_memory):
    mine = make_memory(content="Alice uses Vim.")
    theirs = make_memory(user_id="mallory", content="Mallory uses Emacs.")
    llm.script_chat("[]")
    run(submit(api, messages=[*WINDOW, {"role": "tool", "content": "SECRET TOOL OUTPUT"}]))
    prompt = llm.calls[-1][1]["messages"][1]["content"]
    assert f"[{mine['id'][:8]}] () Alice uses Vim." in prompt  # UUIDs go as their short ids
    assert theirs["id"][:8] not in prompt and "Emacs" not in prompt
    assert "User: I always use pytest fixtures" in prompt and "SECRET TOOL OUTPUT" not in prompt


def test_the_classifier_asks_for_its_schema_with_the_visible_short_ids(api, llm, make_memory):
    mine = make_memory(content="Alice uses Vim.")
    llm.script_chat('{"memories": []}')
    run(submit(api))
    response_format = llm.calls[-1][1]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == "memories"
    item = response_format["json_schema"]["schema"]["properties"]["memories"]["items"]
    assert item["properties"]["supersedes"] == {"anyOf": [{"enum": [mine["id"][:8]]}, {"type": "null"}]}
    assert item["properties"]["category"]["enum"] == api.project.taxonomy


def test_unknown_categories_and_invented_ids_are_dropped_but_valid_items_are_written(api, llm, make_memory):
    theirs = make_memory(user_id="mallory", content="Mallory uses Emacs.")
    llm.script_chat(
        reply(
            item("The user likes haiku.", "poetry"),
            item("The user prefers tabs.", related=[theirs["id"], "made-up-id"], supersedes=theirs["id"]),
        )
    )
    job = submit(api)
    run(job)
    memory = Memory.objects.get(pk__in=job.memory_ids)
    assert (memory.content, memory.version, memory.supersedes_id) == ("The user prefers tabs.", 1, None)
    assert MemoryEdge.objects.filter(from_memory=memory).count() == 0
    assert job.payload["rejected"] == [
        {"item": item("The user likes haiku.", "poetry"), "reason": "unknown category 'poetry'"}
    ]
    assert Memory.objects.get(pk=theirs["id"]).status == "active"


def test_a_supersede_writes_a_successor_with_the_next_version(api, llm, make_memory):
    old = make_memory(content="Alice prefers spaces.", category="coding-preferences")
    llm.script_chat(reply(item("The user now prefers tabs over spaces.", supersedes=old["id"])))
    job = submit(api)
    run(job)
    new = Memory.objects.get(pk=job.memory_ids[0])
    assert (new.version, str(new.supersedes_id), new.status) == (2, old["id"], "active")
    assert Memory.objects.get(pk=old["id"]).status == "superseded"


def test_related_ids_of_the_users_memories_become_links(api, llm, make_memory):
    other = make_memory(content="Alice writes Python.")
    llm.script_chat(reply(item("The user prefers pytest fixtures.", related=[other["id"]])))
    job = submit(api)
    run(job)
    edge = MemoryEdge.objects.get(from_memory_id=job.memory_ids[0])
    assert (str(edge.to_memory_id), edge.relationship, edge.created_by) == (
        other["id"],
        "related",
        f"classifier:{job.pk}",
    )


def _classified(api: Any, llm: Any, *items: dict[str, Any]) -> CaptureJob:
    """A job whose proposals are recorded but not yet written (the LLM call is in between)."""
    llm.script_chat(reply(*items))
    claimed = services.capture_job_claim(job_id=str(submit(api).pk))
    return services.capture_job_record_extraction(job=claimed, extraction=extract(claimed))


def _supersede_via_api(memory_id: str) -> Memory:
    draft = memory_services.MemoryDraft(user_id="alice", content="Alice prefers two-space indents.")
    return memory_services.memory_supersede(memory=Memory.objects.get(pk=memory_id), draft=draft, actor="user:rita")


def _delete(memory_id: str) -> None:
    lifecycle.memory_delete(memory=Memory.objects.get(pk=memory_id), actor="user:rita")


def _archive(memory_id: str) -> None:
    lifecycle.memory_archive(memory=Memory.objects.get(pk=memory_id), actor="user:rita")


@pytest.mark.parametrize("change", [_supersede_via_api, _delete, _archive])
def test_a_supersede_whose_target_changed_before_the_write_is_written_as_a_new_memory(api, llm, make_memory, change):
    old = make_memory(content="Alice prefers spaces.", category="coding-preferences")
    other = make_memory(content="Alice writes Python.")
    job = _classified(
        api,
        llm,
        item("The user now prefers tabs over spaces.", supersedes=old["id"], related=[other["id"]]),
        item("The user works from Berlin.", "user-facts"),
    )
    change(old["id"])
    existing = {m.pk: m.status for m in Memory.objects.all()}
    job = services.capture_job_write_memories(job=job)
    assert (job.status, job.error, [i["outcome"] for i in job.proposals]) == ("done", "", ["created", "created"])
    new = Memory.objects.get(pk=job.memory_ids[0])
    assert (new.content, new.status, new.version, new.supersedes_id) == (
        "The user now prefers tabs over spaces.",
        "active",
        1,
        None,
    )
    assert "proposed_supersedes" not in new.metadata
    assert old["id"] in job.proposals[0]["detail"] and job.proposals[0]["supersedes"] == old["id"]
    edges = MemoryEdge.objects.filter(from_memory=new).values_list("to_memory_id", "relationship")
    assert [(str(target), relationship) for target, relationship in edges] == [(other["id"], "related")]
    # Nothing lost: both proposals are written, and every memory already there is left as it was.
    assert len(job.memory_ids) == 2
    assert {m.pk: m.status for m in Memory.objects.exclude(pk__in=job.memory_ids)} == existing


def test_a_related_memory_deleted_before_the_write_is_left_out_and_the_rest_is_linked(api, llm, make_memory):
    gone, kept = make_memory(content="Alice uses Vim."), make_memory(content="Alice writes Python.")
    job = _classified(api, llm, item("The user prefers pytest fixtures.", related=[gone["id"], kept["id"]]))
    _delete(gone["id"])
    job = services.capture_job_write_memories(job=job)
    [result] = job.proposals
    assert (job.status, job.error, result["outcome"]) == ("done", "", "created")
    assert result["detail"] == f"not linked to {gone['id']}: deleted since"
    edges = MemoryEdge.objects.filter(from_memory_id=result["memory_id"])
    assert [str(e.to_memory_id) for e in edges] == [kept["id"]]


def test_under_the_review_policy_a_supersede_of_a_target_gone_meanwhile_is_not_proposed(api, llm, make_memory):
    old = make_memory(content="Alice prefers spaces.")
    Project.objects.filter(pk=api.project.pk).update(capture_policy="review")
    job = _classified(api, llm, item("The user now prefers tabs.", supersedes=old["id"]))
    _delete(old["id"])
    job = services.capture_job_write_memories(job=job)
    new = Memory.objects.get(pk=job.memory_ids[0])
    assert (new.status, new.supersedes_id, "proposed_supersedes" in new.metadata) == ("pending_review", None, False)
    assert job.proposals[0]["detail"].startswith("written as a new memory")


def test_an_exact_duplicate_of_an_existing_memory_is_skipped(api, llm, make_memory):
    old = make_memory(content="The user prefers pytest fixtures.")
    llm.script_chat(reply(item("the user prefers   PYTEST fixtures.")))
    job = submit(api)
    run(job)
    assert job.memory_ids == []
    assert (job.proposals[0]["outcome"], job.proposals[0]["memory_id"]) == ("duplicate", old["id"])
    assert Memory.objects.count() == 1


def test_a_near_duplicate_of_an_existing_memory_is_skipped(api, llm, make_memory):
    old = make_memory(content="The user prefers pytest fixtures over unittest setUp methods.")
    llm.script_chat(reply(item("The user prefers pytest fixtures over unittest setUp methods!")))
    job = submit(api)
    run(job)
    assert (job.proposals[0]["outcome"], job.proposals[0]["memory_id"], job.memory_ids) == (
        "near_duplicate",
        old["id"],
        [],
    )


def test_a_different_memory_is_not_taken_for_a_near_duplicate(api, llm, make_memory):
    make_memory(content="The user prefers pytest fixtures over unittest setUp methods.")
    llm.script_chat(reply(item("The user deploys to Kubernetes on Fridays.", "project-conventions")))
    job = submit(api)
    run(job)
    assert [p["outcome"] for p in job.proposals] == ["created"]


def test_a_secret_in_an_item_is_redacted_and_a_bare_secret_is_dropped(api, llm):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    sentence = "The CI pipeline of the team authenticates to GitHub with the token {} kept in the shared vault."
    llm.script_chat(reply(item(sentence.format(token)), item(token)))
    job = submit(api)
    run(job)
    assert [m.content for m in Memory.objects.all()] == [sentence.format("[REDACTED]")]
    assert job.payload["rejected"][0]["reason"] == "content is mostly a secret"


def test_fenced_prose_wrapped_output_is_understood(api, llm):
    llm.script_chat(f"Here you go:\n```json\n{reply(item('The user prefers pytest fixtures.'))}\n```\nHope it helps")
    job = submit(api)
    run(job)
    assert [m.content for m in Memory.objects.all()] == ["The user prefers pytest fixtures."]


def test_under_the_review_policy_everything_waits_for_review(api, llm):
    Project.objects.filter(pk=api.project.pk).update(capture_policy="review")
    llm.script_chat(reply(item("The user prefers pytest fixtures.")))
    job = submit(api)
    run(job)
    assert list(Memory.objects.values_list("status", flat=True)) == ["pending_review"]


def test_under_the_review_policy_a_supersede_is_only_proposed(api, llm, make_memory):
    old = make_memory(content="Alice prefers spaces.")
    Project.objects.filter(pk=api.project.pk).update(capture_policy="review")
    llm.script_chat(reply(item("The user now prefers tabs.", supersedes=old["id"])))
    job = submit(api)
    run(job)
    new = Memory.objects.get(pk=job.memory_ids[0])
    assert (new.status, new.supersedes_id, new.metadata["proposed_supersedes"]) == ("pending_review", None, old["id"])
    assert Memory.objects.get(pk=old["id"]).status == "active"


def _propose_successor(api: Any, llm: Any, old_id: str, content: str = "The user now prefers tabs.") -> Memory:
    Project.objects.filter(pk=api.project.pk).update(capture_policy="review")
    llm.script_chat(reply(item(content, supersedes=old_id)))
    job = submit(api)
    run(job)
    return Memory.objects.get(pk=job.memory_ids[0])


def test_approving_a_proposed_successor_completes_the_supersede(api, llm, make_memory):
    old = make_memory(content="Alice prefers spaces.")
    new = review.memory_approve(memory=_propose_successor(api, llm, old["id"]), actor="user:rita")
    new.refresh_from_db()
    assert (new.status, str(new.supersedes_id), new.version) == ("active", old["id"], 2)
    assert Memory.objects.get(pk=old["id"]).status == "superseded"
    assert MemoryEdge.objects.filter(from_memory=new, to_memory_id=old["id"], relationship="supersedes").exists()
    assert new.revisions.order_by("-created_at", "-id").values_list("action", "actor")[0] == ("approve", "user:rita")


def test_a_proposed_successor_whose_predecessor_moved_on_is_approved_alone(api, llm, make_memory):
    old = make_memory(content="Alice prefers spaces.")
    proposed = _propose_successor(api, llm, old["id"])
    successor = {"user_id": "alice", "content": "Alice prefers two-space indents."}
    moved = api.post(f"/memories/{old['id']}/supersede", successor)
    assert moved.status_code == 201, moved.content
    new = review.memory_approve(memory=proposed, actor="user:rita")
    new.refresh_from_db()
    assert (new.status, new.supersedes_id, new.version) == ("active", None, 1)
    assert Memory.objects.filter(supersedes_id=old["id"]).count() == 1  # only the API's successor


def test_under_the_confidence_policy_only_confident_items_are_active(api, llm):
    Project.objects.filter(pk=api.project.pk).update(capture_policy="confidence", auto_approve_confidence=0.8)
    llm.script_chat(
        reply(
            item("The user prefers pytest fixtures.", confidence=0.8),
            item("The user likes tea.", "user-facts", confidence=0.5),
        )
    )
    job = submit(api)
    run(job)
    assert sorted(Memory.objects.values_list("content", "status")) == [
        ("The user likes tea.", "pending_review"),
        ("The user prefers pytest fixtures.", "active"),
    ]


def test_without_an_llm_the_rule_based_extractor_writes_the_users_statements(api, no_llm):
    job = submit(api, messages=[{"role": "user", "content": "I prefer tabs over spaces in Python."}])
    run(job)
    memory = Memory.objects.get()
    assert (memory.content, memory.category, memory.created_by) == (
        "The user prefers tabs over spaces in Python.",
        "coding-preferences",
        f"rules:{job.pk}",
    )
    assert job.payload["extractor"] == "rules"


def test_the_rule_based_extractor_respects_the_projects_taxonomy(api, no_llm):
    Project.objects.filter(pk=api.project.pk).update(taxonomy=["user-facts"])
    job = submit(api, messages=[{"role": "user", "content": "I prefer tabs over spaces in Python."}])
    run(job)
    assert (Memory.objects.count(), job.payload["rejected"][0]["reason"]) == (
        0,
        "unknown category 'coding-preferences'",
    )


def test_a_window_with_no_user_or_assistant_text_finishes_with_nothing(api, llm):
    job = submit(api, messages=[{"role": "tool", "content": "42"}])
    assert run(job).outcome == Outcome.DONE
    assert (job.status, job.memory_ids, llm.count("/chat/completions")) == ("done", [], 0)


OUTPUT = (
    "Findings:\n- The staging API rate limit is 100 requests per minute.\n"
    "Lessons learned:\n- Always check the rate limit before running a bulk import."
)


def observe(api, output=OUTPUT):
    body = {"user_id": "alice", "step_name": "bulk-import", "step_type": "GOAL", "output": output}
    return CaptureJob.objects.get(pk=api.post("/observations", body).json()["job_id"])


def test_an_observation_without_an_llm_becomes_findings_and_lessons_linked_to_the_step(api, no_llm):
    job = observe(api)
    run(job)
    memories = Memory.objects.order_by("category")
    assert [(m.category, m.content) for m in memories] == [
        ("finding", "The staging API rate limit is 100 requests per minute."),
        ("lesson", "Always check the rate limit before running a bulk import."),
    ]
    assert memories[0].source == {"step_name": "bulk-import", "step_type": "GOAL", "capture_job": str(job.pk)}


def test_an_observation_with_an_llm_uses_its_findings_insights_and_lessons(api, llm):
    answer = {"findings": ["The staging API rate limit is 100 requests per minute."], "insights": [], "lessons": []}
    llm.script_chat(json.dumps(answer))
    job = observe(api)
    run(job)
    memory = Memory.objects.get()
    assert (memory.category, memory.kind, memory.created_by) == ("finding", "note", f"classifier:{job.pk}")
    assert "<step_output>" in llm.calls[-1][1]["messages"][1]["content"]


def test_a_job_delivered_twice_writes_its_memories_once(api, llm):
    llm.script_chat(reply(item("The user prefers pytest fixtures.")))
    job = submit(api)
    assert run(job).outcome == Outcome.DONE
    assert run(job).outcome == Outcome.SKIPPED
    assert (Memory.objects.count(), llm.count("/chat/completions")) == (1, 1)


def test_a_job_rerun_after_dying_mid_write_keeps_what_it_wrote_and_writes_the_rest(api, llm):
    llm.script_chat(reply(item("The user prefers pytest fixtures."), item("The user works from Berlin.", "user-facts")))
    job = submit(api)
    claimed = services.capture_job_claim(job_id=str(job.pk))
    claimed = services.capture_job_record_extraction(job=claimed, extraction=extract(claimed))
    finder = NearDuplicateFinder(project=claimed.project, user_id="alice")
    services._write_one(claimed, claimed.proposals[0], finder)  # the first worker dies after this
    run(job)  # the "new worker": same job, still running, lock free
    assert sorted(Memory.objects.values_list("content", flat=True)) == [
        "The user prefers pytest fixtures.",
        "The user works from Berlin.",
    ]
    assert (job.status, len(job.memory_ids), job.attempts, llm.count("/chat/completions")) == ("done", 2, 2, 1)


def test_a_job_waits_while_another_job_of_the_same_user_holds_the_lock(api, no_llm):
    job = submit(api)
    taken, release = threading.Event(), threading.Event()

    def hold_lock():
        with services.user_lock(project_id=api.project.pk, user_id="alice"):
            taken.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    taken.wait(10)
    try:
        assert run(job).outcome == Outcome.BUSY
        other_user = submit(api, user_id="mallory")
        assert run(other_user).outcome == Outcome.DONE
    finally:
        release.set()
        holder.join()
    assert run(job).outcome == Outcome.DONE
