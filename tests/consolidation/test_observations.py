"""Observations (consolidation/observations.py, docs/adr/0110-consolidation-observations.md): with an
LLM configured, a run writes a short statement from several related memories of one end user,
citing them, through the capture policy; approval writes it as a memory of kind ``observation``
linked ``derived_from`` to what it cites; undo deletes it; a cited memory superseded sends it back
to review. Real vectors (the local model), the loopback OpenAI-compatible server for the LLM."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from common.errors import Conflict
from consolidation import observations, observer
from consolidation.models import ActionStatus, ConsolidationObservation, ConsolidationRun
from memories import lifecycle
from memories import services as memory_services
from memories.models import CapturePolicy, Kind, Memory, MemoryEdge, Project, Relationship, Status
from tests.consolidation.conftest import consolidate, fresh, remember
from tests.support.openai_server import Fault

pytestmark = pytest.mark.django_db

# Related facts about one person's work (all-MiniLM-L6-v2: cosine 0.42-0.59 to the first), and one
# unrelated memory.
WORK = (
    "The user works as a data engineer.",
    "The user uses Python for data pipelines.",
    "The user writes SQL every day at work.",
    "The user's team uses Airflow for scheduling.",
)
DOG = "The user has a dog named Pixel."
STATEMENT = "The user is a data engineer who builds pipelines in Python, SQL and Airflow."
OBSERVATION_PROMPT = "Each numbered group below lists memories"


def observer_reply(statement: str = STATEMENT) -> Callable[[list[dict[str, Any]]], str]:
    """The fake LLM: to the observation prompt, one statement for group 1 citing all its memories;
    to anything else (the pair judge), no verdict."""

    def reply(messages: list[dict[str, Any]]) -> str:
        if OBSERVATION_PROMPT not in messages[0]["content"]:
            return '{"verdicts": []}'
        first_group = messages[-1]["content"].split("\n\n")[0]
        cites = [int(n) for n in re.findall(r"^\s+(\d+)\. ", first_group, flags=re.MULTILINE)]
        return json.dumps({"observations": [{"group": 1, "statement": statement, "cites": cites}]})

    return reply


def observer_calls(llm: Any) -> list[str]:
    """The user messages of the requests that asked for observations."""
    return [
        body["messages"][-1]["content"]
        for path, body in llm.calls
        if path.endswith("/chat/completions") and OBSERVATION_PROMPT in body["messages"][0]["content"]
    ]


@pytest.fixture
def llm(settings, fake_openai):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    fake_openai.default_chat = observer_reply()
    return fake_openai


def with_policy(project: Project, policy: str) -> Project:
    Project.objects.filter(pk=project.pk).update(capture_policy=policy)
    project.refresh_from_db()
    return project


def observation_memories(project: Project, user_id: str = "alice") -> list[Memory]:
    return list(Memory.objects.filter(project=project, user_id=user_id, kind=Kind.OBSERVATION))


def test_under_review_an_observation_waits_and_its_approval_writes_it_with_its_links(project, llm):
    with_policy(project, CapturePolicy.REVIEW)
    work = [remember(project, text) for text in WORK]
    dog = remember(project, DOG)
    before = Memory.objects.filter(project=project).count()

    run = consolidate(project)
    assert run.status == "done"
    assert run.counts["observations_proposed"] == 1 and run.counts["observed"] == 0
    [observation] = ConsolidationObservation.objects.filter(run=run)
    assert observation.status == ActionStatus.PROPOSED and observation.content == STATEMENT
    assert observation.confidence == observations.CONFIDENCE
    cited = set(observation.cited)
    assert len(cited) >= 3 and cited <= {str(m.pk) for m in work}
    # Nothing is written until a reviewer approves.
    assert Memory.objects.filter(project=project).count() == before and not observation_memories(project)
    [asked] = observer_calls(llm)
    assert WORK[0] in asked and DOG not in asked

    observations.observation_approve(observation=observation, actor="user:reviewer")
    [memory] = observation_memories(project)
    assert memory.content == STATEMENT and memory.status == Status.ACTIVE and memory.user_id == "alice"
    links = MemoryEdge.objects.filter(from_memory=memory, relationship=Relationship.DERIVED_FROM)
    assert {str(pk) for pk in links.values_list("to_memory_id", flat=True)} == cited
    assert ConsolidationObservation.objects.get(pk=observation.pk).memory_id == memory.pk
    assert fresh(dog).status == Status.ACTIVE and all(fresh(m).status == Status.ACTIVE for m in work)
    with pytest.raises(Conflict):
        observations.observation_approve(observation=observation, actor="user:reviewer")


def test_a_rejected_observation_writes_nothing_and_is_not_proposed_again(project, llm):
    with_policy(project, CapturePolicy.REVIEW)
    for text in WORK:
        remember(project, text)
    [observation] = ConsolidationObservation.objects.filter(run=consolidate(project))
    observations.observation_reject(observation=observation, actor="user:reviewer")
    again = consolidate(project)
    assert again.counts["observations_proposed"] == 0 and not observation_memories(project)
    assert ConsolidationObservation.objects.count() == 1


def test_under_auto_it_is_applied_and_undo_removes_it(project, llm):
    with_policy(project, CapturePolicy.AUTO)
    work = [remember(project, text) for text in WORK]
    run = consolidate(project)
    assert run.counts["observed"] == 1 and run.counts["observations_proposed"] == 0
    [observation] = ConsolidationObservation.objects.filter(run=run)
    assert observation.status == ActionStatus.APPLIED
    [memory] = observation_memories(project)
    assert memory.status == Status.ACTIVE and memory.source["consolidation"] == str(run.pk)
    assert MemoryEdge.objects.filter(from_memory=memory, relationship=Relationship.DERIVED_FROM).count() == len(
        observation.cited
    )

    observations.observation_undo(observation=observation, actor="user:reviewer")
    assert fresh(memory).status == Status.DELETED
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.UNDONE
    assert all(fresh(m).status == Status.ACTIVE for m in work)
    with pytest.raises(Conflict):
        observations.observation_undo(observation=observation, actor="user:reviewer")


def test_superseding_a_cited_memory_returns_the_observation_to_review(project, llm):
    with_policy(project, CapturePolicy.AUTO)
    work = [remember(project, text) for text in WORK]
    [observation] = ConsolidationObservation.objects.filter(run=consolidate(project))
    cited = next(m for m in work if str(m.pk) in observation.cited)
    memory_services.memory_supersede(
        memory=cited,
        draft=memory_services.MemoryDraft(user_id="alice", content="The user now works as an ML engineer."),
        actor="user:alice",
    )
    memory = fresh(observation.memory)
    assert memory.status == Status.PENDING_REVIEW
    assert "what it rests on changed" in memory.revisions.order_by("pk").last().reason
    # While it waits, the memories it cites are not observed again.
    assert consolidate(project).counts["observed"] == 0
    assert len(observation_memories(project)) == 1


def test_a_proposal_whose_cited_memory_changed_goes_stale_on_approval(project, llm):
    with_policy(project, CapturePolicy.REVIEW)
    work = [remember(project, text) for text in WORK]
    [observation] = ConsolidationObservation.objects.filter(run=consolidate(project))
    cited = next(m for m in work if str(m.pk) in observation.cited)
    lifecycle.memory_delete(memory=cited, actor="user:alice")
    with pytest.raises(Conflict):
        observations.observation_approve(observation=observation, actor="user:reviewer")
    assert ConsolidationObservation.objects.get(pk=observation.pk).status == ActionStatus.STALE
    assert not observation_memories(project)


def test_without_an_llm_no_observation_is_proposed(project):
    for text in WORK:
        remember(project, text)
    run = consolidate(project)
    assert run.status == "done" and not run.error
    assert {name: run.counts[name] for name in observations.COUNTS} == dict.fromkeys(observations.COUNTS, 0)
    assert not ConsolidationObservation.objects.exists() and not observation_memories(project)


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '{"observations": [{"group": 1, "statement": "The user codes.", "cites": [1]}]}',  # one citation
        '{"observations": [{"group": 7, "statement": "The user codes.", "cites": [1, 2]}]}',  # no such group
        '{"observations": [{"group": 1, "statement": "", "cites": [1, 2, 3]}]}',
        '{"observations": "none"}',
        # Words the memories never said: no observation, however many it cites.
        '{"observations": [{"group": 1, "statement": "The user is a committed runner preparing for a marathon.", '
        '"cites": [1, 2, 3]}]}',
        Fault(status=500),
    ],
)
def test_a_malformed_or_failed_answer_gives_no_observation_and_the_run_is_done(project, llm, answer):
    with_policy(project, CapturePolicy.AUTO)
    for text in WORK:
        remember(project, text)
    llm.default_chat = '{"verdicts": []}'
    llm.script_chat(answer)
    run = consolidate(project)
    assert run.status == "done" and not run.error
    assert run.counts["observation_groups"] == 1 and run.counts["observed"] == 0
    assert not ConsolidationObservation.objects.exists() and not observation_memories(project)


def test_it_never_cites_another_users_memories(project, llm):
    with_policy(project, CapturePolicy.AUTO)
    mine = {str(remember(project, text).pk) for text in WORK}
    bob_only = "The user maintains the data team's Kafka cluster."
    for text in (*WORK, bob_only):
        remember(project, text, user_id="bob")
    run = consolidate(project)
    [observation] = ConsolidationObservation.objects.filter(run=run)
    assert set(observation.cited) <= mine and observation.user_id == "alice"
    [memory] = observation_memories(project)
    targets = Memory.objects.filter(edges_in__from_memory=memory)
    assert {m.user_id for m in targets} == {"alice"}
    assert all(bob_only not in asked for asked in observer_calls(llm))
    assert not observation_memories(project, "bob")


def test_running_twice_proposes_nothing_new(project, llm):
    with_policy(project, CapturePolicy.REVIEW)
    for text in WORK:
        remember(project, text)
    first = consolidate(project)
    assert first.counts["observations_proposed"] == 1
    asked = len(observer_calls(llm))
    second = consolidate(project)
    assert second.counts["observations_proposed"] == 0 and second.counts["observation_groups"] == 0
    assert len(observer_calls(llm)) == asked
    assert ConsolidationObservation.objects.count() == 1
    assert ConsolidationRun.objects.filter(project=project).count() == 2


def test_an_observation_is_grounded_by_the_share_of_its_words_its_memories_hold() -> None:
    assert observer.grounded(STATEMENT, WORK) > observer.MIN_GROUNDED
    assert observer.grounded("Ben's dietary habits align with his gout.", WORK) == 0.0
    assert observer.grounded("", WORK) == 0.0
