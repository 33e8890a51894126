"""Consolidation runs (consolidation/services.py) on real vectors: duplicates merged and undone,
an unlinked change of mind superseded, the capture policy obeyed, one end user's memories only,
a second run changing nothing, and later runs comparing only what changed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from common.errors import Conflict
from consolidation import observations, services
from consolidation.models import ActionStatus, ConsolidationAction, ConsolidationRun, ConsolidationState
from memories import selectors as memory_selectors
from memories.models import CapturePolicy, Memory, MemoryEdge, MemoryRevision, Project, Relationship, Status
from tests.consolidation.conftest import consolidate, fresh, remember

pytestmark = pytest.mark.django_db

DOG = ("The user has a dog named Pixel.", "The user's dog is called Pixel.")
BLACK, RUFF = "Uses black to format Python.", "Formats Python with ruff now."


def history(*memories: Memory) -> dict[str, list[tuple[str, str]]]:
    """Every memory's status and revisions: what a run must not change, compared as a whole."""
    return {
        str(m.pk): [(fresh(m).status, "")]
        + list(MemoryRevision.objects.filter(memory=m).order_by("pk").values_list("action", "reason"))
        for m in memories
    }


def test_duplicates_are_merged_nothing_is_deleted_and_the_merge_can_be_undone(project):
    first, second = (remember(project, text) for text in DOG)
    other = remember(project, "The user lives in Lisbon.")
    run = consolidate(project)
    assert run.status == "done" and run.counts["merged"] == 1 and run.counts["superseded"] == 0
    assert run.full and run.compared == 3
    action = ConsolidationAction.objects.get(run=run)
    survivor, merged = fresh(action.survivor), fresh(action.retired)
    assert {survivor.pk, merged.pk} == {first.pk, second.pk} and action.status == ActionStatus.APPLIED
    assert survivor.status == Status.ACTIVE and merged.status == Status.SUPERSEDED
    assert merged.metadata["merged_into"] == str(survivor.pk)
    assert MemoryEdge.objects.filter(from_memory=survivor, to_memory=merged, relationship="supersedes").exists()
    assert merged.revisions.last().reason.startswith(f"merged into {survivor.pk}: consolidation: merged")
    assert Memory.objects.filter(project=project).count() == 3 and fresh(other).status == Status.ACTIVE
    # Retrieval sees the survivor only.
    live = set(memory_selectors.memories_live(project=project, user_id="alice").values_list("pk", flat=True))
    assert live == {survivor.pk, other.pk}

    services.action_undo(action=action, actor="user:reviewer")
    assert fresh(merged).status == Status.ACTIVE and "merged_into" not in fresh(merged).metadata
    assert fresh(survivor).status == Status.ACTIVE
    assert not MemoryEdge.objects.filter(from_memory=survivor, to_memory=merged).exists()
    assert [r.action for r in fresh(merged).revisions.order_by("pk")] == ["create", "superseded", "restore"]
    assert fresh(action.survivor).revisions.order_by("pk").last().action == "unconsolidate"
    assert ConsolidationAction.objects.get(pk=action.pk).status == ActionStatus.UNDONE
    # What was undone is not merged again by a later run.
    assert consolidate(project).counts["merged"] == 0 and fresh(merged).status == Status.ACTIVE
    with pytest.raises(Conflict):
        services.action_undo(action=ConsolidationAction.objects.get(pk=action.pk), actor="user:reviewer")


def test_black_then_ruff_is_superseded_by_consolidation(project, api):
    old = remember(project, BLACK)
    new = remember(project, RUFF)
    run = consolidate(project)
    assert run.counts["superseded"] == 1 and run.counts["merged"] == 0
    old, new = fresh(old), fresh(new)
    assert old.status == Status.SUPERSEDED and new.status == Status.ACTIVE
    assert new.supersedes_id == old.pk and new.version == 2
    assert "black -> ruff" in new.revisions.order_by("pk").last().reason
    chain = api.get(f"/memories/{new.pk}/history", user_id="alice").json()["chain"]
    assert [m["content"] for m in chain] == [BLACK, RUFF]
    assert api.get(f"/memories/{old.pk}", user_id="alice").json()["superseded_by"] == str(new.pk)
    # Undone: both current again, the chain as before.
    services.action_undo(action=ConsolidationAction.objects.get(run=run), actor="user:reviewer")
    old, new = fresh(old), fresh(new)
    assert (old.status, new.status, new.supersedes_id, new.version) == (Status.ACTIVE, Status.ACTIVE, None, 1)


def test_a_newer_memory_continuing_a_chain_of_its_own_retires_the_older_by_the_link_alone(project):
    stale = remember(project, "The user lives in Lisbon.")
    first = remember(project, "The user is based in Oslo.")
    from memories import services as memory_services

    head = memory_services.memory_supersede(
        memory=first,
        draft=memory_services.MemoryDraft(user_id="alice", content="The user moved to Berlin recently."),
        actor="system:test",
    )
    run = consolidate(project)
    assert run.counts["superseded"] == 1
    assert fresh(stale).status == Status.SUPERSEDED and fresh(head).supersedes_id == first.pk
    assert MemoryEdge.objects.filter(from_memory=head, to_memory=stale, relationship="supersedes").exists()


def test_a_review_project_gets_proposals_and_nothing_changes_until_approval(project):
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    project.refresh_from_db()
    memories = [remember(project, text) for text in (*DOG, BLACK, RUFF)]
    before = history(*memories)
    run = consolidate(project)
    # No LLM configured: no observation either (tests/consolidation/test_observations.py).
    nothing_observed = dict.fromkeys(observations.COUNTS, 0)
    assert run.counts == {"merged": 0, "superseded": 0, "proposed": 2, "kept": run.counts["kept"], **nothing_observed}
    assert history(*memories) == before
    proposals = list(ConsolidationAction.objects.filter(run=run).order_by("kind"))
    assert [(p.kind, p.status) for p in proposals] == [("merge", "proposed"), ("supersede", "proposed")]
    assert all(p.reason and 0 < p.confidence <= 1 for p in proposals)
    # A second run proposes nothing new while those wait.
    assert consolidate(project).counts["proposed"] == 0
    services.action_approve(action=proposals[1], actor="user:reviewer")
    assert fresh(memories[2]).status == Status.SUPERSEDED and fresh(memories[3]).supersedes_id == memories[2].pk
    services.action_reject(action=proposals[0], actor="user:reviewer")
    assert history(*memories[:2]) == {k: v for k, v in before.items() if k in {str(m.pk) for m in memories[:2]}}
    with pytest.raises(Conflict):
        services.action_approve(action=ConsolidationAction.objects.get(pk=proposals[0].pk), actor="user:reviewer")


def test_under_the_confidence_policy_only_sure_actions_apply(project):
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.CONFIDENCE, auto_approve_confidence=0.99)
    project.refresh_from_db()
    for text in DOG:
        remember(project, text)
    assert consolidate(project).counts["proposed"] == 1
    ConsolidationAction.objects.all().delete()
    Project.objects.filter(pk=project.pk).update(auto_approve_confidence=0.5)
    project.refresh_from_db()
    ConsolidationState.objects.all().delete()  # compare everything again
    assert consolidate(project).counts["merged"] == 1


def test_a_proposal_whose_memories_changed_meanwhile_is_stale_and_changes_nothing(project):
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
    project.refresh_from_db()
    first, second = (remember(project, text) for text in DOG)
    consolidate(project)
    from memories import lifecycle

    lifecycle.memory_delete(memory=second, actor="user:someone")
    proposal = ConsolidationAction.objects.get()
    with pytest.raises(Conflict):
        services.action_approve(action=proposal, actor="user:reviewer")
    assert ConsolidationAction.objects.get().status == ActionStatus.STALE and fresh(first).status == Status.ACTIVE


def test_no_action_touches_another_users_or_another_tenants_memories(project, other_project):
    mine = [remember(project, text) for text in (*DOG, BLACK, RUFF)]
    theirs = [remember(project, text, user_id="mallory") for text in (*DOG, BLACK, RUFF)]
    shared = remember(project, DOG[1], user_id="bob", scope="project")
    elsewhere = [remember(other_project, text) for text in (*DOG, BLACK, RUFF)]
    untouched = history(*theirs, shared, *elsewhere)
    run = consolidate(project, "alice")
    assert run.counts["merged"] == 1 and run.counts["superseded"] == 1
    assert history(*theirs, shared, *elsewhere) == untouched
    mine_ids = {m.pk for m in mine}
    for action in ConsolidationAction.objects.all():
        assert action.user_id == "alice" and action.project_id == project.pk
        assert {action.survivor_id, action.retired_id} <= mine_ids
    # Another tenant's run acts on its own memories only, under its own watermark.
    assert consolidate(other_project, "alice").counts["merged"] == 1
    assert history(*theirs, shared) == {
        k: v for k, v in untouched.items() if k in {str(m.pk) for m in (*theirs, shared)}
    }


def test_a_users_own_project_scope_memory_is_never_paired_with_their_user_scope_one(project):
    remember(project, DOG[0])
    remember(project, DOG[1], scope="project")
    run = consolidate(project)
    assert run.counts["merged"] == 0 and not ConsolidationAction.objects.exists()


def test_running_twice_changes_nothing_the_second_time(project):
    memories = [remember(project, text) for text in (*DOG, BLACK, RUFF, "The user lives in Lisbon.")]
    first = consolidate(project)
    assert first.counts["merged"] == 1 and first.counts["superseded"] == 1
    state = history(*memories)
    edges, actions = MemoryEdge.objects.count(), ConsolidationAction.objects.count()
    second = consolidate(project)
    assert (second.counts["merged"], second.counts["superseded"], second.counts["proposed"]) == (0, 0, 0)
    assert history(*memories) == state
    assert (MemoryEdge.objects.count(), ConsolidationAction.objects.count()) == (edges, actions)


def test_a_later_run_compares_only_the_memories_changed_since_the_last(project):
    old = [remember(project, f"The user visited {city} in 2019.") for city in ("Oslo", "Lima", "Kyoto", "Quito")]
    Memory.objects.filter(pk__in=[m.pk for m in old]).update(updated_at=timezone.now() - timedelta(hours=2))
    first = consolidate(project)
    assert first.full and first.compared == 4 and first.counts["merged"] == 0
    new = remember(project, "The user went to Oslo in 2019.")
    second = consolidate(project)
    assert not second.full and second.compared == 1 and second.since is not None
    assert second.counts["merged"] == 1
    assert ConsolidationAction.objects.get(run=second).retired_id in {new.pk, old[0].pk}


def test_a_memory_not_embedded_yet_waits_for_the_next_run(project):
    from memories import services as memory_services

    remember(project, DOG[0])
    Memory.objects.update(updated_at=timezone.now() - timedelta(hours=2))
    consolidate(project)
    waiting = memory_services.memory_create(
        project=project,
        draft=memory_services.MemoryDraft(user_id="alice", content=DOG[1]),
        actor="t",
        embed_inline=False,
    )
    run = consolidate(project)
    assert run.compared == 0 and run.counts["merged"] == 0
    assert ConsolidationState.objects.get().watermark < waiting.updated_at + services.WATERMARK_OVERLAP
    from retrieval.vectors.memory_vectors import embed_memories

    embed_memories([fresh(waiting)])
    assert consolidate(project).counts["merged"] == 1


def test_asking_twice_while_a_run_waits_queues_one_run(project):
    first = services.consolidation_submit(project=project, user_id="alice", trigger="api", actor="t", queue=False)
    again = services.consolidation_submit(project=project, user_id="alice", trigger="ui", actor="t", queue=False)
    assert first.pk == again.pk and ConsolidationRun.objects.count() == 1
    other = services.consolidation_submit(project=project, user_id="mallory", trigger="api", actor="t", queue=False)
    assert other.pk != first.pk


def test_a_run_whose_user_is_being_consolidated_elsewhere_waits(project):
    run = services.consolidation_submit(project=project, user_id="alice", trigger="api", actor="t", queue=False)
    with services.user_lock(project_id=project.pk, user_id="alice"):
        from django.db import connections

        # The lock is per database session: another session's run finds it taken.
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                    [services.LOCK_NAMESPACE, f"consolidate:{project.pk}:alice"],
                )
                assert cursor.fetchone()[0] is False
        finally:
            other.close()
    assert services.consolidation_run(run_id=str(run.pk)) == "done"


def test_beat_queues_a_run_for_each_user_whose_memories_changed(project, other_project):
    remember(project, DOG[0])
    remember(project, DOG[0], user_id="mallory")
    remember(other_project, DOG[0], user_id="zed")
    queued = services.schedule_round()
    runs = ConsolidationRun.objects.filter(pk__in=queued)
    assert {(r.project_id, r.user_id, r.trigger) for r in runs} == {
        (project.pk, "alice", "schedule"),
        (project.pk, "mallory", "schedule"),
        (other_project.pk, "zed", "schedule"),
    }
    for run in runs:
        assert services.consolidation_run(run_id=str(run.pk)) == "done"
    assert services.schedule_round() == []
    remember(project, DOG[1])
    assert [r.user_id for r in ConsolidationRun.objects.filter(pk__in=services.schedule_round())] == ["alice"]


def test_runs_left_behind_are_queued_again(project):
    run = services.consolidation_submit(project=project, user_id="alice", trigger="api", actor="t", queue=False)
    ConsolidationRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    later = timezone.now() - timedelta(minutes=2)
    assert services.runs_requeue(queued_before=later, running_before=later) == [str(run.pk)]
    assert services.runs_requeue(queued_before=later, running_before=later) == []


def test_a_run_that_keeps_failing_is_failed_after_its_attempts(project, monkeypatch):
    remember(project, DOG[0])
    run = services.consolidation_submit(project=project, user_id="alice", trigger="api", actor="t", queue=False)

    def broken(**_):
        raise RuntimeError("the vectors are unreadable")

    monkeypatch.setattr(services, "plan_run", broken)
    outcomes = [services.consolidation_run(run_id=str(run.pk)) for _ in range(services.MAX_ATTEMPTS)]
    assert outcomes == ["retry"] * (services.MAX_ATTEMPTS - 1) + ["failed"]
    failed = ConsolidationRun.objects.get(pk=run.pk)
    assert failed.status == "failed" and "unreadable" in failed.error
    assert Relationship.DEPENDS_ON == "depends_on"


# --- the optional LLM judge (consolidation/llm_judge.py), through the loopback fake server -------

LACTOSE = ("The user is lactose intolerant.", "The user cannot digest lactose.")


@pytest.fixture
def llm(settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    return fake_openai


def test_without_an_llm_a_pair_the_rules_cannot_tell_apart_is_kept(project):
    for text in LACTOSE:
        remember(project, text)
    assert consolidate(project).counts["merged"] == 0


def test_with_an_llm_it_decides_the_pairs_the_rules_cannot_tell_apart(project, llm):
    first, second = (remember(project, text) for text in LACTOSE)
    remember(project, "The user's sister is called Ana.")
    remember(project, "The user's sister is called Lia.")  # different names: the rules keep them, no LLM asked
    llm.script_chat('{"verdicts": [{"pair": 1, "decision": "merge"}]}')
    run = consolidate(project)
    assert run.counts["merged"] == 1
    action = ConsolidationAction.objects.get(run=run)
    assert {action.survivor_id, action.retired_id} == {first.pk, second.pk}
    assert action.reason == "decided by the LLM: merge" and action.confidence == 0.75
    [(_, request)] = [call for call in llm.calls if call[0].endswith("/chat/completions")]
    asked = request["messages"][-1]["content"]
    assert LACTOSE[0] in asked and LACTOSE[1] in asked and "Ana" not in asked


def test_the_llms_merges_wait_for_review_under_the_default_confidence_threshold(project, llm):
    Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.CONFIDENCE)
    project.refresh_from_db()
    for text in LACTOSE:
        remember(project, text)
    llm.script_chat('{"verdicts": [{"pair": 1, "decision": "merge"}]}')
    assert consolidate(project).counts["proposed"] == 1


def test_an_llm_that_fails_or_answers_garbage_leaves_the_pair_kept(project, llm):
    from tests.support.openai_server import Fault

    for text in LACTOSE:
        remember(project, text)
    llm.script_chat(Fault(status=500))
    run = consolidate(project)
    assert run.status == "done" and run.counts["merged"] == 0 and run.counts["kept"] >= 1
    remember(project, "The user avoids milk.")
    llm.script_chat("not json at all")
    assert consolidate(project).counts["merged"] == 0
