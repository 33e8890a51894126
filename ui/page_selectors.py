"""Reads of the memory page, home, members, retrieval-log detail and evaluation pages.

Kept apart from :mod:`ui.selectors` (the lists, review and dashboard) so each half of the
UI can change on its own. Every function is scoped to one project or to the person's own
teams; one end user's memories are read through :mod:`memories.selectors`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Min, Q
from django.http import Http404

from capture.models import CaptureJob
from conversations.models import Conversation, Message
from memories.models import ApiKey, Membership, Memory, Project, Role, Status, Team
from memories.selectors import memories_visible
from retrieval.models import RetrievalLog

# How actors are written (memories.models.Memory.created_by): kind, then what names it.
_ACTOR = re.compile(r"^(?P<kind>api_key|user|system|classifier|rules):(?P<ref>.*)$")


@dataclass(frozen=True)
class Actor:
    """Who did something, as a person reads it; ``job_id`` when it was a capture job."""

    raw: str
    label: str
    job_id: str = ""


def actors_named(*, project: Project, actors: list[str]) -> dict[str, Actor]:
    """A readable name for each actor string: the key's name, the person, "capture job …".

    One query for the project's keys among the ``api_key:<prefix>`` actors.
    """
    parsed = {raw: _ACTOR.match(raw) for raw in set(actors)}
    prefixes = {m["ref"] for m in parsed.values() if m and m["kind"] == "api_key"}
    keys = dict(ApiKey.objects.filter(project=project, prefix__in=prefixes).values_list("prefix", "name"))
    return {raw: _actor(raw, match, keys) for raw, match in parsed.items()}


def _actor(raw: str, match: re.Match[str] | None, keys: dict[str, str]) -> Actor:
    if match is None:
        return Actor(raw=raw, label=raw)
    kind, ref = match["kind"], match["ref"]
    if kind == "api_key":
        name = keys.get(ref)
        return Actor(raw=raw, label=f"API key “{name}” ({ref}…)" if name else f"API key {ref}…")
    if kind == "user":
        return Actor(raw=raw, label=ref)
    if kind == "system":
        return Actor(raw=raw, label=f"system ({ref})")
    job_id = ref if _is_uuid(ref) else ""
    extractor = "LLM classifier" if kind == "classifier" else "rules"
    return Actor(raw=raw, label=f"capture job {ref[:8]}… ({extractor})", job_id=job_id)


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Source:
    """Where a memory came from, as labelled fields; empty strings for what it does not say."""

    job_id: str = ""
    job_status: str = ""
    conversation: Conversation | None = None
    conversation_id: str = ""
    session_id: str = ""
    trigger: str = ""
    excerpt: str = ""
    step: str = ""
    extractor: str = ""
    # The stored messages it was read from, in the order they were said.
    messages: tuple[Message, ...] = ()


def memory_source(*, memory: Memory) -> Source | None:
    """The memory's ``source`` resolved against the project: its capture job and conversation."""
    raw = memory.source if isinstance(memory.source, dict) else None
    if not raw:
        return None
    job_id = str(raw.get("capture_job") or "")
    job = CaptureJob.objects.filter(project=memory.project, pk=job_id).first() if _is_uuid(job_id) else None
    conversation_id = str(raw.get("conversation") or "")
    conversation = (
        Conversation.objects.filter(project=memory.project, pk=conversation_id).first()
        if _is_uuid(conversation_id)
        else None
    )
    step = " / ".join(str(raw[k]) for k in ("step_type", "step_name") if raw.get(k))
    ids = [str(m.get("id")) for m in raw.get("messages") or [] if isinstance(m, dict) and _is_uuid(str(m.get("id")))]
    said = Message.objects.filter(
        pk__in=ids, conversation__project=memory.project, conversation__user_id=memory.user_id
    ).order_by("said_at", "created_at", "seq")
    return Source(
        job_id=job_id if job else "",
        job_status=job.status if job else "",
        conversation=conversation,
        conversation_id=conversation_id if conversation else "",
        session_id=str(raw.get("session_id") or ""),
        trigger=str(raw.get("trigger") or ""),
        excerpt=str(raw.get("excerpt") or ""),
        step=step,
        extractor=str(raw.get("extractor") or ""),
        messages=tuple(said) if ids else (),
    )


def link_search(*, memory: Memory, text: str, limit: int = 10) -> list[Memory]:
    """Memories the end user of ``memory`` can see whose content contains ``text``, newest first.

    A substring match, not full text: the picker searches as the person types, half-words included.
    """
    text = text.strip()
    if not text:
        return []
    queryset = memories_visible(project=memory.project, user_id=memory.user_id).exclude(pk=memory.pk)
    return list(queryset.filter(content__icontains=text).order_by("-created_at", "-pk")[:limit])


# --- Home: the person's projects with their counts ----------------------------------------


@dataclass(frozen=True)
class ProjectCounts:
    project: Project
    active: int = 0
    pending: int = 0
    oldest_pending: datetime | None = None


@dataclass(frozen=True)
class TeamProjects:
    team: Team
    role: str
    projects: list[ProjectCounts]


def home_teams(*, user: AbstractBaseUser) -> list[TeamProjects]:
    """The teams whose projects the person sees (a superuser sees every team, as an admin),
    each project with its active and pending-review counts: two queries."""
    roles = dict(Membership.objects.filter(user_id=user.pk).values_list("team_id", "role"))
    superuser = bool(getattr(user, "is_superuser", False))
    teams = list(
        (Team.objects.all() if superuser else Team.objects.filter(pk__in=roles))
        .prefetch_related("projects")
        .order_by("name", "pk")
    )
    projects = [p for team in teams for p in team.projects.all()]
    pending = Q(status=Status.PENDING_REVIEW)
    rows = (
        Memory.objects.filter(project__in=projects)
        .values("project_id")
        .annotate(
            active=Count("pk", filter=Q(status=Status.ACTIVE)),
            pending=Count("pk", filter=pending),
            oldest_pending=Min("created_at", filter=pending),
        )
        .order_by()
    )
    counts: dict[int, dict[str, Any]] = {
        row["project_id"]: {k: row[k] for k in ("active", "pending", "oldest_pending")} for row in rows
    }
    return [
        TeamProjects(
            team=team,
            role=roles.get(team.pk, Role.ADMIN),  # only a superuser sees a team without a membership
            projects=[ProjectCounts(project=p, **counts.get(p.pk, {})) for p in _by_slug(team)],
        )
        for team in teams
    ]


def _by_slug(team: Team) -> list[Project]:
    return sorted(team.projects.all(), key=lambda project: project.slug)


# --- Retrieval log: one call and what it returned ------------------------------------------


@dataclass(frozen=True)
class Returned:
    rank: int
    memory_id: str
    score: float | None
    memory: Memory | None  # None: deleted or purged since


def retrieval_log_get(*, project: Project, log_id: int) -> RetrievalLog:
    """One retrieve call of the project; Http404 for another project's."""
    found = RetrievalLog.objects.filter(project=project, pk=log_id).first()
    if found is None:
        raise Http404("retrieval not found")
    return found


def retrieval_returned(*, project: Project, log: RetrievalLog) -> list[Returned]:
    """The memories the call returned, in its order, with their scores (logs written before
    scores were kept have none)."""
    ids = [str(i) for i in log.memory_ids]
    valid = [i for i in ids if _is_uuid(i)]
    rows = {str(m.pk): m for m in Memory.objects.filter(project=project, pk__in=valid)}
    scores = list(log.scores or [])
    return [
        Returned(
            rank=i + 1,
            memory_id=memory_id,
            score=float(scores[i]) if i < len(scores) else None,
            memory=rows.get(memory_id),
        )
        for i, memory_id in enumerate(ids)
    ]
