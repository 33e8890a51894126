"""The capture and observation endpoints of docs/api.md: accept work with 202, report on jobs."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from capture import selectors, services
from capture.schemas import CaptureIn, CaptureJobOut, JobAcceptedOut, ObservationIn, job_out
from common.auth import ERRORS, actor, api_key
from common.idempotency import idempotent
from memories.schemas import UserId

router = Router(tags=["capture"])


@router.post("/capture", response={202: JobAcceptedOut, **ERRORS})
@idempotent
def capture(request: HttpRequest, body: CaptureIn) -> Status[Any]:
    """Queue a capture of the conversation window; classification runs in the background."""
    job = services.capture_submit(
        project=api_key(request).project,
        user_id=body.user_id,
        session_id=body.session_id,
        trigger=body.trigger,
        messages=[m.model_dump(mode="json", exclude_unset=True) for m in body.messages],
        conversation_id=body.conversation_id,
        actor=actor(request),
    )
    return Status(202, {"job_id": str(job.pk), "status": job.status})


@router.get("/capture/{job_id}", response={200: CaptureJobOut, **ERRORS})
def capture_job(request: HttpRequest, job_id: str, user_id: UserId) -> dict[str, Any]:
    """One of ``user_id``'s capture or observation jobs: status, the memories it created, and any error.

    ``user_id`` is required, as in every user-scoped request: another user's job is a 404.
    """
    job = selectors.capture_job_get(project=api_key(request).project, job_id=job_id, user_id=user_id)
    return job_out(job)


@router.post("/observations", response={202: JobAcceptedOut, **ERRORS})
@idempotent
def observation(request: HttpRequest, body: ObservationIn) -> Status[Any]:
    """Queue extraction of findings, insights and lessons from an agent step's output."""
    job = services.observation_submit(
        project=api_key(request).project,
        user_id=body.user_id,
        step_name=body.step_name,
        step_type=body.step_type,
        output=body.output,
        session_id=body.session_id,
        actor=actor(request),
    )
    return Status(202, {"job_id": str(job.pk), "status": job.status})
