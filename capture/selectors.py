"""Reads for the capture pipeline, scoped to one project and one end user.

Visibility comes from ``memories.selectors`` (never re-implemented here): a capture job
only ever sees, links to or de-duplicates against memories its user may see.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from capture.models import CaptureJob, JobStatus
from common.errors import NotFound
from memories.models import Memory, Project, Status
from memories.selectors import LIVE_STATUSES, memories_visible
from memories.services import content_hash


def capture_job_get(*, project: Project, job_id: str, user_id: str | None = None) -> CaptureJob:
    """One job of ``project`` (and of ``user_id`` when given), or NotFound (also for bad ids)."""
    try:
        pk = uuid.UUID(str(job_id))
    except ValueError as error:
        raise NotFound("capture job not found") from error
    jobs = CaptureJob.objects.filter(project=project, pk=pk)
    if user_id is not None:
        jobs = jobs.filter(user_id=user_id)
    job = jobs.first()
    if job is None:
        raise NotFound("capture job not found")
    return job


def memories_for_classifier(*, project: Project, user_id: str, limit: int) -> list[Memory]:
    """The live memories the classifier may supersede or link to, newest first."""
    queryset = memories_visible(project=project, user_id=user_id).filter(status__in=LIVE_STATUSES)
    return list(queryset.only("id", "kind", "category", "content", "scope", "status").order_by("-created_at")[:limit])


def still_visible(*, project: Project, user_id: str, memory_ids: Sequence[str]) -> list[str]:
    """Those of ``memory_ids`` the user can still see (none deleted meanwhile), in their order."""
    ids = [mid for mid in dict.fromkeys(memory_ids) if _as_uuid(mid) is not None]
    visible = memories_visible(project=project, user_id=user_id).filter(pk__in=ids)
    found = set(visible.values_list("pk", flat=True))
    return [mid for mid in ids if _as_uuid(mid) in found]


def live_head(*, project: Project, user_id: str, memory_id: str) -> Memory | None:
    """Memory ``memory_id`` if it can still be superseded: visible to the user, live, and the
    head of its chain; None when it was deleted, archived or superseded meanwhile."""
    pk = _as_uuid(memory_id)
    if pk is None:
        return None
    queryset = memories_visible(project=project, user_id=user_id).filter(status__in=LIVE_STATUSES)
    return queryset.select_related("project").filter(pk=pk, superseded_by__isnull=True).first()


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def memory_written_by_job(*, job: CaptureJob, content: str) -> Memory | None:
    """The memory this job already wrote with ``content`` (a re-run after a crash), if any."""
    return (
        Memory.objects.filter(project_id=job.project_id, user_id=job.user_id, content_hash=content_hash(content))
        .filter(source__capture_job=str(job.pk))
        .exclude(status=Status.DELETED)
        .first()
    )


def exact_duplicate(*, project: Project, user_id: str, content: str) -> Memory | None:
    """A live visible memory with the same normalised content, if any."""
    queryset = memories_visible(project=project, user_id=user_id).filter(status__in=LIVE_STATUSES)
    return queryset.filter(content_hash=content_hash(content)).first()


def jobs_to_requeue(*, queued_before: datetime, running_before: datetime, limit: int) -> list[str]:
    """Ids of jobs stuck in ``queued`` or ``running`` since before the given times, oldest first
    (ids only: a job row carries its whole conversation window)."""
    queued = CaptureJob.objects.filter(status=JobStatus.QUEUED, updated_at__lt=queued_before)
    running = CaptureJob.objects.filter(status=JobStatus.RUNNING, updated_at__lt=running_before)
    return [str(pk) for pk in (queued | running).order_by("updated_at").values_list("pk", flat=True)[:limit]]
