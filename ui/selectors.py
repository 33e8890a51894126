"""Reads only the curation UI needs: a person's projects, project-wide listings
across end users, and the dashboard's numbers. Each function is scoped to one
project (or to the person's own teams); end-user isolation for a single end user's
view still goes through :mod:`memories.selectors`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchQuery
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet
from django.db.models.functions import TruncDate
from django.http import Http404
from django.utils import timezone

from capture.models import CaptureJob
from memories.lifecycle import RETURN_TO_REVIEW
from memories.models import ApiKey, Membership, Memory, MemoryEdge, MemoryRevision, Project, Role, Status
from memories.selectors import memories_visible
from retrieval.models import RetrievalLog

ROLE_RANK = {Role.VIEWER: 0, Role.REVIEWER: 1, Role.ADMIN: 2}

SORTS = {
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
    "importance": ("-importance", "-created_at", "-pk"),
    "updated": ("-updated_at", "-pk"),
    "category": ("category", "-created_at", "-pk"),
}


@dataclass(frozen=True)
class Access:
    """Who is looking at which project, with which role."""

    project: Project
    role: str
    username: str

    def can(self, role: str) -> bool:
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]

    @property
    def actor(self) -> str:
        return f"user:{self.username}"


def project_access(*, user: AbstractBaseUser, slug: str) -> Access:
    """The signed-in person's access to the project ``slug``; Http404 unless they are a member
    of its team or a superuser.

    Only signed-in views call it (``project_view`` wraps ``signed_in``)."""
    project = Project.objects.select_related("team").filter(slug=slug).first()
    role = (
        Membership.objects.filter(team_id=project.team_id, user_id=user.pk).values_list("role", flat=True).first()
        if project
        else None
    )
    if project is not None and role is None and getattr(user, "is_superuser", False):
        role = Role.ADMIN  # a superuser administers every project, as in the Django admin
    if project is None or role is None:
        raise Http404("project not found")
    return Access(project=project, role=role, username=user.get_username())


@dataclass(frozen=True)
class ListFilters:
    user_id: str = ""
    scope: str = ""
    kind: str = ""
    category: str = ""
    status: str = ""
    q: str = ""
    sort: str = "newest"


def memories_for_project(*, project: Project, filters: ListFilters) -> QuerySet[Memory]:
    """Every end user's memories in the project, filtered and sorted; deleted ones only on request."""
    queryset = Memory.objects.filter(project=project)
    # Deleted memories stay out of the list unless asked for (to restore them).
    queryset = queryset.filter(status=filters.status) if filters.status else queryset.exclude(status=Status.DELETED)
    for name in ("user_id", "scope", "kind", "category"):
        if value := getattr(filters, name):
            queryset = queryset.filter(**{name: value})
    if filters.q:
        queryset = queryset.filter(search=SearchQuery(filters.q, search_type="websearch", config="english"))
    return queryset.order_by(*SORTS.get(filters.sort, SORTS["newest"]))


def end_users(*, project: Project, limit: int = 500) -> list[str]:
    """Distinct end users with memories in the project (for filter suggestions)."""
    rows = Memory.objects.filter(project=project).values_list("user_id", flat=True).distinct().order_by("user_id")
    return list(rows[:limit])


def busiest_end_user(*, project: Project) -> str:
    """The end user with the most memories not deleted (ties: the first by name); "" when none."""
    row = (
        Memory.objects.filter(project=project)
        .exclude(status=Status.DELETED)
        .values("user_id")
        .annotate(n=Count("pk"))
        .order_by("-n", "user_id")
        .first()
    )
    return str(row["user_id"]) if row else ""


def memory_in_project(*, project: Project, memory_id: str | uuid.UUID, with_deleted: bool = True) -> Memory:
    """One memory of the project (any end user); Http404 for ids of other projects or malformed ones."""
    try:
        pk = uuid.UUID(str(memory_id))
    except ValueError as error:
        raise Http404("memory not found") from error
    queryset = Memory.objects.select_related("project", "supersedes").filter(project=project, pk=pk)
    if not with_deleted:
        queryset = queryset.exclude(status=Status.DELETED)
    memory = queryset.first()
    if memory is None:
        raise Http404("memory not found")
    return memory


def memories_by_ids(*, project: Project, ids: list[str]) -> list[Memory]:
    """The project's memories among ``ids`` (malformed and foreign ids are dropped)."""
    valid = []
    for raw in ids:
        try:
            valid.append(uuid.UUID(raw))
        except ValueError:
            continue
    return list(Memory.objects.select_related("project").filter(project=project, pk__in=valid))


def memory_links(*, memory: Memory) -> list[MemoryEdge]:
    """Links from and to ``memory`` whose other end is not deleted."""
    edges = (
        MemoryEdge.objects.filter(Q(from_memory=memory) | Q(to_memory=memory))
        .exclude(from_memory__status=Status.DELETED)
        .exclude(to_memory__status=Status.DELETED)
        .select_related("from_memory", "to_memory")
        .order_by("created_at")
    )
    return list(edges)


def edge_in_project(*, project: Project, edge_id: int) -> MemoryEdge:
    edge = MemoryEdge.objects.select_related("from_memory", "to_memory").filter(project=project, pk=edge_id).first()
    if edge is None:
        raise Http404("link not found")
    return edge


# Confidence bands of the review queue's filter: (lowest included, highest excluded).
CONFIDENCE_BANDS = {"low": (0.0, 0.5), "medium": (0.5, 0.8), "high": (0.8, 1.01)}


def review_queue(*, project: Project, user_id: str = "", category: str = "", confidence: str = "") -> QuerySet[Memory]:
    """Memories waiting for review, oldest first (first captured, first reviewed), optionally
    of one end user, one category, or one band of capture's confidence (``CONFIDENCE_BANDS``)."""
    queryset = Memory.objects.filter(project=project, status=Status.PENDING_REVIEW)
    if user_id:
        queryset = queryset.filter(user_id=user_id)
    if category:
        queryset = queryset.filter(category=category)
    if confidence in CONFIDENCE_BANDS:
        low, high = CONFIDENCE_BANDS[confidence]
        queryset = queryset.filter(metadata__confidence__gte=low, metadata__confidence__lt=high)
    return queryset.order_by("created_at", "pk")


def capture_jobs_by_id(*, project: Project, memories: list[Memory]) -> dict[str, CaptureJob]:
    """The capture jobs the memories came from, in one query, keyed by id as a string."""
    ids = set()
    for memory in memories:
        raw = (memory.source or {}).get("capture_job")
        try:
            ids.add(uuid.UUID(str(raw)))
        except ValueError:
            continue
    jobs = CaptureJob.objects.filter(project=project, pk__in=ids) if ids else CaptureJob.objects.none()
    return {str(job.pk): job for job in jobs}


def graph_data(*, project: Project, user_id: str, limit: int = 2000) -> dict[str, Any]:
    """Nodes (an end user's visible memories, superseded included) and the links between them."""
    memories = list(
        memories_visible(project=project, user_id=user_id)
        .order_by("-created_at")
        .values("id", "content", "category", "kind", "status", "scope", "version")[:limit]
    )
    ids = [m["id"] for m in memories]
    edges = MemoryEdge.objects.filter(project=project, from_memory_id__in=ids, to_memory_id__in=ids).values(
        "from_memory_id", "to_memory_id", "relationship"
    )
    return {
        "nodes": [{**m, "id": str(m["id"])} for m in memories],
        "edges": [
            {"source": str(e["from_memory_id"]), "target": str(e["to_memory_id"]), "relationship": e["relationship"]}
            for e in edges
        ],
    }


def api_keys(*, project: Project) -> list[ApiKey]:
    return list(ApiKey.objects.filter(project=project).select_related("created_by").order_by("-created_at"))


def team_members(*, project: Project) -> list[Membership]:
    return list(Membership.objects.filter(team=project.team).select_related("user").order_by("user__username"))


def membership_in_team(*, project: Project, membership_id: int) -> Membership:
    membership = Membership.objects.filter(team=project.team, pk=membership_id).select_related("user").first()
    if membership is None:
        raise Http404("member not found")
    return membership


# --- Dashboard -------------------------------------------------------------------------


class Percentile(Aggregate):
    """``percentile_cont(fraction) WITHIN GROUP (ORDER BY expr)``: Postgres' ordered-set aggregate."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, *, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction))


def latency_percentiles(logs: QuerySet[RetrievalLog]) -> dict[str, Any]:
    """p50 and p95 latency (ms, interpolated between ranks) and the count of ``logs``: the one
    definition every page that shows a latency percentile uses, so two pages never disagree."""
    return logs.aggregate(
        p50=Percentile("latency_ms", fraction=0.5), p95=Percentile("latency_ms", fraction=0.95), n=Count("pk")
    )


@dataclass(frozen=True)
class DayCount:
    day: date
    count: int


def _per_day(queryset: QuerySet[Any], *, days: int) -> list[DayCount]:
    today = timezone.localdate()
    start = today - timedelta(days=days - 1)
    rows = (
        queryset.filter(created_at__date__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("pk"))
    )
    counts = {row["day"]: row["n"] for row in rows}
    return [
        DayCount(day=start + timedelta(days=i), count=counts.get(start + timedelta(days=i), 0)) for i in range(days)
    ]


def dashboard(*, project: Project, days: int = 14) -> dict[str, Any]:
    """Counts by status and category, captures and retrievals per day, retrieval latency percentiles."""
    memories = Memory.objects.filter(project=project)
    by_status = dict(memories.values_list("status").annotate(n=Count("pk")).order_by())
    by_category = list(
        memories.exclude(status=Status.DELETED).values("category").annotate(n=Count("pk")).order_by("-n", "category")
    )
    since = timezone.now() - timedelta(days=days)
    latency = latency_percentiles(RetrievalLog.objects.filter(project=project, created_at__gte=since))
    return {
        "by_status": [(status.value, status.label, by_status.get(status.value, 0)) for status in Status],
        "by_category": by_category,
        "captures": _per_day(CaptureJob.objects.filter(project=project), days=days),
        "retrievals": _per_day(RetrievalLog.objects.filter(project=project), days=days),
        "latency": latency,
        "pending_review": by_status.get(Status.PENDING_REVIEW, 0),
    }


def retrieval_logs(*, project: Project) -> QuerySet[RetrievalLog]:
    return RetrievalLog.objects.filter(project=project).order_by("-created_at", "-pk")


def recent_latency(*, project: Project, count: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The latest ``count`` retrievals' points (oldest first) and their latency percentiles."""
    latest = retrieval_logs(project=project)[:count]
    points = [dict(row) for row in latest.values("created_at", "latency_ms", "cached")][::-1]
    return points, latency_percentiles(RetrievalLog.objects.filter(pk__in=latest.values("pk")))


def capture_jobs(*, project: Project, status: str = "") -> QuerySet[CaptureJob]:
    queryset = CaptureJob.objects.filter(project=project).order_by("-created_at", "-pk")
    return queryset.filter(status=status) if status else queryset


def returned_to_review(*, memories: list[Memory]) -> dict[str, str]:
    """Why each of ``memories`` that came back to review did ("what it rests on changed: …"), by
    id: those whose latest revision is that return (memories.lifecycle), in one query."""
    if not memories:
        return {}
    latest = (
        MemoryRevision.objects.filter(memory__in=memories)
        .order_by("memory_id", "-created_at", "-id")
        .distinct("memory_id")
        .values_list("memory_id", "action", "reason")
    )
    return {str(memory_id): reason for memory_id, action, reason in latest if action == RETURN_TO_REVIEW}
