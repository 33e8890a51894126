"""The consolidation endpoints of docs/api.md: start a run for an end user (202), report on it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from common.auth import ERRORS, actor, api_key
from common.errors import Invalid
from common.idempotency import idempotent
from consolidation import selectors, services
from consolidation.schemas import ConsolidationAcceptedOut, ConsolidationOut, run_out
from memories.schemas import UserId

router = Router(tags=["consolidation"])

# The most proposals and changes one answer lists (the counts cover them all).
ACTIONS_SHOWN = 200


@router.post("/users/{user_id}/consolidate", response={202: ConsolidationAcceptedOut, **ERRORS})
@idempotent
def consolidate(request: HttpRequest, user_id: str) -> Status[Any]:
    """Queue a consolidation of ``user_id``'s memories: near-duplicates merged and unlinked changes
    of mind superseded, under the project's capture policy. The run already waiting or running
    for this user answers when there is one."""
    if not user_id.strip() or len(user_id) > 255:
        raise Invalid("user_id must be 1 to 255 characters", code="invalid_user_id")
    run = services.consolidation_submit(
        project=api_key(request).project, user_id=user_id, trigger="api", actor=actor(request)
    )
    return Status(202, {"job_id": str(run.pk), "status": run.status})


@router.get("/consolidations/{job_id}", response={200: ConsolidationOut, **ERRORS})
def consolidation(request: HttpRequest, job_id: str, user_id: UserId) -> dict[str, Any]:
    """One of ``user_id``'s consolidations: its status, the count per action, and what it did or
    proposed. ``user_id`` is required: another user's run is a 404."""
    run = selectors.run_get(project=api_key(request).project, run_id=job_id, user_id=user_id)
    actions = selectors.run_actions(run=run)[:ACTIONS_SHOWN]
    return run_out(run, actions)
