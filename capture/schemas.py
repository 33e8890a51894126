"""Request and response schemas of the capture and observation endpoints (docs/api.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field, StringConstraints

from conversations.schemas import ChatMessageIn
from memories.schemas import StrictSchema, UserId

SessionId = Annotated[str, StringConstraints(max_length=255)]
JobStatusName = Literal["queued", "running", "done", "failed", "coalesced"]


class CaptureIn(StrictSchema):
    user_id: UserId
    session_id: SessionId = ""
    trigger: Literal["turn", "compaction"]
    messages: list[ChatMessageIn] = Field(min_length=1)
    # With a durable conversation, ``messages`` are the turn's new messages (appended to it)
    # and the window is the conversation's tail.
    conversation_id: str | None = None


class ObservationIn(StrictSchema):
    user_id: UserId
    step_name: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    step_type: Annotated[str, StringConstraints(max_length=50)] = ""
    output: str
    session_id: SessionId = ""


class JobAcceptedOut(Schema):
    job_id: str
    status: JobStatusName


class CaptureItemOut(Schema):
    """One proposal of the extractor and what became of it."""

    content: str
    kind: str
    category: str
    scope: str
    confidence: float
    outcome: Literal["pending", "created", "duplicate", "near_duplicate", "failed"]
    memory_id: str | None = None
    detail: str = ""


class CaptureJobOut(Schema):
    job_id: str
    status: JobStatusName
    trigger: Literal["turn", "compaction", "observation"]
    user_id: str
    session_id: str
    conversation_id: str | None
    memory_ids: list[str]
    error: str | None
    note: str | None = None
    attempts: int
    coalesced_into: str | None
    extractor: str | None
    items: list[CaptureItemOut]
    rejected: list[dict[str, Any]]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def job_out(job: Any) -> dict[str, Any]:
    """The API's capture job object."""
    return {
        "job_id": str(job.pk),
        "status": job.status,
        "trigger": job.trigger,
        "user_id": job.user_id,
        "session_id": job.session_id,
        "conversation_id": str(job.conversation_id) if job.conversation_id else None,
        "memory_ids": list(job.memory_ids),
        "error": job.error or None,
        "note": job.payload.get("skipped"),
        "attempts": job.attempts,
        "coalesced_into": str(job.coalesced_into_id) if job.coalesced_into_id else None,
        "extractor": job.payload.get("extractor"),
        "items": [
            {**item, "memory_id": item.get("memory_id"), "detail": item.get("detail", "")} for item in job.proposals
        ],
        "rejected": list(job.payload.get("rejected", [])),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }
