"""Reads of consolidation, scoped to one project (and one end user where the caller names one)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from django.db import connection
from django.db.models import Min, Q, QuerySet
from django.db.models.functions import Now

from common.errors import NotFound
from consolidation.models import (
    ActionStatus,
    ConsolidationAction,
    ConsolidationObservation,
    ConsolidationRun,
    ConsolidationState,
    RunStatus,
)
from memories.models import EmbeddingStatus, Kind, Memory, MemoryEdge, Project, Relationship, Scope, Status

UNFINISHED = (RunStatus.QUEUED, RunStatus.RUNNING)


def run_get(*, project: Project, run_id: str | uuid.UUID, user_id: str | None = None) -> ConsolidationRun:
    """One run of ``project`` (and of ``user_id`` when given), or NotFound (also for malformed ids)."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError as error:
        raise NotFound("consolidation not found") from error
    runs = ConsolidationRun.objects.filter(project=project, pk=pk)
    if user_id is not None:
        runs = runs.filter(user_id=user_id)
    run = runs.first()
    if run is None:
        raise NotFound("consolidation not found")
    return run


def unfinished_run(*, project: Project, user_id: str) -> ConsolidationRun | None:
    return ConsolidationRun.objects.filter(project=project, user_id=user_id, status__in=UNFINISHED).first()


def runs_for_project(*, project: Project, user_id: str = "", limit: int = 50) -> list[ConsolidationRun]:
    runs = ConsolidationRun.objects.filter(project=project)
    if user_id:
        runs = runs.filter(user_id=user_id)
    return list(runs.order_by("-created_at")[:limit])


def state_of(*, project: Project, user_id: str) -> ConsolidationState | None:
    return ConsolidationState.objects.filter(project=project, user_id=user_id).first()


def run_actions(*, run: ConsolidationRun) -> list[ConsolidationAction]:
    return list(run.actions.select_related("survivor", "retired").order_by("created_at", "pk"))


def proposals(*, project: Project, user_id: str = "", limit: int = 100) -> QuerySet[ConsolidationAction]:
    """Merges and supersedes waiting for review, oldest first, with both memories."""
    queryset = ConsolidationAction.objects.filter(project=project, status=ActionStatus.PROPOSED)
    if user_id:
        queryset = queryset.filter(user_id=user_id)
    return queryset.select_related("survivor", "retired", "run").order_by("created_at", "pk")[:limit]


def proposals_count(*, project: Project) -> int:
    return ConsolidationAction.objects.filter(project=project, status=ActionStatus.PROPOSED).count()


def action_get(*, project: Project, action_id: int | str) -> ConsolidationAction:
    try:
        pk = int(action_id)
    except (TypeError, ValueError) as error:
        raise NotFound("consolidation proposal not found") from error
    action = ConsolidationAction.objects.select_related("survivor", "retired").filter(project=project, pk=pk).first()
    if action is None:
        raise NotFound("consolidation proposal not found")
    return action


def actions_by_id(*, project: Project, ids: Sequence[str]) -> list[ConsolidationAction]:
    valid = [int(raw) for raw in ids if str(raw).isdigit()]
    return list(ConsolidationAction.objects.select_related("survivor", "retired").filter(project=project, pk__in=valid))


def decided_pairs(*, pairs: Sequence[str]) -> set[str]:
    """Those of ``pairs`` some run has already made an action of (whatever became of it)."""
    found: set[str] = set()
    for start in range(0, len(pairs), 5000):
        chunk = list(pairs[start : start + 5000])
        found |= set(ConsolidationAction.objects.filter(pair__in=chunk).values_list("pair", flat=True))
    return found


# --- what a run reads -----------------------------------------------------------------------------


def _active(*, project: Project, user_id: str) -> QuerySet[Memory]:
    """The end user's own current memories (any scope they wrote), unexpired; observations are
    not among them: one is kept true through what it cites, never merged with it."""
    unexpired = Q(expires_at__isnull=True) | Q(expires_at__gt=Now())
    current = Memory.objects.filter(project=project, user_id=user_id, status=Status.ACTIVE).filter(unexpired)
    return current.exclude(kind=Kind.OBSERVATION)


def active_ids(*, project: Project, user_id: str) -> list[tuple[str, str]]:
    """``(id, scope)`` of every current memory of the user."""
    return [(str(pk), scope) for pk, scope in _active(project=project, user_id=user_id).values_list("pk", "scope")]


def changed_since(*, project: Project, user_id: str, since: datetime) -> list[str]:
    """Ids of the user's current memories changed after ``since``."""
    changed = _active(project=project, user_id=user_id).filter(updated_at__gt=since)
    return [str(pk) for pk in changed.values_list("pk", flat=True)]


def oldest_unembedded(*, ids: Sequence[str]) -> datetime | None:
    """When the least recently changed of ``ids`` still waiting for its vector was changed (a
    memory whose embedding failed for good is not waited for)."""
    if not ids:
        return None
    waiting = Memory.objects.filter(pk__in=list(ids), embedding_status=EmbeddingStatus.PENDING)
    oldest: datetime | None = waiting.aggregate(oldest=Min("updated_at"))["oldest"]
    return oldest


def memories_for_judging(*, ids: Sequence[str]) -> dict[str, Memory]:
    """The memories a run judges, with what it reads of them (content, age, history), by id."""
    found: dict[str, Memory] = {}
    fields = ("id", "content", "created_at", "version", "scope", "user_id", "project_id", "supersedes_id")
    for start in range(0, len(ids), 5000):
        for memory in Memory.objects.filter(pk__in=list(ids[start : start + 5000])).only(*fields):
            found[str(memory.pk)] = memory
    return found


_USERS_TO_CONSOLIDATE = """
SELECT m.project_id, m.user_id
FROM memories_memory m
LEFT JOIN consolidation_consolidationstate s ON s.project_id = m.project_id AND s.user_id = m.user_id
WHERE m.status = 'active' AND (s.watermark IS NULL OR m.updated_at > s.watermark)
GROUP BY m.project_id, m.user_id
ORDER BY min(m.updated_at)
LIMIT %s
"""


def users_to_consolidate(*, limit: int) -> list[tuple[int, str]]:
    """``(project id, user id)`` of end users with current memories changed since their last run
    (or never consolidated), longest waiting first."""
    with connection.cursor() as cursor:
        cursor.execute(_USERS_TO_CONSOLIDATE, [limit])
        return [(int(project_id), str(user_id)) for project_id, user_id in cursor.fetchall()]


def runs_to_requeue(*, queued_before: datetime, running_before: datetime, limit: int) -> list[str]:
    queued = ConsolidationRun.objects.filter(status=RunStatus.QUEUED, updated_at__lt=queued_before)
    running = ConsolidationRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=running_before)
    return [str(pk) for pk in (queued | running).order_by("updated_at").values_list("pk", flat=True)[:limit]]


# --- observations (docs/adr/0110-consolidation-observations.md) ------------------------------------

# An observation memory in one of these still stands on what it cites (active, or back in review).
LIVE_OBSERVATION = (Status.ACTIVE, Status.PENDING_REVIEW)


def observable_ids(*, project: Project, user_id: str) -> set[str]:
    """The user's own current memories of user scope an observation may cite: none cited by an
    observation that still stands, nor by one waiting for review."""
    mine = _active(project=project, user_id=user_id).filter(scope=Scope.USER)
    ids = {str(pk) for pk in mine.values_list("pk", flat=True)}
    cited = MemoryEdge.objects.filter(
        project=project,
        relationship=Relationship.DERIVED_FROM,
        from_memory__user_id=user_id,
        from_memory__kind=Kind.OBSERVATION,
        from_memory__status__in=LIVE_OBSERVATION,
    ).values_list("to_memory_id", flat=True)
    ids -= {str(pk) for pk in cited}
    waiting = ConsolidationObservation.objects.filter(project=project, user_id=user_id, status=ActionStatus.PROPOSED)
    for cites in waiting.values_list("cited", flat=True):
        ids -= set(cites)
    return ids


def decided_observations(*, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` (sets of cited memories) some run has already made an observation of."""
    return set(ConsolidationObservation.objects.filter(key__in=list(keys)).values_list("key", flat=True))


def observation_proposals(*, project: Project, user_id: str = "", limit: int = 100) -> list[ConsolidationObservation]:
    """Observations waiting for review, oldest first."""
    queryset = ConsolidationObservation.objects.filter(project=project, status=ActionStatus.PROPOSED)
    if user_id:
        queryset = queryset.filter(user_id=user_id)
    return list(queryset.order_by("created_at", "pk")[:limit])


def observation_get(*, project: Project, observation_id: int | str) -> ConsolidationObservation:
    try:
        pk = int(observation_id)
    except (TypeError, ValueError) as error:
        raise NotFound("consolidation observation not found") from error
    observation = ConsolidationObservation.objects.filter(project=project, pk=pk).first()
    if observation is None:
        raise NotFound("consolidation observation not found")
    return observation


def run_observations(*, run: ConsolidationRun) -> list[ConsolidationObservation]:
    return list(run.observations.order_by("created_at", "pk"))


def observation_proposals_count(*, project: Project) -> int:
    return ConsolidationObservation.objects.filter(project=project, status=ActionStatus.PROPOSED).count()


def observations_by_id(*, project: Project, ids: Sequence[str]) -> list[ConsolidationObservation]:
    valid = [int(raw) for raw in ids if str(raw).isdigit()]
    return list(ConsolidationObservation.objects.filter(project=project, pk__in=valid).order_by("created_at", "pk"))


def cited_memories(*, project: Project, observations: Sequence[ConsolidationObservation]) -> dict[str, Memory]:
    """Every memory the ``observations`` cite, whatever became of it, by id: one statement for a
    whole page of them (the ids are kept on the row, not as links, until one is applied)."""
    ids = {memory_id for observation in observations for memory_id in observation.cited}
    if not ids:
        return {}
    return {str(memory.pk): memory for memory in Memory.objects.filter(project=project, pk__in=list(ids))}
