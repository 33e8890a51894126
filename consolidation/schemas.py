"""Response schemas of the consolidation endpoints (docs/api.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Schema

from consolidation.models import ConsolidationAction, ConsolidationRun

RunStatusName = Literal["queued", "running", "done", "failed"]


class ConsolidationAcceptedOut(Schema):
    job_id: str
    status: RunStatusName


class ConsolidationCountsOut(Schema):
    """Applied merges and supersedes, proposals waiting for review, pairs judged distinct; and
    observations applied, left for review, and the groups the LLM was asked about
    (docs/adr/0110-consolidation-observations.md)."""

    merged: int
    superseded: int
    kept: int
    proposed: int
    observed: int
    observations_proposed: int
    observation_groups: int


# Every count a run reports; a run stored before observations existed lacks theirs, which are 0.
COUNT_NAMES = tuple(ConsolidationCountsOut.model_fields)


class ConsolidationActionOut(Schema):
    id: int
    action: Literal["merge", "supersede"]
    status: Literal["proposed", "applied", "rejected", "undone", "stale"]
    survivor_id: str
    retired_id: str
    confidence: float
    reason: str


class ConsolidationOut(Schema):
    job_id: str
    status: RunStatusName
    user_id: str
    trigger: str
    full: bool
    compared: int
    counts: ConsolidationCountsOut
    actions: list[ConsolidationActionOut]
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def action_out(action: ConsolidationAction) -> dict[str, Any]:
    return {
        "id": action.pk,
        "action": action.kind,
        "status": action.status,
        "survivor_id": str(action.survivor_id),
        "retired_id": str(action.retired_id),
        "confidence": action.confidence,
        "reason": action.reason,
    }


def run_out(run: ConsolidationRun, actions: list[ConsolidationAction]) -> dict[str, Any]:
    counts = {name: int((run.counts or {}).get(name, 0)) for name in COUNT_NAMES}
    return {
        "job_id": str(run.pk),
        "status": run.status,
        "user_id": run.user_id,
        "trigger": run.trigger,
        "full": run.full,
        "compared": run.compared,
        "counts": counts,
        "actions": [action_out(action) for action in actions],
        "error": run.error or None,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }
