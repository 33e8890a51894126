"""Writes of consolidation's observations (docs/adr/0110-consolidation-observations.md): after a
run's merges and supersedes, the LLM (when one is configured) writes short statements from groups
of the user's related memories (``observer``); each becomes a :class:`ConsolidationObservation`
under the project's capture policy, as a merge does: applied at once under ``auto`` (and under
``confidence`` from the threshold up), otherwise waiting for review.

Applying one writes a memory of kind ``observation`` through ``memories.services``, linked
``derived_from`` to every memory it cites: when one of those is superseded, merged, deleted or
archived, the observation returns to review by the one mechanism that already does it
(docs/adr/0094-dependent-invalidation.md). Undo deletes the memory (softly: its history stays).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

from django.utils import timezone

from capture.services import policy_status
from common.errors import Conflict, DomainError
from consolidation import observer, proposals, selectors
from consolidation.models import ActionStatus, ConsolidationObservation, ConsolidationRun
from consolidation.vectors import Candidate
from memories import lifecycle
from memories import services as memory_services
from memories.models import Kind, Memory, Relationship, Scope, Status

# As the LLM judge's merges (consolidation/llm_judge.py): under the ``confidence`` policy with the
# default threshold of 0.8 a reviewer sees every observation first.
CONFIDENCE = 0.75
# What a run's counts say about observations: applied, left for review, groups the LLM was asked
# about (0 without an LLM).
COUNTS = ("observed", "observations_proposed", "observation_groups")


def observation_key(cited: Sequence[str]) -> str:
    """One name for a set of cited memories, whatever their order."""
    return hashlib.sha256("|".join(sorted(cited)).encode()).hexdigest()


def observe(
    run: ConsolidationRun, *, found: Sequence[Candidate], seeds: Collection[str], retired: Collection[str]
) -> dict[str, int]:
    """Ask for observations about the groups around ``seeds`` (the memories the run compared) and
    turn each answer into a proposal or an applied observation; the counts. Nothing without an LLM,
    and nothing about memories this run retired or proposed to retire."""
    counts = dict.fromkeys(COUNTS, 0)
    if not observer.enabled() or not found:
        return counts
    eligible = selectors.observable_ids(project=run.project, user_id=run.user_id) - set(retired)
    chosen = observer.groups(found, eligible=eligible, seeds=seeds)
    counts["observation_groups"] = len(chosen)
    if not chosen:
        return counts
    memories = selectors.memories_for_judging(ids=[memory_id for group in chosen for memory_id in group.ids])
    proposals = observer.propose(chosen, {memory_id: memory.content for memory_id, memory in memories.items()})
    decided = selectors.decided_observations(keys=[observation_key(p.cited) for p in proposals])
    actor = f"consolidation:{run.pk}"
    waiting: list[ConsolidationObservation] = []
    for proposal in proposals:
        key = observation_key(proposal.cited)
        if key in decided:
            continue
        decided.add(key)
        observation = ConsolidationObservation(
            run=run,
            project=run.project,
            user_id=run.user_id,
            content=proposal.statement,
            cited=list(proposal.cited),
            key=key,
            confidence=CONFIDENCE,
            reason=f"written by the LLM from {len(proposal.cited)} related memories",
        )
        if policy_status(project=run.project, confidence=CONFIDENCE) != Status.ACTIVE:
            waiting.append(observation)
            counts["observations_proposed"] += 1
            continue
        note = _write(observation, actor=actor)
        observation.status = ActionStatus.STALE if note else ActionStatus.APPLIED
        observation.decided_by, observation.decided_at, observation.note = actor, timezone.now(), note
        observation.save(force_insert=True)
        counts["observed"] += 0 if note else 1
    ConsolidationObservation.objects.bulk_create(waiting, ignore_conflicts=True)
    return counts


def _write(observation: ConsolidationObservation, *, actor: str) -> str:
    """Store the observation's memory with its links; "" when done, else why not (a cited memory
    stopped being current since the statement was written)."""
    cited = list(
        Memory.objects.filter(
            pk__in=observation.cited,
            project_id=observation.project_id,
            user_id=observation.user_id,
            scope=Scope.USER,
            status=Status.ACTIVE,
        ).values_list("pk", flat=True)
    )
    if len(cited) != len(observation.cited):
        return "a memory it cites is no longer current"
    draft = memory_services.MemoryDraft(
        user_id=observation.user_id,
        content=observation.content,
        kind=Kind.OBSERVATION,
        source={"consolidation": str(observation.run_id), "cites": list(observation.cited)},
        related=[(str(memory_id), Relationship.DERIVED_FROM) for memory_id in cited],
    )
    try:
        observation.memory = memory_services.memory_create(project=observation.project, draft=draft, actor=actor)
    except DomainError as error:
        return error.message
    return ""


# --- deciding proposals (the review queue) and undoing ---------------------------------------------


def observation_approve(*, observation: ConsolidationObservation, actor: str) -> ConsolidationObservation:
    """Write a proposed observation as a memory linked to what it cites (``proposals.approve``:
    Conflict when it was decided already or a memory it cites stopped being current)."""
    proposals.approve(
        observation,
        lambda: _write(observation, actor=actor),
        actor=actor,
        changed="the memories it cites",
        also=["memory"],
    )
    return observation


def observation_reject(*, observation: ConsolidationObservation, actor: str) -> ConsolidationObservation:
    """Reject a proposed observation: nothing is written, and it is not proposed again."""
    proposals.reject(observation, actor=actor)
    return observation


def observation_undo(
    *, observation: ConsolidationObservation, actor: str, reopen: bool = False
) -> ConsolidationObservation:
    """Take back an applied observation: its memory is deleted (softly; its history and links stay
    readable in the curation UI). ``reopen``: it waits for review again; otherwise the same set of
    memories is not observed again. Conflict when it was not applied or its memory is gone already."""
    if observation.status == ActionStatus.REJECTED and reopen:
        proposals.decide(observation, status=ActionStatus.PROPOSED, actor=actor)
        return observation
    memory = observation.memory
    if observation.status != ActionStatus.APPLIED or memory is None or memory.status == Status.DELETED:
        raise Conflict("only an applied observation whose memory still exists can be undone", code="not_applied")
    lifecycle.memory_delete(memory=memory, actor=actor, reason="undo of a consolidation observation")
    proposals.decide(observation, status=ActionStatus.PROPOSED if reopen else ActionStatus.UNDONE, actor=actor)
    return observation
